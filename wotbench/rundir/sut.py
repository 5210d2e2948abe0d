"""The system under test's own resources (issue 21): the monitor's ``monitor/sut.csv`` (one row
per SUT component per sample, cumulative CPU, current and high-water memory) and the
``summary.json`` ``sut_resources`` block the analysis makes of it, per analysis window.

SUT components: the processes of a ``devices[].server`` group and a started
``gateways.proxy`` (docs/BYO.md). Written by :mod:`wotbench.monitor.sut_sampler`, analysed by
:mod:`wotbench.analysis.sut_resources`.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Literal, Optional

from pydantic import ValidationError

from wotbench.rundir._model import Record

MIB = 1024 * 1024
Role = Literal["server", "proxy"]
# where the CPU time came from: the container's cgroup (cpuacct.usage, ns), or the process tree's
# /proc/<pid>/stat utime + stime + cutime + cstime (USER_HZ ticks, converted to ns)
CpuSource = Literal["cgroup", "proc"]


class SutSample(Record):
    """One row of ``monitor/sut.csv``. Memory from /proc/<pid>/status of every process of the
    component (a container's ``cgroup.procs``, else the pid and its descendants): ``rss_bytes``
    the sum of VmRSS, ``hwm_bytes`` the sum of VmHWM (each process's own peak RSS so far: exact
    for one process, an upper bound of the tree's peak for several); ``mem_usage_bytes`` /
    ``mem_max_usage_bytes`` the container's memory cgroup (usage incl. page cache, and its
    high-water mark; empty for a process)."""
    mono_ns: int
    component: str
    role: Role
    group: str
    source: CpuSource
    cpu_ns: Optional[int] = None
    rss_bytes: Optional[int] = None
    hwm_bytes: Optional[int] = None
    mem_usage_bytes: Optional[int] = None
    mem_max_usage_bytes: Optional[int] = None
    processes: int = 0


SUT_COLUMNS = list(SutSample.model_fields)


def read_sut_samples(path: Path) -> list[SutSample]:
    """Every row of ``monitor/sut.csv``; ValueError ``FILE:LINE: problem`` on a bad row."""
    out = []
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        if rows.fieldnames != SUT_COLUMNS:
            raise ValueError(f"{path}: columns {rows.fieldnames}, expected {SUT_COLUMNS}")
        for i, row in enumerate(rows, start=2):
            try:
                out.append(SutSample.model_validate({k: (v if v != "" else None)
                                                     for k, v in row.items()}))
            except ValidationError as e:
                err = e.errors()[0]
                raise ValueError(f"{path}:{i}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    return out


class SutWindow(Record):
    """One component (or the total) in one analysis window (or the whole test)."""
    start_s: float
    end_s: float
    samples: int                                  # sut.csv rows inside the window
    cpu_cores: Optional[float] = None             # CPU time / wall time (1.0 = one core busy)
    rss_mean_bytes: Optional[float] = None        # mean of the samples
    rss_peak_bytes: Optional[int] = None          # see peak_exact
    # True: the high-water mark rose inside the window, so rss_peak_bytes is it (the exact peak
    # for one process); False: the largest sample (the peak was not above the mark of before)
    peak_exact: Optional[bool] = None
    mem_usage_peak_bytes: Optional[int] = None    # container memory cgroup: the same rule

    @classmethod
    def summed(cls, ws: list["SutWindow"], start_s: float, end_s: float) -> "SutWindow":
        """Several components together: CPU and RSS add up; the peak is the sum of their
        peaks (an upper bound: they need not peak at once), so never exact."""
        def total(attr: str):
            vals = [getattr(w, attr) for w in ws if getattr(w, attr) is not None]
            return sum(vals) if vals else None
        return cls(start_s=start_s, end_s=end_s, samples=sum(w.samples for w in ws),
                   cpu_cores=total("cpu_cores"), rss_mean_bytes=total("rss_mean_bytes"),
                   rss_peak_bytes=total("rss_peak_bytes"),
                   mem_usage_peak_bytes=total("mem_usage_peak_bytes"))


class SutComponent(Record):
    role: Role
    group: str
    source: CpuSource
    test: SutWindow                               # the whole test
    windows: list[SutWindow]


class SutResourcesBlock(Record):
    """``summary.json`` ``sut_resources`` (null without SUT components)."""
    window_s: float
    definition: str
    components: dict[str, SutComponent]
    total: SutWindow                              # every component summed, whole test
    total_windows: list[SutWindow]
    sampling: Optional[str] = None                # the monitor's cost of it (cost.json)
