"""Host limits a Docker run of many devices meets besides the neighbour table (see hostlimits).

Every device is a process with its own threads (wot-device: main, I/O, workers) and a
conntrack flow or two per GE path; every container (one device, or a pod of several:
wotbench.deploy.pods) adds a containerd-shim with about a dozen threads and a handful of file
descriptors in dockerd. The costs below were measured by `make bench-scale` on this project's
2-core host (peak tasks, dockerd descriptors and conntrack entries at 300 and 1100 one-device
containers, and at 1000 devices in 125 pods, solved for the two shares, rounded up). A run that
would pass a limit stops before creating anything, naming the setting and the command;
`wotbench doctor` prints how many devices each limit carries at one device per container.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.runner.prepare.hostlimits import read_int

TASKS_PER_DEVICE = 7           # a sleep device with 4 workers: ~5 threads (solved: 4.8)
TASKS_PER_CONTAINER = 13       # its containerd-shim (one-device containers: 18-19 in all)
DOCKERD_FDS_PER_CONTAINER = 9  # measured 8.2 (300 containers) and 8.1 (1100)
CONNTRACK_PER_DEVICE = 3       # measured 2.3-2.8
# a wot-fleet engine's device (wotbench.deploy.fleet) is no process and no container of its own:
# of the costs above it has only its conntrack flows: one from the GE's warm-up socket and one
# per GE source port to it (one at the rates a fleet device is sent; not yet measured)
CONNTRACK_PER_FLEET_DEVICE = 2
HOST_RESERVE = 2000            # tasks / descriptors the host and the harness keep for themselves


@dataclass(frozen=True)
class Limit:
    setting: str
    current: int
    per_device: int
    per_container: int
    fix: str
    per_fleet_device: int = 0

    def need(self, devices: int, containers: int, fleet_devices: int = 0) -> int:
        return (devices * self.per_device + containers * self.per_container
                + fleet_devices * self.per_fleet_device)

    @property
    def devices(self) -> int:
        """Devices this limit carries at one device per container."""
        return max(0, (self.current - HOST_RESERVE) // (self.per_device + self.per_container))


def dockerd_pid(proc: Path = Path("/proc"), sock: Optional[str] = None) -> Optional[int]:
    """The Docker daemon's pid on this host (None: not running here). Read from /proc (a
    cluster cell's image has no pidof); where several run (the emulated cluster's nodes share
    the host's pids), the one started with the node's socket ``sock`` (default: $WB_SOCK, the
    cell's node's; None when several run and none is that one), else the newest, as pidof
    gave."""
    sock = sock if sock is not None else os.environ.get("WB_SOCK", "")
    found = []
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() == "dockerd":
                found.append((int(d.name), (d / "cmdline").read_bytes().split(b"\0")))
        except OSError:
            continue   # (it exited meanwhile)
    sock = sock.removeprefix("unix://")   # DOCKER_HOST form; dockerd's -H may give either
    mine = [pid for pid, argv in found if sock and _serves(argv, sock)]
    if sock and not mine and len(found) > 1:
        return None   # another node's daemon would size the engines by the wrong limit
    return (mine or sorted(pid for pid, _ in found)[-1:] or [None])[0]


def _serves(argv: list[bytes], sock: str) -> bool:
    """Whether a dockerd started with ``argv`` listens on ``sock``: named by its -H, or set in
    a --config-file beside it (the emulated cluster's nodes: NODE_DIR/daemon.json holds
    ``hosts``, NODE_DIR/docker.sock; their command lines name no socket)."""
    if any(sock.encode() in a for a in argv):
        return True
    files = [argv[k + 1] for k, a in enumerate(argv[:-1]) if a == b"--config-file"]
    files += [a.removeprefix(b"--config-file=") for a in argv
              if a.startswith(b"--config-file=")]
    return any(os.path.dirname(f.decode(errors="replace")) == os.path.dirname(sock)
               for f in files)


def dockerd_nofile(hard: bool = False) -> Optional[int]:
    """The Docker daemon's RLIMIT_NOFILE, soft (what a container starts with) or ``hard`` (what
    it may raise to); None: unknown or unlimited."""
    pid = dockerd_pid()
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                v = line.split()[4 if hard else 3]
                return None if v == "unlimited" else int(v)
    except (OSError, IndexError, ValueError):
        return None
    return None


def host_limits(read: Callable[[str], Optional[int]] = read_int,
                dockerd_nofile: Callable[[], Optional[int]] = dockerd_nofile) -> list[Limit]:
    """The limits this host has (those it does not expose are left out)."""
    found = [
        ("kernel.pid_max", read("/proc/sys/kernel/pid_max"), TASKS_PER_DEVICE,
         TASKS_PER_CONTAINER, "sysctl -w kernel.pid_max=4194304"),
        ("kernel.threads-max", read("/proc/sys/kernel/threads-max"), TASKS_PER_DEVICE,
         TASKS_PER_CONTAINER, "sysctl -w kernel.threads-max=4194304"),
        ("net.netfilter.nf_conntrack_max", read("/proc/sys/net/netfilter/nf_conntrack_max"),
         CONNTRACK_PER_DEVICE, 0, "sysctl -w net.netfilter.nf_conntrack_max=1048576"),
        ("dockerd LimitNOFILE", dockerd_nofile(), 0, DOCKERD_FDS_PER_CONTAINER,
         "raise LimitNOFILE in docker.service (systemctl edit docker), then restart dockerd"),
    ]
    return [Limit(s, cur, pd, pc, fix,
                  CONNTRACK_PER_FLEET_DEVICE if s.endswith("conntrack_max") else 0)
            for s, cur, pd, pc, fix in found if cur is not None]


def too_small(devices: int, containers: int, limits: list[Limit],
              fleet_devices: int = 0) -> list[Limit]:
    """The limits ``devices`` (processes) and ``fleet_devices`` (in engines) in ``containers``
    containers would pass."""
    return [lim for lim in limits
            if lim.need(devices, containers, fleet_devices) > lim.current - HOST_RESERVE]


def message(devices: int, containers: int, short: list[Limit], fleet_devices: int = 0) -> str:
    fleet = f" and {fleet_devices} engine devices" if fleet_devices else ""
    return (f"{devices} devices{fleet} in {containers} containers need more than this host "
            "allows: "
            + "; ".join(f"{lim.setting} = {lim.current}, about "
                        f"{lim.need(devices, containers, fleet_devices)} "
                        f"needed ({lim.per_device} per device, {lim.per_container} per "
                        f"container" + (f", {lim.per_fleet_device} per engine device"
                                        if fleet_devices and lim.per_fleet_device else "")
                        + f") plus {HOST_RESERVE} for the host; fix: {lim.fix}"
                        for lim in short))
