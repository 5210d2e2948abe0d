"""The process backend's cpu cgroups (``ProcessBackend.limit_cpu``, the ``cpu_quota`` SUT fault of
issue 35): a started server limited to ``cpus`` cores' worth of CPU time from a given second on.

A cpu cgroup the backend creates for the server before the test (no limit yet), into which it
moves the server's whole process tree; the fault writes the quota there, and the end of the
test moves the processes back and removes the cgroup. Either cgroup v2 (``/sys/fs/cgroup`` with
the cpu controller enabled for its children: ``cpu.max``) or the v1 cpu hierarchy
(``/sys/fs/cgroup/cpu``: ``cpu.cfs_quota_us``); a host that offers neither for writing is
refused before anything starts (:func:`unavailable`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

PERIOD_US = 100_000     # the CFS period both hierarchies and Docker use by default
V2_ROOT = Path("/sys/fs/cgroup")
V1_CPU = Path("/sys/fs/cgroup/cpu")


def _v2_usable() -> bool:
    try:
        return "cpu" in (V2_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def hierarchy() -> tuple[Optional[Path], str]:
    """Where this host lets the harness create a cpu cgroup: (the parent directory, "v2"/"v1"),
    or (None, why not)."""
    if (V2_ROOT / "cgroup.controllers").exists():
        if not _v2_usable():
            return None, ("cgroup v2 without the cpu controller enabled for /sys/fs/cgroup's "
                          "children (cgroup.subtree_control)")
        parent, kind = V2_ROOT, "v2"
    elif (V1_CPU / "cpu.cfs_quota_us").exists():
        parent, kind = V1_CPU, "v1"
    else:
        return None, "neither cgroup v2 with the cpu controller nor a cgroup v1 cpu hierarchy"
    probe = parent / f"wotbench-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        return None, f"cannot create a cgroup in {parent} ({e.strerror}; the harness needs root)"
    return parent, kind


def unavailable() -> Optional[str]:
    """Why a process-backend server's CPU quota cannot be changed here, or None."""
    parent, why = hierarchy()
    return None if parent is not None else why


class ProcessQuota:
    """One server's cpu cgroup (process backend)."""

    def __init__(self, run_id: str, device: str):
        parent, self.kind = hierarchy()
        if parent is None:
            raise OSError(self.kind)
        self.parent = parent
        self.path = parent / f"wotbench-{run_id}-{device}"
        self.path.mkdir(exist_ok=True)

    def adopt(self, pids: list[int]) -> int:
        """Moves the processes (each with all its threads) in; how many moved."""
        n = 0
        for p in pids:
            try:
                (self.path / "cgroup.procs").write_text(f"{p}\n")
                n += 1
            except OSError:   # gone meanwhile
                pass
        return n

    def limit(self, cpus: float) -> None:
        quota = max(1000, int(cpus * PERIOD_US))   # the kernel's floor is 1 ms
        if self.kind == "v2":
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (self.path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{quota}\n")

    def throttled(self) -> Optional[int]:
        """CFS periods in which the cgroup was throttled so far (the quota's evidence)."""
        try:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "nr_throttled":
                    return int(v)
        except (OSError, ValueError):
            pass
        return None

    def remove(self) -> None:
        """Back to the parent (the processes may still be stopping), then the cgroup goes."""
        try:
            pids = (self.path / "cgroup.procs").read_text().split()
        except OSError:
            return
        for p in pids:
            try:
                (self.parent / "cgroup.procs").write_text(f"{p}\n")
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError:
            pass

