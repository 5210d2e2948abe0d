"""Removal of everything a run created, and ``wotbench clean`` for leftovers.

Only objects carrying a ``wotbench.run`` label are touched (containers and networks); images
(label ``wotbench.image``) are a build cache and stay. Process-backend children carry the
environment variable ``WOTBENCH_RUN``; ``wotbench clean`` ends those of the current user too.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from wotbench.runner.containers import RUN_LABEL

PROCESS_ENV = "WOTBENCH_RUN"


def remove_run(client, run_id: str | None, log=print) -> dict[str, int]:
    """Force-remove containers then networks labelled ``wotbench.run=<run_id>`` (any run when
    ``run_id`` is None). Idempotent: objects already gone are skipped silently."""
    import docker.errors

    flt = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    removed = {"containers": 0, "networks": 0}
    for attempt in range(3):
        try:
            leftovers = client.containers.list(all=True, filters=flt)
        except docker.errors.APIError as e:
            log(f"cleanup: cannot list containers: {e}")
            break
        for c in leftovers:
            if not _labelled(c.labels, run_id):
                continue
            try:
                c.remove(force=True, v=True)
                removed["containers"] += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if "already in progress" not in str(e):
                    log(f"cleanup: cannot remove container {c.name}: {e}")
        if not leftovers:
            break
        time.sleep(0.2 * attempt)
    for net in client.networks.list(filters=flt):
        if not _labelled(net.attrs.get("Labels") or {}, run_id):
            continue
        try:
            net.reload()
            for c in net.containers:  # a container from outside attached by hand
                net.disconnect(c, force=True)
            net.remove()
            removed["networks"] += 1
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            log(f"cleanup: cannot remove network {net.name}: {e}")
    return removed


def _labelled(labels: dict, run_id: str | None) -> bool:
    """Second, client-side check of the label filter: never remove anything unlabelled."""
    value = (labels or {}).get(RUN_LABEL)
    return value is not None and (run_id is None or value == run_id)


def leftover_processes(run_id: str | None = None) -> list[tuple[int, str]]:
    """(pid, run id) of this user's processes started by a process-backend run."""
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(PROCESS_ENV.encode() + b"="):
                rid = item.split(b"=", 1)[1].decode(errors="replace")
                if run_id is None or rid == run_id:
                    found.append((int(d.name), rid))
                break
    return found


def kill_processes(pids: list[int], grace_s: float = 5.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_exists(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _exists(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def main() -> int:
    """``wotbench clean``: remove every container/network labelled ``wotbench.run`` and end
    leftover process-backend processes. Nothing unlabelled is touched."""
    status = 0
    procs = leftover_processes()
    if procs:
        kill_processes([p for p, _ in procs])
        print(f"ended {len(procs)} leftover process(es) of run(s) "
              f"{', '.join(sorted({r for _, r in procs}))}")
    try:
        import docker
        client = docker.from_env()
        client.ping()
    except Exception as e:
        print(f"Docker not reachable ({e.__class__.__name__}); no containers checked")
        return status
    runs = sorted({c.labels.get(RUN_LABEL) for c in client.containers.list(
        all=True, filters={"label": RUN_LABEL})} | {n.attrs.get("Labels", {}).get(RUN_LABEL)
                                                    for n in client.networks.list(
                                                        filters={"label": RUN_LABEL})})
    removed = remove_run(client, None)
    if removed["containers"] or removed["networks"]:
        print(f"removed {removed['containers']} container(s) and {removed['networks']} "
              f"network(s) of run(s): {', '.join(r for r in runs if r)}")
    elif not procs:
        print("nothing to clean: no container, network or process labelled wotbench.run")
    return status
