"""cluster-down: remove everything an emulated cluster created, whether cluster-up finished,
failed half-way or never wrote its state file; idempotent.

Order: each node's dockerd (SIGTERM: it stops its containers and containerd) -> whatever
still runs (a process naming a path under the state dir: containerd, shims, fuse-overlayfs;
a process in a node's cgroup: a container) -> mounts under the state dir (deepest first) ->
network namespaces (the veths and the bridge go with them) -> the nodes' cgroups -> the
state dir. Then what is still there is listed (``leftovers``)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import daemon
import hostscan
import netns
from layout import DEFAULT_BLOCK, PREFIX, SWITCH_NS, load, plan
from shell import ClusterError

Log = Callable[[str], None]


def _nodes_of(root: Path):
    """The nodes of the state file, or (no state file) those found by their directories."""
    state = load(root)
    if state is not None:
        return state.nodes
    names = {p.name for p in (root / "nodes").glob(f"{PREFIX}-n*")} \
        if (root / "nodes").is_dir() else set()
    top = max((int(n.rsplit("n", 1)[1]) for n in names if n.rsplit("n", 1)[1].isdigit()),
              default=0)
    return [n for n in plan("unknown", root, DEFAULT_BLOCK, top).nodes if n.name in names] \
        if top else []


def _kill(pids: set[int], log: Log, what: str) -> None:
    for pid in sorted(pids):
        try:
            os.kill(pid, signal.SIGKILL)
            log(f"killed {what} {pid}")
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)


def _unmount(root: Path, log: Log) -> None:
    for _ in range(3):   # a lazy unmount of a parent can reveal nothing new; a few passes
        mounts = hostscan.mounts_under(root, Path("/proc/self/mountinfo").read_text())
        if not mounts:
            return
        for mp in mounts:
            if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mp], capture_output=True)
            log(f"unmounted {mp}")


def _remove_cgroups(log: Log) -> None:
    for top in hostscan.node_cgroups():
        for d in hostscan.cgroup_tree(top):
            try:
                d.rmdir()
            except OSError as e:
                log(f"could not remove cgroup {d}: {e}")
        if not top.exists():
            log(f"removed cgroup {top}")


def leftovers(root: Path) -> dict[str, list[str]]:
    """What of an emulated cluster is still on this host, by kind (empty: nothing)."""
    found = {
        "network namespaces": netns.existing(),
        "processes": [f"{pid} {cmd[:120]}" for pid, cmd in hostscan.processes_under(root)],
        "mounts": hostscan.mounts_under(root, Path("/proc/self/mountinfo").read_text()),
        "cgroups": [str(p) for p in hostscan.node_cgroups()],
        "state dir": [str(root)] if root.exists() else [],
    }
    return {k: v for k, v in found.items() if v}


def down(root: Path, log: Log = print) -> dict[str, list[str]]:
    """Remove the cluster under ``root``; what could not be removed (empty: nothing left)."""
    for node in _nodes_of(root):
        if daemon.stop(node):
            log(f"stopped dockerd of {node.name}")
    _kill({pid for pid, _ in hostscan.processes_under(root)}, log, "process")
    for top in hostscan.node_cgroups():   # containers whose shim was killed with dockerd
        _kill(hostscan.cgroup_pids(top), log, f"container process in {top.name}:")
    _unmount(root, log)
    _kill({pid for pid, _ in hostscan.processes_under(root)}, log, "process")  # fuse daemons
    for name in netns.existing():
        if name == SWITCH_NS or name.startswith(f"{PREFIX}-n"):
            try:
                netns.delete(name)
                log(f"removed network namespace {name}")
            except ClusterError as e:
                log(str(e))
    _remove_cgroups(log)
    if root.exists() and not hostscan.mounts_under(root, Path("/proc/self/mountinfo").read_text()):
        shutil.rmtree(root, ignore_errors=True)
        log(f"removed {root}")
    return leftovers(root)
