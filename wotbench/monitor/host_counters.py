"""Host-wide kernel counters the contention verdict needs (docs/VALIDATION.md "Evidence"):

- per core, from ``/proc/stat``: busy time (user + nice + system + irq + softirq), steal time
  (time the hypervisor ran someone else while this vCPU wanted to run) and idle time;
- CPU pressure, from ``/proc/pressure/cpu``: ``some`` = time at least one runnable task waited
  for a CPU (host-wide: cgroup v1 has no per-cgroup pressure), ``full`` where the kernel has it.

Written cumulatively (the analysis takes differences) to ``monitor/cores.csv`` and
``monitor/pressure.csv``. Each source is probed once; what is missing is recorded in
``monitor/sources.json`` so the verdict can say which evidence it did not have instead of
silently treating an absent counter as zero.
"""
from __future__ import annotations

import os
from typing import Optional

from wotbench.monitor.fds import open_ro as _open, pread_text as _pread

PROC_STAT = "/proc/stat"
PRESSURE_CPU = "/proc/pressure/cpu"
CORE_COLUMNS = ["mono_ns", "core", "busy_ns", "steal_ns", "idle_ns"]
PRESSURE_COLUMNS = ["mono_ns", "some_us", "full_us"]
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")   # /proc counts CPU time in USER_HZ ticks


def parse_proc_stat(text: str) -> dict[int, tuple[int, int, int]]:
    """core -> (busy_ns, steal_ns, idle_ns) from the ``cpuN`` lines of /proc/stat."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        f = line.split()
        v = [int(x) for x in f[1:]] + [0] * 10
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        out[int(f[0][3:])] = ((user + nice + system + irq + softirq) * TICK_NS,
                              steal * TICK_NS, (idle + iowait) * TICK_NS)
    return out


def parse_pressure(text: str) -> tuple[Optional[int], Optional[int]]:
    """(some total µs, full total µs) from /proc/pressure/cpu; None where a line is absent."""
    some = full = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        total = next((int(x[6:]) for x in rest.split() if x.startswith("total=")), None)
        if kind == "some":
            some = total
        elif kind == "full":
            full = total
    return some, full


class HostCounters:
    """Reads both files on descriptors opened once; :meth:`sample` returns the rows to write."""

    def __init__(self, cores: Optional[set[int]] = None):
        self.cores = cores          # None: every core
        self.stat_fd = _open(PROC_STAT)
        self.pressure_fd = _open(PRESSURE_CPU)
        first = _pread(self.stat_fd, 65536)
        self.steal_seen = bool(first) and any(len(line.split()) > 8 for line in first.splitlines()
                                              if line.startswith("cpu"))

    def sources(self) -> dict[str, Optional[str]]:
        """Evidence source -> None when available, else why not."""
        return {"per_core_cpu": None if self.stat_fd is not None else f"{PROC_STAT} unreadable",
                "steal": None if self.steal_seen else f"{PROC_STAT} has no steal column",
                "cpu_pressure": None if self.pressure_fd is not None
                else f"{PRESSURE_CPU} absent (kernel without PSI, or psi=0)"}

    def sample(self, now: int) -> tuple[list[list], list[list]]:
        cores, pressure = [], []
        text = _pread(self.stat_fd, 65536)
        if text:
            for core, (busy, steal, idle) in sorted(parse_proc_stat(text).items()):
                if self.cores is None or core in self.cores:
                    cores.append([now, core, busy, steal, idle])
        text = _pread(self.pressure_fd, 65536)
        if text:
            some, full = parse_pressure(text)
            pressure.append([now, some, full])
        return cores, pressure

    def close(self) -> None:
        for fd in (self.stat_fd, self.pressure_fd):
            if fd is not None:
                os.close(fd)
        self.stat_fd = self.pressure_fd = None
