"""One node's dockerd: started in the node's network namespace with its own everything.

``nsenter --net`` (not ``ip netns exec``, which mounts a new /sys and so hides the cgroup
mounts: "Devices cgroup isn't mounted"), then ``unshare --uts`` so that the node has its own
hostname (Swarm names nodes by hostname). Each exec replaces the last: the pid we start is
the dockerd's. Its own --config-file keeps the host's /etc/docker/daemon.json (data-root)
out; dockerd starts its own containerd under its exec-root.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

from layout import Node, daemon_config
from shell import ClusterError, docker

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
START_ATTEMPTS = 3       # a dockerd that exits before answering is started again, this often
RETRY_PAUSE_S = 3.0      # before starting it again: what the last one left settles (mounts)
READY_POLL_S = 0.5       # between two asks whether it answers

_started: dict[int, subprocess.Popen] = {}   # pid -> the process, for its exit status


class DaemonExited(ClusterError):
    """The node's dockerd exited before it answered (its status and log tail in the text)."""


def start(node: Node, cluster_id: str, storage_driver: Optional[str]) -> int:
    """Write the node's daemon.json and start its dockerd (detached, own session); its pid."""
    node.dir.mkdir(parents=True, exist_ok=True)
    node.config_file.write_text(json.dumps(daemon_config(node, cluster_id, storage_driver),
                                           indent=2))
    argv = ["nsenter", f"--net={node.netns_path}", "unshare", "--uts", "--",
            "sh", "-c", 'hostname "$0" && exec dockerd --config-file "$1"',
            node.name, str(node.config_file)]
    return spawn(argv, node)


def spawn(argv: list[str], node: Node) -> int:
    """Start ``argv`` detached (own session), its output appended to the node's log; its pid
    (the process is kept for ``exit_status``)."""
    with open(node.log_file, "ab") as out:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                             start_new_session=True)
    _started[p.pid] = p
    return p.pid


def exit_status(pid: Optional[int]) -> str:
    """How a dockerd this process started ended: an empty log says nothing, the status may
    (a signal means something killed it)."""
    p = _started.get(pid) if pid else None
    try:   # a process found gone by its cmdline may not be reapable for a moment yet
        rc = p.wait(timeout=2) if p else None
    except subprocess.TimeoutExpired:
        rc = None
    if rc is None:
        return "exit status unknown"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


def alive(pid: Optional[int], node: Node) -> bool:
    """Is ``pid`` still this node's dockerd (a reused pid is not)."""
    if not pid:
        return False
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        return False
    return str(node.config_file) in cmd or str(node.dir) in cmd


def exited(node: Node) -> bool:
    """Has the node's dockerd ended: by its exit status when this process started it (its
    cmdline is not yet, or no longer, dockerd's for a moment around exec and exit)."""
    p = _started.get(node.pid) if node.pid else None
    return p.poll() is not None if p else not alive(node.pid, node)


def log_tail(node: Node, lines: int = 8) -> str:
    try:
        tail = "\n".join(node.log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
    return tail or "(the log is empty)"


def wait_ready(node: Node, timeout: float = READY_TIMEOUT_S) -> str:
    """Wait until the node's dockerd answers; its version. ClusterError with its log when it
    exits or does not answer in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if exited(node):
            raise DaemonExited(f"dockerd of {node.name} exited ({exit_status(node.pid)}); its "
                               f"log ({node.log_file}):\n{log_tail(node)}")
        r = docker(str(node.socket), "version", "--format", "{{.Server.Version}}",
                   check=False, timeout=10)
        if r.returncode == 0:
            return r.stdout.strip()
        time.sleep(READY_POLL_S)
    raise ClusterError(f"dockerd of {node.name} did not answer within {timeout:.0f} s; its log "
                       f"({node.log_file}):\n{log_tail(node)}")


def start_ready(node: Node, restart: Callable[[], None], log: Callable[[str], None],
                attempts: int = START_ATTEMPTS, timeout: float = READY_TIMEOUT_S) -> str:
    """Wait for the node's started dockerd to answer; its version. One that exits before
    answering (seen right after a torn-down cluster: an empty log) is started again by
    ``restart`` after a pause, ``attempts`` times in all; then ClusterError with every
    attempt's status and the last log tail. One that runs but never answers is not retried."""
    seen = []
    for i in range(1, attempts + 1):
        try:
            return wait_ready(node, timeout)
        except DaemonExited as e:
            seen.append(f"attempt {i}: {exit_status(node.pid)}")
            last = e
        if i < attempts:
            log(f"{last}\n{node.name}: starting its dockerd again in {RETRY_PAUSE_S:.0f} s "
                f"({i + 1}/{attempts})")
            time.sleep(RETRY_PAUSE_S)
            restart()
    raise ClusterError(f"dockerd of {node.name} exited before answering, {attempts} times "
                       f"({'; '.join(seen)}); the last one's log ({node.log_file}):\n"
                       f"{log_tail(node)}\nFix: make cluster-down, then check `dmesg` and "
                       "the host's dockerd (the nodes' containerd need its kernel features)")


def stop(node: Node, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM the node's dockerd (it stops its containers and its containerd), SIGKILL after
    ``timeout``; False when it was not running."""
    pid = node.pid
    if not alive(pid, node):
        pid = _pid_from_file(node)
        if not alive(pid, node):
            return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid, node):
        time.sleep(0.2)
    if alive(pid, node):
        os.kill(pid, signal.SIGKILL)
    return True


def _pid_from_file(node: Node) -> Optional[int]:
    try:
        return int((node.dir / "dockerd.pid").read_text().strip())
    except (OSError, ValueError):
        return None
