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
from typing import Optional

from layout import Node, daemon_config
from shell import ClusterError, docker

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def start(node: Node, cluster_id: str, storage_driver: Optional[str]) -> int:
    """Write the node's daemon.json and start its dockerd (detached, own session); its pid."""
    node.dir.mkdir(parents=True, exist_ok=True)
    node.config_file.write_text(json.dumps(daemon_config(node, cluster_id, storage_driver),
                                           indent=2))
    argv = ["nsenter", f"--net={node.netns_path}", "unshare", "--uts", "--",
            "sh", "-c", 'hostname "$0" && exec dockerd --config-file "$1"',
            node.name, str(node.config_file)]
    with open(node.log_file, "ab") as out:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                             start_new_session=True)
    return p.pid


def alive(pid: Optional[int], node: Node) -> bool:
    """Is ``pid`` still this node's dockerd (a reused pid is not)."""
    if not pid:
        return False
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        return False
    return str(node.config_file) in cmd or str(node.dir) in cmd


def log_tail(node: Node, lines: int = 8) -> str:
    try:
        return "\n".join(node.log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_ready(node: Node, timeout: float = READY_TIMEOUT_S) -> str:
    """Wait until the node's dockerd answers; its version. ClusterError with its log when it
    exits or does not answer in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(node.pid, node):
            raise ClusterError(f"dockerd of {node.name} exited; its log ({node.log_file}):\n"
                               f"{log_tail(node)}")
        r = docker(str(node.socket), "version", "--format", "{{.Server.Version}}",
                   check=False, timeout=10)
        if r.returncode == 0:
            return r.stdout.strip()
        time.sleep(0.5)
    raise ClusterError(f"dockerd of {node.name} did not answer within {timeout:.0f} s; its log "
                       f"({node.log_file}):\n{log_tail(node)}")


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
