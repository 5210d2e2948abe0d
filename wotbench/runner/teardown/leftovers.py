"""What earlier runs left behind, by run, and whether their harness still lives.

A run's containers and networks carry ``wotbench.run=<id>`` and ``wotbench.lease=<path>`` (the
lease file its harness renews, :mod:`wotbench.runner.deployment.lease`). A run whose lease is live is in
progress — another user's run, or a study's second run — and is never touched by a new run; a
run whose lease is stale or gone left its objects behind (a SIGKILLed or crashed harness, a
host reboot). Only labelled objects are ever listed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from wotbench.labels import RUN_LABEL
from wotbench.runner.teardown.cleanup import remove_run
from wotbench.runner.deployment.lease import LEASE_LABEL, LeaseState, lease_state


@dataclass(frozen=True)
class RunObjects:
    run_id: str
    containers: int
    running: int
    networks: int
    lease_path: Optional[str]
    lease: LeaseState

    @property
    def live(self) -> bool:
        """In progress, as far as can be told: its lease is renewed, or (a run without a lease,
        from an older WoTbench) some of its containers still run."""
        return self.lease == "live" or (self.lease_path is None and self.running > 0)

    def lease_words(self) -> str:
        if self.lease_path is None:
            return ("it has no lease (an older WoTbench)"
                    + (": taken as in progress while its containers run" if self.running else ""))
        if self.lease == "gone":
            return "its lease is gone"
        try:
            age = time.time() - Path(self.lease_path).stat().st_mtime
        except OSError:
            return "its lease is gone"
        return f"its harness last renewed its lease {age:.0f} s ago"

    def describe(self) -> str:
        return (f"run {self.run_id}: {self.containers} container(s) ({self.running} still "
                f"running) and {self.networks} network(s); {self.lease_words()}")


def find(client) -> list[RunObjects]:
    """Every run with a labelled container or network on this Docker engine."""
    runs: dict[str, dict] = {}

    def entry(labels: dict) -> Optional[dict]:
        rid = (labels or {}).get(RUN_LABEL)
        if not rid:
            return None
        e = runs.setdefault(rid, {"containers": 0, "running": 0, "networks": 0, "lease": None})
        e["lease"] = e["lease"] or (labels or {}).get(LEASE_LABEL)
        return e

    for c in client.containers.list(all=True, filters={"label": RUN_LABEL}, sparse=True):
        e = entry(c.attrs.get("Labels") or {})
        if e is not None:
            e["containers"] += 1
            e["running"] += c.attrs.get("State") == "running"
    for n in client.networks.list(filters={"label": RUN_LABEL}):
        e = entry(n.attrs.get("Labels") or {})
        if e is not None:
            e["networks"] += 1
    return [RunObjects(run_id=rid, containers=e["containers"], running=e["running"],
                       networks=e["networks"], lease_path=e["lease"],
                       lease=lease_state(e["lease"]))
            for rid, e in sorted(runs.items())]


def remove_abandoned(client, log, keep: Optional[str] = None) -> list[RunObjects]:
    """Remove what runs without a live harness left (never ``keep``, never a live run); say
    what was found, by which run."""
    gone = [r for r in find(client) if not r.live and r.run_id != keep]
    for r in gone:
        log(f"left over by an earlier run: {r.describe()}; removing it")
        removed = remove_run(client, r.run_id, log)
        log(f"removed {removed['containers']} container(s) and {removed['networks']} "
            f"network(s) of run {r.run_id}")
    return gone
