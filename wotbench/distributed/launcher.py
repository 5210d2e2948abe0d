"""The Swarm task of a run's agent service: start the cell on this node's own Docker Engine.

Swarm places one task per labelled node (a global service with a placement constraint) and
supervises it, but a service cannot give what a cell needs: the node's pid namespace (the
monitor reads every component's /proc/<pid>/task/*/schedstat), its network namespace (the
cell dials the coordinator from the node's address), the node's cgroups and /dev/shm. So the task starts one plain container, ``wb-<run>-cell-<node>``, from the same
image on the node's Engine (through the bind-mounted socket: root on the node already, see
docs/CLUSTER.md "Security"), streams its output (``docker service logs``), and exits with
its code. Removing the service (the coordinator's cleanup) SIGTERMs the task, which stops
the cell with SIGTERM (its runner removes what it created) and then removes it.
"""
from __future__ import annotations

import os
import signal
import threading

from wotbench.labels import COMPONENT_LABEL

CELL_LABEL = "wotbench.cluster.run"     # not wotbench.run: a cell's harness is no component
STOP_GRACE_S = 90                       # the cell's runner cleans up (stop, remove) in this


def cell_name(run_id: str, node: str) -> str:
    return f"wb-{run_id}-cell-{node}"[:120]


def cell_kwargs(image: str, env: dict[str, str], sock: str, work: str) -> dict:
    """``containers.run`` arguments of the cell: host pid and network, the node's socket,
    cgroups (read-only), /dev/shm, and the work directory at its node path. Not privileged
    (hosts that bound the capabilities refuse it): a node whose neighbour table is too small
    for its cell has it raised beforehand (the runner's message gives the sysctl)."""
    from docker.types import Mount
    return {
        "image": image, "command": ["cell"], "detach": True,
        "name": cell_name(env["WB_RUN"], env["WB_NODE"]),
        # WB_SOCK: which of the host's dockerds is this node's (its descriptor limit sizes
        # the engines; the emulated cluster's nodes share one pid namespace)
        "environment": {k: env[k] for k in ("WB_RUN", "WB_NODE", "WB_COORD", "WB_WORK",
                                            "WB_SOCK")},
        "network_mode": "host", "pid_mode": "host",
        "labels": {CELL_LABEL: env["WB_RUN"], COMPONENT_LABEL: "cell"},
        "mounts": [Mount("/var/run/docker.sock", sock, type="bind"),
                   Mount("/sys/fs/cgroup", "/sys/fs/cgroup", type="bind", read_only=True),
                   Mount("/dev/shm", "/dev/shm", type="bind")],
        "volumes": {work: {"bind": work, "mode": "rw"}},   # (a Binds entry creates it on the node)
        "stop_signal": "SIGTERM",
    }


def main() -> int:
    import docker
    env = dict(os.environ)
    client = docker.from_env(timeout=STOP_GRACE_S + 30)
    image = env["WB_IMAGE"]   # this task's own image (host network: no container id to ask)
    name = cell_name(env["WB_RUN"], env["WB_NODE"])
    for old in client.containers.list(all=True, filters={"name": name}):
        old.remove(force=True)   # a task restarted by hand: start afresh
    kw = cell_kwargs(image, env, env["WB_SOCK"], env["WB_WORK"])
    kw.pop("detach")
    cell = client.containers.create(**kw)
    stopping = threading.Event()

    def stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=lambda: cell.stop(timeout=STOP_GRACE_S), daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        cell.start()   # (a cell that cannot start is removed below, not left "Created")
        for line in cell.logs(stream=True, follow=True):
            os.write(1, line)
        code = int(cell.wait().get("StatusCode", 1))
    finally:
        try:
            cell.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
    return code
