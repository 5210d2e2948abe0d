"""Host limits a Docker run of many devices meets besides the neighbour table (see hostlimits).

Every device is a container: its own threads (wot-device: main, I/O, workers) plus a
containerd-shim with about a dozen more, a handful of file descriptors in dockerd, and a
conntrack flow or two per GE path. The per-device costs below were measured by `make
bench-scale` on this project's 2-core host (300 and 1100 devices: peak tasks, dockerd
descriptors and conntrack entries divided by the device count, rounded up). A run that would
pass a limit stops before creating anything, naming the setting and the command; `wotbench
doctor` prints how many devices each limit carries.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.runner.hostlimits import read_int

TASKS_PER_DEVICE = 20          # device threads + its containerd-shim's (measured 18-19)
DOCKERD_FDS_PER_DEVICE = 9     # measured 8.2 (300 devices) and 8.1 (1100)
CONNTRACK_PER_DEVICE = 3       # measured 2.3-2.8
HOST_RESERVE = 2000            # tasks / descriptors the host and the harness keep for themselves


@dataclass(frozen=True)
class Limit:
    setting: str
    current: int
    per_device: int
    fix: str

    @property
    def devices(self) -> int:
        """Devices this limit carries."""
        return max(0, (self.current - HOST_RESERVE) // self.per_device)


def dockerd_pid() -> Optional[int]:
    """The Docker daemon's pid on this host (None: not running here)."""
    try:
        return int(subprocess.run(["pidof", "dockerd"], capture_output=True, text=True,
                                  timeout=5).stdout.split()[0])
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return None


def _dockerd_nofile() -> Optional[int]:
    pid = dockerd_pid()
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
    except (OSError, IndexError, ValueError):
        return None
    return None


def host_limits(read: Callable[[str], Optional[int]] = read_int,
                dockerd_nofile: Callable[[], Optional[int]] = _dockerd_nofile) -> list[Limit]:
    """The limits this host has (those it does not expose are left out)."""
    found = [
        ("kernel.pid_max", read("/proc/sys/kernel/pid_max"), TASKS_PER_DEVICE,
         "sysctl -w kernel.pid_max=4194304"),
        ("kernel.threads-max", read("/proc/sys/kernel/threads-max"), TASKS_PER_DEVICE,
         "sysctl -w kernel.threads-max=4194304"),
        ("net.netfilter.nf_conntrack_max", read("/proc/sys/net/netfilter/nf_conntrack_max"),
         CONNTRACK_PER_DEVICE, "sysctl -w net.netfilter.nf_conntrack_max=1048576"),
        ("dockerd LimitNOFILE", dockerd_nofile(), DOCKERD_FDS_PER_DEVICE,
         "raise LimitNOFILE in docker.service (systemctl edit docker), then restart dockerd"),
    ]
    return [Limit(s, cur, per, fix) for s, cur, per, fix in found if cur is not None]


def too_small(devices: int, limits: list[Limit]) -> list[Limit]:
    return [lim for lim in limits if devices > lim.devices]


def message(devices: int, short: list[Limit]) -> str:
    return (f"{devices} devices need more than this host allows: "
            + "; ".join(f"{lim.setting} = {lim.current} carries about {lim.devices} devices "
                        f"({lim.per_device} per device); fix: {lim.fix}" for lim in short))
