"""Kernel limits a large run meets, and what WoTbench does about each.

The neighbour (ARP) table is shared by every network namespace of the host
(``net.ipv4.neigh.default.gc_thresh1/2/3``, 128/512/1024 by default). A Docker run needs about
two entries per device on the paths it uses (the GE's entry for the device and the device's for
the GE, see :mod:`.readiness`) plus a few; past ``gc_thresh3`` the kernel drops packets
("neighbour: arp_cache: neighbor table overflow!") and past ``gc_thresh2`` it evicts live
entries, so requests vanish or wait for a new ARP exchange inside the testbed. As root the runner
raises the three thresholds for the run (never lowers them) and restores them afterwards; without
the privilege it stops before creating anything, naming the setting and the command.

Other limits at 1000+ devices and why they do not bind (measured for ``make bench-scale``):
bridge ports (one /22 bridge block per 1004 devices, ``wotbench.deploy.addressing``), conntrack
(``nf_conntrack_max`` 262144 here; one flow per device and GE port), pids and file descriptors
(the devices' own, in their containers; the harness keeps no per-device descriptor open).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.errors import EnvironmentProblem
from wotbench.rundir import SysctlChange

NEIGH_DIR = Path("/proc/sys/net/ipv4/neigh/default")
THRESHOLDS = ("gc_thresh1", "gc_thresh2", "gc_thresh3")
# what a run needs, in multiples of its own entries: above gc_thresh2 for 5 s the kernel evicts
# entries (a live one then costs a new ARP exchange), at gc_thresh3 it refuses new ones (drops)
HEADROOM = {"gc_thresh2": 1, "gc_thresh3": 2}
HOST_MARGIN = 64    # the host's own entries and other namespaces


def neighbour_entries(devices: int, gateways: int) -> int:
    """Neighbour entries a run creates: one per device on each side of its GE path, a few per
    gateway emulator, and a margin for the rest of the host."""
    return 2 * devices + 4 * gateways + HOST_MARGIN


@dataclass
class Sysctl:
    key: str
    path: Path
    before: int
    wanted: int
    prefix: str = "net.ipv4.neigh.default."

    @property
    def name(self) -> str:
        return self.prefix + self.key


def read_int(path: Path | str) -> Optional[int]:
    """The first integer of a /proc or /sys file; None when it is missing or not a number."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def neighbour_plan(devices: int, gateways: int, root: Path = NEIGH_DIR) -> list[Sysctl]:
    """The thresholds below what the run needs (empty: the host is fine as it is)."""
    need = neighbour_entries(devices, gateways)
    out = []
    for key in HEADROOM:
        cur = read_int(root / key)
        if cur is not None and cur < need * HEADROOM[key]:
            out.append(Sysctl(key, root / key, cur, need * HEADROOM[key]))
    return out


BACKLOG_PATH = Path("/proc/sys/net/core/netdev_max_backlog")
BACKLOG_PER_PORT = 4     # several floods may be queued on one CPU at once


def backlog_plan(bridge_ports: int, path: Path = BACKLOG_PATH) -> list[Sysctl]:
    """A broadcast on a bridge (every first ARP request) is copied to each of its ports, and
    each veth copy waits in the sending CPU's backlog, which holds net.core.netdev_max_backlog
    packets (1000 by default): past ~1000 ports, copies are dropped (measured: 3.5 M drops in
    /proc/net/softnet_stat during a 1100-device run, 8 devices never answered the warm-up)."""
    cur = read_int(path)
    want = BACKLOG_PER_PORT * bridge_ports
    if cur is None or cur >= want:
        return []
    return [Sysctl("netdev_max_backlog", path, cur, want, prefix="net.core.")]


CONNTRACK_MAX = Path("/proc/sys/net/netfilter/nf_conntrack_max")
CONNTRACK_COUNT = Path("/proc/sys/net/netfilter/nf_conntrack_count")


def conntrack_plan(flows: int, max_path: Path = CONNTRACK_MAX,
                   count_path: Path = CONNTRACK_COUNT) -> list[Sysctl]:
    """Docker's bridges are tracked by netfilter: every GE path to a device is a conntrack
    entry, and a full table drops new flows ("nf_conntrack: table full"). A 100 000-device
    wot-fleet run filled 262 144 entries (its own 2 per device, the entries of the run before
    it, which live 30-120 s, and other runs') and 2 631 devices never answered the warm-up.
    Raised so that the entries in use now plus twice the run's ``flows`` fit."""
    cur, used = read_int(max_path), read_int(count_path)
    if cur is None or used is None:
        return []
    want = used + 2 * flows
    if cur >= want:
        return []
    return [Sysctl("nf_conntrack_max", max_path, cur, want, prefix="net.netfilter.")]


def supported_devices(root: Path = NEIGH_DIR) -> Optional[int]:
    """How many devices (with 2 GEs) the current gc_thresh3 carries without overflow."""
    t3 = read_int(root / "gc_thresh3")
    return None if t3 is None else max(0, (t3 // HEADROOM["gc_thresh3"] - HOST_MARGIN - 8) // 2)


def refusal(plan: list[Sysctl]) -> EnvironmentProblem:
    """What stops a run that needs ``plan`` raised without the privilege to raise it."""
    return EnvironmentProblem(
        "the kernel's neighbour table, packet backlog or conntrack table is too small "
        "for this run: "
        + ", ".join(f"{s.name} = {s.before} (needs {s.wanted})" for s in plan)
        + "; past it the kernel drops packets inside the testbed. Fix (as root): "
        + "; ".join(f"sysctl -w {s.name}={s.wanted}" for s in plan)
        + " -- or run WoTbench as root, which raises them for the run only")


class HostTuning:
    """Raise what a run needs for its duration, put it back afterwards (idempotent)."""

    def __init__(self, log: Callable[[str], None] = print):
        self.log = log
        self.changed: list[Sysctl] = []    # to restore
        self.applied: list[Sysctl] = []    # for the record

    def apply(self, plan: list[Sysctl]) -> None:
        if not plan:
            return
        if os.geteuid() != 0:
            raise refusal(plan)
        for s in sorted(plan, key=lambda s: s.key, reverse=True):  # 3 before 2: thresh2 <= 3
            s.path.write_text(str(s.wanted))
            self.changed.append(s)
            self.applied.append(s)
        self.log("raised for this run: " + ", ".join(f"{s.name} {s.before} -> {s.wanted}"
                                                     for s in self.changed))

    def restore(self) -> None:
        for s in sorted(self.changed, key=lambda s: s.key):           # 2 before 3
            try:
                s.path.write_text(str(s.before))
            except OSError as e:
                self.log(f"could not restore {s.name} to {s.before}: {e}")
        if self.changed:
            self.log("restored " + ", ".join(f"{s.name} = {s.before}" for s in self.changed))
        self.changed = []

    def record(self) -> list[SysctlChange]:
        """run.json ``host_tuning``: what the run changed on the host, and back."""
        return [SysctlChange(name=s.name, before=s.before, during=s.wanted) for s in self.applied]
