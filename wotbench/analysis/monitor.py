"""Resource use during the run, from the monitor's files (docs/CONTRACTS.md §4 ``monitor/``):

- per core (collectl, ``monitor/cpu.csv``; the raw ``monitor/collectl/*.cpu`` plot file when the
  runner could not parse it): ``series/cpu_cores.csv`` ``t_s, core, busy_pct``;
- per component (``monitor/cgroups.csv``, cumulative counters -> rates):
  ``series/cpu_components.csv`` ``t_s, component, cpu_pct, runq_ms_per_s`` (CPU in % of one
  core, run-queue wait in ms per second: the direct sign of CPU contention);
- the same with each device group's devices summed (what the report draws: a legend of groups,
  not of hundreds of devices): ``series/cpu_groups.csv`` ``t_s, group, devices, cpu_pct,
  runq_ms_per_s`` (``devices``: the group's size, empty for a component that is not a device);
- the summary's ``monitor`` block: the host's mean CPU busy during the test, and why a series
  is missing when it is.
Times are seconds since the test start.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.csvcheck import read_optional_csv
from wotbench.rundir import MonitorBlock, RunDir

CPU_COLUMN = re.compile(r"\[CPU:(\d+)\](Totl|Idle)%")


def _cpu_wide(df: pd.DataFrame, t: pd.Series) -> Optional[pd.DataFrame]:
    """collectl per-core columns ([CPU:n]Totl%, else 100 - [CPU:n]Idle%) -> t_s, core, busy_pct."""
    out = []
    for c in df.columns:
        m = CPU_COLUMN.fullmatch(str(c))
        if not m:
            continue
        core, kind = m.groups()
        if kind == "Idle" and f"[CPU:{core}]Totl%" in df.columns:
            continue
        v = pd.to_numeric(df[c], errors="coerce")
        out.append(pd.DataFrame({"t_s": t, "core": core, "busy_pct": v if kind == "Totl" else 100 - v}))
    return pd.concat(out, ignore_index=True).dropna() if out else None


def _raw_collectl(rd: RunDir) -> Optional[pd.DataFrame]:
    """Raw collectl plot files (``#UTC`` header, -oUzm) when the runner did not leave
    monitor/cpu.csv; time is relative to the first sample."""
    cdir = rd.monitor_dir / "collectl"
    for f in sorted(cdir.glob("*.cpu")) if cdir.is_dir() else []:
        try:
            lines = f.read_text(errors="replace").splitlines()
        except OSError:
            continue
        hdr = next((ln for ln in lines if ln.startswith("#UTC")), None)
        if hdr is None:
            continue
        cols = ["utc_s"] + hdr.split()[1:]
        rows = [r for r in (ln.split() for ln in lines if ln and not ln.startswith("#"))
                if len(r) == len(cols)]
        if rows:
            df = pd.DataFrame(rows, columns=cols)
            t = pd.to_numeric(df["utc_s"], errors="coerce")
            return _cpu_wide(df, t - t.min())
    return None


def cpu_cores(rd: RunDir, start_ns: int) -> tuple[Optional[pd.DataFrame], Optional[str]]:
    """(t_s, core, busy_pct) or (None, why not)."""
    if not rd.monitor_dir.is_dir():
        return None, ("the run has no monitor/ directory (monitoring was disabled or the run "
                      "stopped before it started)")
    df = read_optional_csv(rd.cpu_csv)
    if df is not None and "mono_ns" in df:
        out = _cpu_wide(df, (pd.to_numeric(df["mono_ns"], errors="coerce").astype(float)
                             - start_ns) / 1e9)
        if out is not None:
            return out, None
    out = _raw_collectl(rd)
    if out is not None:
        return out, None
    return None, ("no per-core CPU data: neither monitor/cpu.csv nor a collectl *.cpu file was "
                  "found (is collectl installed on the host?)")


def cpu_components(rd: RunDir, start_ns: int) -> tuple[Optional[pd.DataFrame], Optional[str]]:
    """(t_s, component, cpu_pct, runq_ms_per_s) from the cumulative cgroup counters, or
    (None, why not)."""
    df = read_optional_csv(rd.cgroups_csv)
    if df is None:
        return None, ("monitor/cgroups.csv is missing or empty (monitoring was off or stopped "
                      "early)")
    if not {"mono_ns", "component", "cpu_ns"} <= set(df.columns):
        return None, (f"monitor/cgroups.csv lacks mono_ns/component/cpu_ns columns (has "
                      f"{', '.join(map(str, df.columns))})")
    t = (pd.to_numeric(df["mono_ns"], errors="coerce").astype(float) - start_ns) / 1e9
    out = pd.DataFrame({"t_s": t, "component": df["component"].astype(str),
                        "cpu": pd.to_numeric(df["cpu_ns"], errors="coerce")})
    out["rq"] = pd.to_numeric(df["runqueue_ns"], errors="coerce") if "runqueue_ns" in df else np.nan
    out = out.sort_values(["component", "t_s"])
    g = out.groupby("component")
    dt = g["t_s"].diff()
    # a counter that dropped (a restarted component counts from 0 again): that interval unknown
    cpu_d, rq_d = g["cpu"].diff(), g["rq"].diff()
    out["cpu_pct"] = (cpu_d / 1e9 / dt * 100).where((dt > 0) & ~(cpu_d < 0))
    out["runq_ms_per_s"] = (rq_d / 1e6 / dt).where((dt > 0) & ~(rq_d < 0))
    out = out.dropna(subset=["cpu_pct"])[["t_s", "component", "cpu_pct", "runq_ms_per_s"]]
    if not len(out):
        return None, "monitor/cgroups.csv has fewer than two samples per component"
    return out, None


def cpu_groups(comps: Optional[pd.DataFrame], groups: dict[str, str]) -> Optional[pd.DataFrame]:
    """Per component, a device group's devices summed (``groups``: device -> group).

    A monitor that samples devices in batches writes its own ``<group>-*`` rows (the sums of
    the group's latest counters, every interval): those are the group. Older runs have one row
    per device per interval: they are summed here, times rounded to 0.1 s so the samples the
    devices of a group took in one interval meet."""
    if comps is None:
        return None
    sizes = dict(Counter(groups.values()))
    summed = {f"{g}-*": g for g in sizes}
    if comps["component"].isin(list(summed)).any():
        comps = comps[~comps["component"].isin(list(groups))]
        group = comps["component"].map(summed)
    else:
        group = comps["component"].map(groups)
    df = pd.DataFrame({"group": group.fillna(comps["component"]),
                       "devices": group.map(sizes).astype("Int64"),
                       "t_s": comps["t_s"].round(1), "cpu_pct": comps["cpu_pct"],
                       "runq_ms_per_s": comps["runq_ms_per_s"]})
    return df.groupby(["group", "devices", "t_s"], as_index=False, dropna=False)[
        ["cpu_pct", "runq_ms_per_s"]].sum(min_count=1)


def host_busy_pct(cores: Optional[pd.DataFrame], duration_s: float) -> Optional[float]:
    """Mean CPU busy over all cores and samples during the test (0..duration_s)."""
    if cores is None:
        return None
    v = cores.loc[(cores["t_s"] >= 0) & (cores["t_s"] <= duration_s), "busy_pct"].to_numpy(float)
    m = float(v.mean()) if len(v) else float("nan")
    return m if np.isfinite(m) else None


def cpu_per_request_us(group_cpu: Optional[pd.DataFrame], duration_s: float,
                       answered: dict[str, int]) -> dict[str, float]:
    """Device CPU time per answered request of every device group during the test, in µs:
    the group's CPU (its devices' threads or containers) integrated over the samples inside
    0..duration_s, over its requests that ended ok. Exact to about one sampling interval at
    each end of the test; what DTLS, block-wise transfers or a service mode cost a device."""
    out: dict[str, float] = {}
    if group_cpu is None:
        return out
    for g, n in answered.items():
        d = group_cpu[group_cpu["group"] == g].sort_values("t_s")
        t = d["t_s"].to_numpy(float)
        if n <= 0 or len(t) < 2:
            continue
        dt = np.minimum(np.diff(t), t[1:])       # the first interval is cut at the test start
        inside = (t[1:] > 0) & (t[1:] <= duration_s) & (dt > 0)
        if inside.any():
            cpu_s = float((d["cpu_pct"].to_numpy(float)[1:][inside] / 100 * dt[inside]).sum())
            out[g] = cpu_s / n * 1e6
    return out


def analyse(rd: RunDir, start_ns: int, duration_s: float, groups: dict[str, str],
            answered: Optional[dict[str, int]] = None
            ) -> tuple[MonitorBlock, dict[str, pd.DataFrame]]:
    """The summary's ``monitor`` block and the series it came from (``groups``: device ->
    device group, as the runner recorded them; ``answered``: requests that ended ok, per
    device group)."""
    cores, cores_why = cpu_cores(rd, start_ns)
    comps, comps_why = cpu_components(rd, start_ns)
    series = {}
    if cores is not None:
        series["cpu_cores"] = cores
    if comps is not None:
        series["cpu_components"] = comps
        series["cpu_groups"] = cpu_groups(comps, groups)
    per_request = cpu_per_request_us(series.get("cpu_groups"), duration_s, answered or {})
    return MonitorBlock(host_cpu_busy_pct=host_busy_pct(cores, duration_s),
                        cpu_cores_missing=cores_why, cpu_components_missing=comps_why,
                        device_cpu_us_per_request=per_request), series
