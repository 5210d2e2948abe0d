"""``wotbench clean``: remove what earlier runs left behind, saying what by which run.

Runs whose harness still renews its lease are in progress and are left alone unless
``--force``; everything else labelled ``wotbench.run`` goes, torn down as a normal stop does
(:func:`wotbench.runner.teardown.cleanup.remove_run`). Process-backend leftovers are found by their
``WOTBENCH_RUN`` environment variable. A killed run's core isolation (``placement.isolate_cores``:
the workqueue cpumask, the host's tasks' affinity) is put back from its state file. Nothing unlabelled is touched. A run whose harness
was killed during its test gets the command that analyses what it measured.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from wotbench.labels import RUN_LABEL
from wotbench.rundir import RunDir
from wotbench.runner.deployment import journal
from wotbench.runner.prepare import isolation
from wotbench.runner.teardown.cleanup import kill_processes, leftover_processes, process_lease, remove_run
from wotbench.runner.teardown.leftovers import find


def _say_killed(run_id: str, lease: Optional[str]) -> None:
    """A run whose harness was killed during its test (its run.json never completed, beside
    its lease): what it measured is kept; say how to read it."""
    if not lease:
        return
    rd = RunDir(Path(lease).parent.parent)     # <run dir>/lease/heartbeat
    try:
        record = rd.read_run()
    except (OSError, ValueError):
        return
    if record.in_progress and record.test is not None:
        print(f"  run {run_id} was killed during its test; what it measured is kept: "
              f"wotbench analyze {rd.path} && wotbench report {rd.path}")


def main(force: bool = False) -> int:
    status = 0
    note = isolation.clean_stale(print, force=force)   # a killed run's placement.isolate_cores
    if note:
        print(note)
    procs = leftover_processes(abandoned_only=not force)
    if procs:
        leases = {r: process_lease(p) for p, r in procs}
        kill_processes([p for p, _ in procs])
        print(f"ended {len(procs)} leftover process(es) of run(s) "
              f"{', '.join(sorted({r for _, r in procs}))}")
        for rid, lease in sorted(leases.items()):
            _say_killed(rid, lease)
    journal.remove_abandoned(print)
    try:
        import docker
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as e:
        print(f"Docker not reachable ({e.__class__.__name__}); no containers checked")
        return status
    runs = find(client)
    for r in runs:
        if r.live and not force:
            print(f"in progress, left alone: {r.describe()} (`wotbench clean --force` removes "
                  "it too)")
            continue
        print(f"found {r.describe()}; removing it")
        removed = remove_run(client, r.run_id)
        print(f"  removed {removed['containers']} container(s) and {removed['networks']} "
              f"network(s)")
        _say_killed(r.run_id, r.lease_path)
    kept = {r.run_id for r in runs if r.live and not force}
    left = [n.name for n in client.networks.list(filters={"label": RUN_LABEL})
            if (n.attrs.get("Labels") or {}).get(RUN_LABEL) not in kept]
    if left:   # the reason and the fix were printed for each
        print(f"{len(left)} network(s) could not be removed: {', '.join(left)}")
        return 1
    if not runs and not procs:
        print("nothing to clean: no container, network or process labelled wotbench.run")
    return status
