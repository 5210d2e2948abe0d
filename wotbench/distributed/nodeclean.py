"""``wotbench clean --cluster`` on one node (a task of a one-shot global service): remove what
cells left on this node's Engine, saying what by which run.

A cell's objects carry ``wotbench.run`` and a lease under the cells' work directory, which
this task sees at its node path: a cell whose lease is still renewed is in progress and is
left alone (unless forced). Objects of runs whose lease lives elsewhere are single-host runs
on this node, not the cluster's: named, and left to ``wotbench clean`` on the node. Cell
harness containers (``wb-<run>-cell-<node>``) whose agent service is gone are stopped (their
runner removes what it created) and removed.
"""
from __future__ import annotations

from pathlib import Path

from wotbench.distributed.launcher import CELL_LABEL
from wotbench.runner.teardown.cleanup import remove_run
from wotbench.runner.teardown.leftovers import find


def main(node: str, work: Path, force: bool, live_runs: set[str]) -> int:
    import docker
    client = docker.from_env(timeout=180)
    said = False
    for c in client.containers.list(all=True, filters={"label": CELL_LABEL}):
        run = (c.labels or {}).get(CELL_LABEL, "")
        if run in live_runs and not force:
            continue
        print(f"{node}: cell harness {c.name} of run {run} (its agent service is gone): "
              "stopping and removing it", flush=True)
        c.stop(timeout=90)
        c.remove(force=True)
        said = True
    for r in find(client):
        ours = r.lease_path is not None and Path(r.lease_path).is_relative_to(work)
        if not ours and not force:
            print(f"{node}: {r.describe()}: not a cell's (its lease is outside {work}); left "
                  f"to `wotbench clean` on {node}", flush=True)
            said = True
            continue
        if r.live and not force:
            print(f"{node}: in progress, left alone: {r.describe()}", flush=True)
            said = True
            continue
        removed = remove_run(client, r.run_id)
        print(f"{node}: removed {r.describe()} ({removed['containers']} container(s), "
              f"{removed['networks']} network(s))", flush=True)
        said = True
    if not said:
        print(f"{node}: nothing to clean", flush=True)
    return 0
