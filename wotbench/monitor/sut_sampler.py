"""Samples the system under test's own resources into ``monitor/sut.csv`` (model
:class:`wotbench.rundir.sut.SutSample`): CPU time and memory of every third-party server
(a device of a ``devices[].server`` group) and of the started proxy (``gateways.proxy``).

The monitor hands over every component it watches (:meth:`SutSampler.watch`); the sampler keeps
the SUT ones, known from the device groups with ``server:`` (the runner's typed config, given
to the monitor: :func:`sut_groups`) and the role ``proxy``: a SUT component is the proxy or a
device of such a group, or one watched with the role ``server`` (a connected run's edge server:
:mod:`wotbench.connected.sut`).

Per sample and component: CPU from the container's cgroup (v1 ``cpuacct.usage``, v2
``cpu.stat`` usage_usec) or, for a process, the sum over its tree of /proc/<pid>/stat utime +
stime + cutime + cstime (reaped children stay counted); memory from /proc/<pid>/status VmRSS
and VmHWM of its processes (a container's ``cgroup.procs``, else the pid and its descendants
via /proc/<pid>/task/<tid>/children) and, for a container, its memory cgroup's usage and
high-water mark (v1 ``memory.usage_in_bytes`` / ``memory.max_usage_in_bytes``, v2
``memory.current`` / ``memory.peak``). It runs in the monitor's thread, at its cadence: every
interval, all SUT components when there are at most ``batch`` of them, else a rotating batch
plus all of them at the evidence windows' edges (like the devices), so a window's CPU is exact.
"""
from __future__ import annotations

import csv
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Optional

from wotbench.monitor.fds import open_ro as _open, pread_text as _pread
from wotbench.monitor.host_counters import TICK_NS
from wotbench.rundir import RunDir
from wotbench.rundir.sut import SUT_COLUMNS

SUT_BATCH = 50


def sut_groups(devices: Iterable[Any]) -> set[str]:
    """The device groups that run a third-party server (``server:``), from the run's typed
    ``Config.devices`` (the runner hands them to the monitor; nothing is read back from disk)."""
    return {g.group for g in devices if g.server is not None}


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return None


def _int(text: Optional[str]) -> Optional[int]:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (/proc/<pid>/task/<tid>/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            todo += [int(c) for c in (_read(f"/proc/{p}/task/{t}/children") or "").split()]
    return out


def stat_cpu_ns(text: Optional[str]) -> Optional[int]:
    """utime + stime + cutime + cstime of a /proc/<pid>/stat text in ns (None: gone)."""
    if not text:
        return None
    f = text.rpartition(")")[2].split()     # the name may hold spaces: fields after ')'
    return sum(int(x) for x in f[11:15]) * TICK_NS   # fields 14-17 of proc(5)


def status_memory(text: Optional[str]) -> tuple[Optional[int], Optional[int]]:
    """(VmRSS, VmHWM) in bytes of a /proc/<pid>/status text (None: gone, or a kernel thread)."""
    rss = hwm = None
    for line in (text or "").splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    return rss, hwm


class _Proc:
    """One process of a component: its status (and, without a cgroup, stat) opened once."""

    def __init__(self, pid: int, with_stat: bool):
        self.status = _open(f"/proc/{pid}/status")
        self.stat = _open(f"/proc/{pid}/stat") if with_stat else None

    def close(self) -> None:
        for fd in (self.status, self.stat):
            if fd is not None:
                os.close(fd)


class SutSource:
    """One SUT component: a container (its cgroup directories) or a process tree (its pid).
    Files are opened once and read with one ``pread`` each; the process list is refreshed at
    the full reads (the windows' edges) and when a process is gone."""

    def __init__(self, component: str, role: str, group: str, pid: Optional[int],
                 dirs: dict[str, Path]):
        self.component, self.role, self.group, self.pid = component, role, group, pid
        v2, mem = dirs.get("v2"), dirs.get("memory")
        self.cpu_fd = _open(str(dirs["cpuacct"] / "cpuacct.usage")) if "cpuacct" in dirs else None
        self.v2_fd = _open(str(v2 / "cpu.stat")) if v2 is not None and self.cpu_fd is None else None
        names = (("memory.usage_in_bytes", "memory.max_usage_in_bytes") if mem is not None
                 else ("memory.current", "memory.peak"))
        base = mem if mem is not None else v2
        self.mem_fds = [_open(str(base / n)) for n in names] if base is not None else [None, None]
        procs = [d for d in (mem, dirs.get("cpuacct"), v2) if d is not None]
        self.procs_fd = _open(str(procs[0] / "cgroup.procs")) if procs else None
        self.source = "cgroup" if self.cpu_fd is not None or self.v2_fd is not None else "proc"
        self.procs: dict[int, _Proc] = {}

    def _refresh(self) -> None:
        if self.procs_fd is not None:
            pids = [int(x) for x in (_pread(self.procs_fd) or "").split()]
        else:
            pids = descendants(self.pid) if self.pid else []
        for p in set(self.procs) - set(pids):
            self.procs.pop(p).close()
        for p in pids:
            if p not in self.procs:
                self.procs[p] = _Proc(p, self.source == "proc")

    def _cgroup_cpu_ns(self) -> Optional[int]:
        if self.cpu_fd is not None:
            return _int(_pread(self.cpu_fd))
        for line in (_pread(self.v2_fd) or "").splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) * 1000
        return None

    def read(self, now: int, refresh: bool) -> Optional[list]:
        if refresh or not self.procs:
            self._refresh()
        rss = hwm = proc_cpu = None
        gone = False
        for p in self.procs.values():
            r, h = status_memory(_pread(p.status))
            gone = gone or r is None
            if r is not None:
                rss, hwm = (rss or 0) + r, (hwm or 0) + (h or 0)
            c = stat_cpu_ns(_pread(p.stat)) if p.stat is not None else None
            if c is not None:
                proc_cpu = (proc_cpu or 0) + c
        if gone and not refresh:      # a process ended (or a new one may have come): look again
            return self.read(now, True)
        cpu = self._cgroup_cpu_ns() if self.source == "cgroup" else proc_cpu
        usage, peak = (_int(_pread(fd)) for fd in self.mem_fds)
        if cpu is None and rss is None and usage is None:
            return None      # gone
        return [now, self.component, self.role, self.group, self.source, cpu, rss, hwm,
                usage, peak, len(self.procs)]

    def close(self) -> None:
        for p in self.procs.values():
            p.close()
        self.procs = {}
        for fd in (self.cpu_fd, self.v2_fd, self.procs_fd, *self.mem_fds):
            if fd is not None:
                os.close(fd)
        self.cpu_fd = self.v2_fd = self.procs_fd = None
        self.mem_fds = [None, None]


class SutSampler:
    """Owns ``monitor/sut.csv`` (created with the first SUT component) and its sources."""

    def __init__(self, rd: RunDir, groups: Iterable[str] = (), batch: int = SUT_BATCH,
                 log=print):
        """``groups``: the device groups that run a server (:func:`sut_groups`)."""
        self.rd, self.batch, self.log = rd, batch, log
        self.groups: set[str] = set(groups)
        self.sources: dict[str, SutSource] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._file = self._writer = None

    def watch(self, component: str, role: str, group: Optional[str], pid: Optional[int],
              dirs: dict[str, Path]) -> bool:
        """Keep ``component`` when it is part of the SUT; True if kept."""
        if role == "proxy":
            sut_role, sut_group = "proxy", "proxy"
        elif role == "device" and group in self.groups:
            sut_role, sut_group = "server", str(group)
        elif role == "server":        # a server started as the SUT itself (a connected run's edge)
            sut_role, sut_group = "server", str(group or component)
        else:
            return False
        with self._lock:
            old = self.sources.pop(component, None)
            if old:
                old.close()
            self.sources[component] = SutSource(component, sut_role, sut_group, pid, dirs)
        return True

    def _due(self, everything: bool) -> list[SutSource]:
        with self._lock:
            srcs = list(self.sources.values())
        if everything or len(srcs) <= self.batch:
            return srcs
        k = self._next % len(srcs)
        self._next = k + self.batch
        return (srcs + srcs)[k:k + self.batch]

    def sample(self, now: int, everything: bool) -> int:
        """Read the due components and write their rows; the number of rows written."""
        rows = [r for r in (s.read(now, everything) for s in self._due(everything))
                if r is not None]
        if rows:
            if self._file is None:
                self._file = open(self.rd.sut_csv, "w", newline="")
                self._writer = csv.writer(self._file)
                self._writer.writerow(SUT_COLUMNS)
            self._writer.writerows(rows)
            self._file.flush()
        return len(rows)

    def __len__(self) -> int:
        return len(self.sources)

    def close(self) -> None:
        with self._lock:
            for src in self.sources.values():
                src.close()
            self.sources.clear()
        if self._file is not None:   # a full disk must not stop the rest of the cleanup
            f, self._file = self._file, None
            try:
                f.close()
            except OSError as e:
                self.log(f"monitor: {f.name}: the last samples could not be written ({e.strerror})")
