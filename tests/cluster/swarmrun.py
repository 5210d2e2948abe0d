"""Helpers of make test-cluster's runs with backend: swarm: the coordinator on the emulated
manager (its network namespace and socket, as on a real manager), what a node runs, and a
node powered off."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import hostscan
import layout

REPO = Path(__file__).resolve().parents[2]
CELL_LABELS = ("wotbench.run", "wotbench.cluster.run")


def coordinator_env(root: Path) -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": f"unix://{root}/nodes/wbc-n1/docker.sock",
            "WOTBENCH_NODE_SOCKET": f"{root}/nodes/{{{{.Node.Hostname}}}}/docker.sock",
            "WOTBENCH_CELL_ROOT": f"{root}/cells"}


def wotbench(root: Path, *args: str, **kw) -> subprocess.Popen:
    """``wotbench ARGS`` in the manager's network namespace (the agents dial its address)."""
    cmd = ["nsenter", "--net=/var/run/netns/wbc-n1", sys.executable, "-m", "wotbench.cli", *args]
    return subprocess.Popen(cmd, cwd=REPO, env=coordinator_env(root), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def sweep(root: Path, config: Path, vary: str, prefix: str,
          timeout: float = 900) -> tuple[int, str, float, Path | None]:
    """``wotbench sweep CONFIG --vary VARY`` on the manager into ``root/test/sweeps``: (exit
    code, output, seconds, the sweep directory named ``prefix...``)."""
    import time
    out_root = root / "test" / "sweeps"
    p = wotbench(root, "sweep", str(config), "--vary", vary, "--out-root", str(out_root),
                 "--no-progress")
    began = time.monotonic()
    out, _ = p.communicate(timeout=timeout)
    found = [d for d in out_root.iterdir() if d.name.startswith(prefix)] \
        if out_root.is_dir() else []
    return p.returncode, out, time.monotonic() - began, found[0] if len(found) == 1 else None


def ours(node: layout.Node, what: str = "ps") -> list[str]:
    """Containers (ps -a) / networks / services of WoTbench runs on a node."""
    out = []
    for label in CELL_LABELS:
        args = {"ps": ["ps", "-aq"], "network": ["network", "ls", "-q"],
                "service": ["service", "ls", "-q"]}[what]
        r = subprocess.run(["docker", "-H", f"unix://{node.socket}", *args, "--filter",
                            f"label={label}"], capture_output=True, text=True, timeout=60)
        out += r.stdout.split()
    return out


def cpusets(node: layout.Node) -> dict[str, str]:
    """component -> cpuset of the node's run containers now."""
    r = subprocess.run(["docker", "-H", f"unix://{node.socket}", "ps", "-q", "--filter",
                        "label=wotbench.run"], capture_output=True, text=True, timeout=60)
    if not r.stdout.split():
        return {}
    r = subprocess.run(["docker", "-H", f"unix://{node.socket}", "inspect", "--format",
                        '{{index .Config.Labels "wotbench.component"}} {{.HostConfig.CpusetCpus}}',
                        *r.stdout.split()], capture_output=True, text=True, timeout=60)
    return dict(ln.split() for ln in r.stdout.splitlines() if len(ln.split()) == 2)


def power_off(node: layout.Node, root: Path) -> None:
    """The node is gone at once: its link down, every process of its Engine and containers
    SIGKILLed (dockerd, containerd, shims, fuse-overlayfs, the cell and its components)."""
    subprocess.run(["nsenter", f"--net=/var/run/netns/{node.name}", "ip", "link", "set",
                    "eth0", "down"], check=True)
    mine = f"{root}/nodes/{node.name}"
    pids = {p for p, cmd in hostscan.processes_under(Path(mine))}
    for top in hostscan.node_cgroups():
        if top.name == node.name:
            pids |= hostscan.cgroup_pids(top)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
