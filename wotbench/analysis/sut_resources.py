"""The system under test's own CPU and memory per analysis window, from ``monitor/sut.csv``
(:mod:`wotbench.rundir.sut`): the ``summary.json`` ``sut_resources`` block and
``series/sut_resources.csv``.

Per component and window [a, b) (the contention windows' grid, from the test start):
- ``cpu_cores``: the cumulative CPU time interpolated at a and b (the monitor reads every
  component at these edges), divided by the wall time: 1.0 is one core busy all the window;
- ``rss_mean_bytes``: the mean of the samples inside;
- ``rss_peak_bytes``: when the high-water mark (VmHWM) of a single-process component rose
  between the last sample at or before a and the last at or before b, the peak RSS happened in
  the window and is that mark, exactly (``peak_exact``); else the largest sample inside (the
  peak of a window that did not set a new record is seen only as often as it is sampled);
- ``mem_usage_peak_bytes``: the container memory cgroup's usage (page cache included) by the
  same rule with its ``max_usage_in_bytes``.
The total sums the components (its peak is the sum of their peaks: an upper bound).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.loading import read_model
from wotbench.monitor.counters import monotone
from wotbench.rundir import RunDir
from wotbench.rundir.monitor_files import MonitorCost
from wotbench.rundir.sut import MIB, SutComponent, SutResourcesBlock, SutWindow, read_sut_samples

DEFINITION = ("CPU: CPU time / wall time per window (cores); memory: RSS of the component's "
              "processes (VmRSS), peak = the high-water mark (VmHWM) when it rose in the window "
              "(exact), else the largest sample")
SERIES_COLUMNS = ["window", "start_s", "end_s", "component", "role", "group", "samples",
                  "cpu_cores", "rss_mean_mib", "rss_peak_mib", "peak_exact"]


def _arr(rows: pd.DataFrame, col: str) -> np.ndarray:
    return rows[col].to_numpy(dtype=float)


def _cpu_cores(t: np.ndarray, cpu: np.ndarray, a: float, b: float) -> Optional[float]:
    ok = ~np.isnan(cpu)
    t, cpu = t[ok], monotone(cpu[ok])      # a restarted server counts from 0 again
    if len(t) < 2:
        return None
    lo, hi = max(a, t[0]), min(b, t[-1])
    if hi - lo < 0.5 * (b - a):   # the samples cover less than half the window: no figure
        return None
    return float((np.interp(hi, t, cpu) - np.interp(lo, t, cpu)) / ((hi - lo) * 1e9))


def _peak(t: np.ndarray, level: np.ndarray, mark: np.ndarray, inside: np.ndarray, a: float,
          b: float, single: bool) -> tuple[Optional[int], Optional[bool]]:
    """(peak, exact) of ``level`` in [a, b) by the high-water-mark rule."""
    vals = level[inside & ~np.isnan(level)]
    sampled = int(vals.max()) if len(vals) else None
    ok = ~np.isnan(mark)
    before = ok & (t <= a)
    start = mark[before][-1] if before.any() else (mark[inside & ok][0] if (inside & ok).any() else None)
    upto = ok & (t < b)
    end = mark[upto][-1] if upto.any() else None
    if single and start is not None and end is not None and end > start:
        return int(end), True
    return sampled, (False if sampled is not None else None)


def _window(rows: pd.DataFrame, t: np.ndarray, a: float, b: float) -> SutWindow:
    inside = (t >= a) & (t < b)
    rss = _arr(rows, "rss_bytes")
    single = bool((rows["processes"].to_numpy() <= 1).all())
    peak, exact = _peak(t, rss, _arr(rows, "hwm_bytes"), inside, a, b, single)
    usage_peak, _ = _peak(t, _arr(rows, "mem_usage_bytes"), _arr(rows, "mem_max_usage_bytes"),
                          inside, a, b, True)
    vals = rss[inside & ~np.isnan(rss)]
    return SutWindow(start_s=round(a, 6), end_s=round(b, 6), samples=int(inside.sum()),
                     cpu_cores=_cpu_cores(t, _arr(rows, "cpu_ns"), a, b),
                     rss_mean_bytes=float(vals.mean()) if len(vals) else None,
                     rss_peak_bytes=peak, peak_exact=exact, mem_usage_peak_bytes=usage_peak)


def _sampling_cost(rd: RunDir) -> Optional[str]:
    if not rd.monitor_cost_json.is_file():
        return None
    cost = read_model(rd.monitor_cost_json, MonitorCost, "the monitor's cost")
    if cost.elapsed_s <= 0:
        return None
    share = cost.sut_cpu_ns / (cost.elapsed_s * 1e9)
    return (f"sampling them cost the monitor {100 * share:.3f} % of a core "
            f"({cost.sut_components} component(s), {cost.samples} samples)")


def analyse(rd: RunDir, test_start_ns: int, duration_s: float, window_s: float
            ) -> tuple[Optional[SutResourcesBlock], Optional[pd.DataFrame]]:
    """The block and its series; (None, None) for a run without SUT components."""
    if not rd.sut_csv.is_file():
        return None, None
    try:
        samples = read_sut_samples(rd.sut_csv)
    except ValueError as e:
        raise AnalysisError(str(e)) from None
    if not samples:
        return None, None
    df = pd.DataFrame([s.model_dump() for s in samples])
    df["t_s"] = (df["mono_ns"] - test_start_ns) / 1e9
    n = max(1, math.ceil(duration_s / window_s - 1e-9))
    edges = [(k * window_s, min((k + 1) * window_s, duration_s)) for k in range(n)]
    components, series = {}, []
    for name, rows in df.groupby("component", sort=True):
        rows = rows.sort_values("mono_ns")
        t = rows["t_s"].to_numpy(dtype=float)
        first = rows.iloc[0]
        windows = [_window(rows, t, a, b) for a, b in edges]
        components[str(name)] = SutComponent(role=first["role"], group=first["group"],
                                             source=first["source"],
                                             test=_window(rows, t, 0.0, duration_s), windows=windows)
        for k, w in enumerate(windows):
            series.append([k, w.start_s, w.end_s, name, first["role"], first["group"], w.samples,
                           w.cpu_cores, _mib(w.rss_mean_bytes), _mib(w.rss_peak_bytes), w.peak_exact])
    comps = list(components.values())
    block = SutResourcesBlock(
        window_s=window_s, definition=DEFINITION, components=components,
        total=SutWindow.summed([c.test for c in comps], 0.0, duration_s),
        total_windows=[SutWindow.summed([c.windows[k] for c in comps], a, b) for k, (a, b) in enumerate(edges)],
        sampling=_sampling_cost(rd))
    return block, pd.DataFrame(series, columns=SERIES_COLUMNS)


def _mib(v: Optional[float]) -> Optional[float]:
    return None if v is None else v / MIB
