"""The wot-fleet engines' own fidelity (summary.json ``fleet``, model ``rundir/fleet.py``): read
lag, timer lateness, busy overrun and per-device queueing per engine and event loop, over the
test and per window (``series/fleet_lag.csv``), and what the kernel-evidence rule ``loop_lag``
gets to judge (``cd_module.evidence.LoopLags``). Vectorised over every log row: one
grouped sort for all loops and windows, no per-device work.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis import fleet_load
from wotbench.analysis.loading import DeviceInfo, RunData
from wotbench.analysis.stats import grouped_stats
from cd_module.loop_lag import LoopLags
from wotbench.deploy.plan import parse_cpuset
from wotbench.rundir.evidence import EvidenceBlock
from wotbench.rundir.fleet import EngineFidelity, EngineLag, FleetBlock, LoopFidelity
from wotbench.rundir.values import fnum

DEFINITION = ("per engine loop: read_lag = arrival - arrival_kernel (the loop read the request "
              "late), timer_late = end - due of sleep service, busy_over = end - due of busy "
              "service (the testbed's), queueing = start - arrival (the emulated device's own "
              "queue); rule loop_lag: a window where more than the GE rule's share of a loop's "
              "requests had read_lag or timer_late > loop_lag_ms (one-sided binomial test)")
LAGS = ("read_lag", "timer_late", "busy_over", "queueing")
SERIES_COLUMNS = ["window", "start_s", "end_s", "engine", "loop", "requests",
                  "read_lag_p50_us", "read_lag_p99_us", "timer_late_p50_us", "timer_late_p99_us",
                  "busy_over_p99_us", "queueing_p50_us", "queueing_p99_us", "late_share"]


def place(engine: str, loop: int) -> str:
    """The evidence place of one engine loop."""
    return f"fleet {engine} loop {loop}"


def _modes(log: pd.DataFrame, codes: np.ndarray, devices: list[Optional[DeviceInfo]]
           ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: sleep-mode service, busy-mode service (by the device's resource file)."""
    sleep, busy = np.zeros(len(log), bool), np.zeros(len(log), bool)
    frames: dict[int, tuple[pd.DataFrame, list[int]]] = {}
    for c in np.unique(codes[codes >= 0]):
        d = devices[int(c)] if int(c) < len(devices) else None
        if d is not None and d.resources is not None:
            frames.setdefault(id(d.resources), (d.resources, []))[1].append(int(c))
    paths = log["path"].astype(str).to_numpy()
    for res, cs in frames.values():
        rows = np.isin(codes, cs)
        mode = pd.Series(res["mode"].astype(str).to_numpy(),
                         index=res["path"].astype(str).str.lstrip("/").to_numpy())
        mode = mode[~mode.index.duplicated()]
        m = mode.reindex(paths[rows]).to_numpy()
        sleep[rows] = m == "sleep"
        busy[rows] = m == "busy"
    return sleep, busy


def _lags(log: pd.DataFrame, sleep: np.ndarray, busy: np.ndarray) -> dict[str, np.ndarray]:
    """The four lags of every row, µs (NaN where they do not apply or a stamp is missing)."""
    f = {k: log[k].to_numpy(np.float64) for k in ("arrival_ns", "start_ns", "end_ns",
                                                  "arrival_kernel_ns", "due_ns")}
    over = (f["end_ns"] - f["due_ns"]) / 1e3
    kernel = np.where(f["arrival_kernel_ns"] > 0, f["arrival_kernel_ns"], np.nan)
    return {"read_lag": (f["arrival_ns"] - kernel) / 1e3,
            "timer_late": np.where(sleep, over, np.nan),
            "busy_over": np.where(busy, over, np.nan),
            "queueing": (f["start_ns"] - f["arrival_ns"]) / 1e3}


def _family(g: dict[str, np.ndarray], i: int) -> EngineLag:
    q = g["quantiles"][i]
    return EngineLag(count=int(g["count"][i]), mean_us=fnum(g["mean"][i]), p50_us=fnum(q[0]),
                     p99_us=fnum(q[1]), p999_us=fnum(q[2]), max_us=fnum(g["max"][i]))


def _loop_cores(cores: list[int], loop: int, rec) -> tuple[int, ...]:
    """The core a loop ran on: the runner pins loop i to the i-th core of the engine's cpuset
    when it has one per loop (runner/deployment/fleets.py), else the loops share the whole set."""
    if rec is not None and len(cores) >= rec.loops and loop < len(cores):
        return (cores[loop],)
    return tuple(cores)


def _grouped(group: np.ndarray, v: np.ndarray, n: int) -> dict[str, np.ndarray]:
    ok = ~np.isnan(v)
    return grouped_stats(group[ok], v[ok], n, [0.5, 0.99, 0.999])


def analyse(run: RunData, names: list[str], window_s: float, loop_lag_ms: float
            ) -> tuple[Optional[FleetBlock], Optional[pd.DataFrame], dict[str, LoopLags]]:
    """The ``fleet`` block (before the evidence: :func:`with_flags` adds what ``loop_lag``
    flagged), its per-window series and each loop's lags for the evidence rule."""
    if not run.fleets:
        return None, None, {}
    code_of = {n: i for i, n in enumerate(names)}
    devices = [run.devices.get(n) for n in names]
    records = {r.name: r for r in run.run.fleets}
    nwin = max(1, int(np.ceil(run.duration_s / window_s - 1e-9)))
    engines, rows, loops = [], [], {}
    for f in run.fleets.values():
        e = EngineFidelity(name=f.name, devices=int(len(f.index)),
                           log_entries=0 if f.log is None else int(len(f.log)))
        if f.summary is not None:
            e.loops, e.workers = f.summary.loops, f.summary.workers
            e.log_dropped, e.rss_bytes = f.summary.log_dropped, f.summary.rss_bytes
            e.rss_per_device_bytes = f.summary.rss_bytes / f.summary.devices \
                if f.summary.devices else None
            e.pool_503 = sum(lp.pool_503 for lp in f.summary.loop)
            if e.pool_503:
                run.warnings.append(
                    f"{f.name}: {e.pool_503} 5.03 answers came from the engine's exhausted job "
                    "pool (its limit, not the devices' queues); loss counts them as refused_503")
            pending = sum(lp.pending_at_exit for lp in f.summary.loop)
            if pending:   # received, never logged: a GE timeout for one is placed to_device
                run.warnings.append(
                    f"{f.name}: {pending} requests were waiting or in service when the engine "
                    "stopped (no log row): a GE timeout for one of them counts as to_device")
        engines.append(e)
        if f.log is None or not len(f.log):
            continue
        codes = fleet_load.device_codes(f, code_of)
        sleep, busy = _modes(f.log, codes, devices)
        lags = _lags(f.log, sleep, busy)
        t_s = (f.log["arrival_ns"].to_numpy(np.float64) - run.test_start_ns) / 1e9
        win = np.floor(t_s / window_s).astype(np.int64)
        inside = (t_s >= 0) & (t_s < run.duration_s)
        loop = f.log["loop"].to_numpy(np.int64)
        loop_ids = np.unique(loop)
        li = np.searchsorted(loop_ids, loop)
        late = (lags["read_lag"] > loop_lag_ms * 1e3) | (lags["timer_late"] > loop_lag_ms * 1e3)
        whole = {k: _grouped(li[inside], v[inside], len(loop_ids)) for k, v in lags.items()}
        g = np.where(inside, li * nwin + np.clip(win, 0, nwin - 1), 0)[inside]
        per_win = {k: _grouped(g, v[inside], len(loop_ids) * nwin) for k, v in lags.items()}
        n_late = np.bincount(g, weights=late[inside], minlength=len(loop_ids) * nwin)
        n_all = np.bincount(g, minlength=len(loop_ids) * nwin)
        reported = {lp.loop: lp for lp in f.summary.loop} if f.summary is not None else {}
        rec = records.get(f.name)
        cores = parse_cpuset(rec.cpuset) if rec is not None and rec.cpuset else []
        for j, lp in enumerate(loop_ids):
            mine = inside & (li == j)
            n = int(np.count_nonzero(mine))
            e.per_loop.append(LoopFidelity(
                loop=int(lp), requests=n, **{k: _family(whole[k], j) for k in LAGS},
                late_share=fnum(float(late[mine].mean())) if n else None,
                engine=reported.get(int(lp))))
            loops[place(f.name, int(lp))] = LoopLags(
                arrival_ns=f.log["arrival_ns"].to_numpy(np.float64)[mine],
                read_lag_ms=lags["read_lag"][mine] / 1e3,
                timer_late_ms=lags["timer_late"][mine] / 1e3, cores=_loop_cores(cores, lp, rec),
                engine=f.name, devices=frozenset(
                    names[c] for c in np.unique(codes[mine]) if c >= 0))
            for w in range(nwin):
                k = j * nwin + w
                q = {key: per_win[key]["quantiles"][k] for key in LAGS}
                rows.append({"window": w, "start_s": w * window_s,
                             "end_s": min((w + 1) * window_s, run.duration_s),
                             "engine": f.name, "loop": int(lp), "requests": int(n_all[k]),
                             "read_lag_p50_us": q["read_lag"][0],
                             "read_lag_p99_us": q["read_lag"][1],
                             "timer_late_p50_us": q["timer_late"][0],
                             "timer_late_p99_us": q["timer_late"][1],
                             "busy_over_p99_us": q["busy_over"][1],
                             "queueing_p50_us": q["queueing"][0],
                             "queueing_p99_us": q["queueing"][1],
                             "late_share": n_late[k] / n_all[k] if n_all[k] else np.nan})
    block = FleetBlock(definition=DEFINITION, loop_lag_ms=loop_lag_ms, engines=engines)
    return block, pd.DataFrame(rows, columns=SERIES_COLUMNS), loops


def with_flags(block: Optional[FleetBlock], evidence: Optional[EvidenceBlock]
               ) -> Optional[FleetBlock]:
    """Each loop's windows that the evidence rule ``loop_lag`` flagged."""
    if block is None or evidence is None:
        return block
    for e in block.engines:
        for lp in e.per_loop:
            lp.windows_flagged = sorted({w.window for w in evidence.windows for fl in w.flags
                                         if fl.rule == "loop_lag"
                                         and fl.place == place(e.name, lp.loop)})
    block.behind = any(lp.windows_flagged for e in block.engines for lp in e.per_loop)
    return block
