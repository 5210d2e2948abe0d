"""Removal of everything a run created, and ``wotbench clean`` for leftovers.

Only objects carrying a ``wotbench.run`` label are touched (containers and networks); images
(label ``wotbench.image``) are a build cache and stay. Process-backend children carry the
environment variable ``WOTBENCH_RUN``; ``wotbench clean`` ends those of the current user too.
"""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from wotbench.labels import PROCESS_ENV, PROCESS_LEASE_ENV, RUN_LABEL


REMOVE_PARALLEL = 8          # container removals at once (dockerd does the work)
STALE_NETWORK_FIX = (
    "Docker keeps an endpoint of a container that no longer exists (a Docker 20.10 race when "
    "many containers go at once); nothing but a daemon restart frees it: `systemctl restart "
    "docker` when no other containers matter, then `wotbench clean`. Until then WoTbench "
    "runs with the default subnet move to a free one; a run with this network's subnet set "
    "explicitly stops and names it")
NETWORK_TRIES = 6            # network removal attempts, with backoff


def _detach(client, c, log) -> None:
    """Disconnect a running container from its networks. Done one container at a time, as the
    runner's own stop does: Docker 20.10 releases a container's endpoints when it exits or is
    removed, and hundreds of releases at once can lose a decrement of a network's endpoint
    count; that network then "has active endpoints" until the daemon restarts."""
    import docker.errors
    for net in ((c.attrs.get("NetworkSettings") or {}).get("Networks") or {}):
        try:
            client.api.disconnect_container_from_network(c.id, net, force=True)
        except docker.errors.NotFound:
            return   # the container is gone
        except docker.errors.APIError as e:
            if "is not connected" not in str(e):
                log(f"cleanup: cannot detach {_name(c)} from {net}: {e}")


def _name(c) -> str:
    return ((c.attrs.get("Names") or [c.id])[0]).lstrip("/")


def _remove_container(c, log) -> int:
    """Remove a (detached) container with its anonymous volumes."""
    import docker.errors
    try:
        c.remove(force=True, v=True)
        return 1
    except docker.errors.NotFound:
        return 0
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            log(f"cleanup: cannot remove container {_name(c)}: {e}")
        return 0


def _remove_network(net, log) -> bool:
    """Disconnect what is still attached (also endpoints whose container is gone: Docker 20.10
    can keep them when many containers go at once), then remove; retry with backoff."""
    import docker.errors
    delay = 0.2
    for attempt in range(NETWORK_TRIES):
        try:
            net.reload()
            for ep in (net.attrs.get("Containers") or {}).values():
                # by name: a stale endpoint has no container to pass, but its name disconnects it
                try:
                    net.client.api.disconnect_container_from_network(ep.get("Name"), net.id,
                                                                     force=True)
                except docker.errors.APIError:
                    pass
            net.remove()
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if attempt == NETWORK_TRIES - 1:
                log(f"cleanup: cannot remove network {net.name}: {e}; " + STALE_NETWORK_FIX)
                return False
            time.sleep(delay)
            delay *= 2
    return False


def remove_run(client, run_id: str | None, log=print) -> dict[str, int]:
    """Remove containers then networks labelled ``wotbench.run=<run_id>`` (any run when
    ``run_id`` is None): running containers are detached from their networks one at a time,
    then all are removed a few at once (forced), then the networks. Idempotent: objects
    already gone are skipped silently."""
    import docker.errors

    flt = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    removed = {"containers": 0, "networks": 0}
    for attempt in range(3):
        try:
            leftovers = [c for c in client.containers.list(all=True, filters=flt, sparse=True)
                         if _labelled(c.attrs.get("Labels") or {}, run_id)]
        except docker.errors.APIError as e:
            log(f"cleanup: cannot list containers: {e}")
            break
        if not leftovers:
            break
        for c in leftovers:
            if c.attrs.get("State") == "running":
                _detach(client, c, log)
        with ThreadPoolExecutor(max_workers=REMOVE_PARALLEL) as pool:
            removed["containers"] += sum(pool.map(lambda c: _remove_container(c, log), leftovers))
        time.sleep(0.2 * attempt)
    for net in client.networks.list(filters=flt):
        if _labelled(net.attrs.get("Labels") or {}, run_id) and _remove_network(net, log):
            removed["networks"] += 1
    return removed


def _labelled(labels: dict, run_id: str | None) -> bool:
    """Second, client-side check of the label filter: never remove anything unlabelled."""
    value = (labels or {}).get(RUN_LABEL)
    return value is not None and (run_id is None or value == run_id)


def _environ(pid: int) -> dict[bytes, bytes] | None:
    try:
        return dict(item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes()
                    .split(b"\0") if b"=" in item)
    except OSError:
        return None


def process_lease(pid: int) -> str | None:
    """The lease file a process-backend run's process watches (None: not one, or gone)."""
    lease = (_environ(pid) or {}).get(PROCESS_LEASE_ENV.encode())
    return lease.decode(errors="replace") if lease else None


def leftover_processes(run_id: str | None = None,
                       abandoned_only: bool = False) -> list[tuple[int, str]]:
    """(pid, run id) of this user's processes started by a process-backend run;
    ``abandoned_only``: only those of runs whose lease is not live (their harness is gone)."""
    from wotbench.runner.deployment.lease import lease_state
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        env = _environ(int(d.name))
        if env is None:
            continue
        rid = env.get(PROCESS_ENV.encode())
        if rid is None:
            continue
        rid_s = rid.decode(errors="replace")
        if run_id is not None and rid_s != run_id:
            continue
        lease = env.get(PROCESS_LEASE_ENV.encode())
        if abandoned_only and lease is not None and \
                lease_state(lease.decode(errors="replace")) == "live":
            continue   # a run in progress (its harness renews its lease): never a leftover
        found.append((int(d.name), rid_s))
    return found


def kill_processes(pids: list[int], grace_s: float = 5.0, poll_s: float = 0.05) -> None:
    """SIGTERM to each, SIGKILL to those still running (zombies do not count) after
    ``grace_s``, checked every ``poll_s``."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_exists(p) for p in pids):
        time.sleep(poll_s)
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
