"""Judge a run against its service-level objectives (``slo:``, :mod:`wotbench.config.slo_spec`).

:func:`evaluate` takes the requests as a :class:`RequestFrame` (one entry per main-GE request)
and returns the typed ``summary.json`` ``slo`` block (:class:`wotbench.rundir.SloBlock`):
every objective judged on the whole test (this decides), on each window of ``window_s``
seconds of scheduled send time, and per device (the offenders). What is measured:

- ``pXX`` / ``pXX_sched``: the percentile (numpy linear interpolation, as in summary.json) of
  the response times of the 2.xx answers, from the actual / from the scheduled send;
- ``loss``: timeouts / sent requests (no answer at all, as ``overall.loss_rate_of_sent``);
- ``success``: 2.xx answers / sent requests;
- ``throughput``: 2.xx answers per second of the test (of the window).

A limit is inclusive (``<=`` / ``>=``): a value exactly at it passes. Nothing to measure is
``no_data``, which never passes: a run is ``met`` only when every objective passes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir import SloBlock, SloObjectiveResult, SloOffender, SloWindow
from wotbench.config.slo_spec import PERCENTILES, Objective, Slo, objectives

from wotbench.analysis.stats import grouped_stats

MAX_OFFENDERS = 10
MAX_MISSED_WINDOWS = 50


@dataclass
class RequestFrame:
    """The requests of a run as arrays of equal length (NaN where a time does not apply)."""
    device: np.ndarray          # int code into ``names``
    t_s: np.ndarray             # scheduled send, s from the test start
    outcome: np.ndarray         # str: ok | error | timeout | reset | unsent
    rt_sent_ms: np.ndarray
    rt_sched_ms: np.ndarray
    names: list[str]
    group_of: dict[str, str]    # device name -> group

    @classmethod
    def from_requests(cls, req: pd.DataFrame, codes: np.ndarray, names: list[str],
                      group_of: dict[str, str]) -> "RequestFrame":
        """From :func:`wotbench.analysis.responses.combine_ge` and ``device_codes``."""
        return cls(device=np.asarray(codes, np.int64), t_s=req["sched"].to_numpy(np.float64) / 1e9,
                   outcome=req["outcome"].astype(str).to_numpy(),
                   rt_sent_ms=req["rt_sent_ms"].to_numpy(np.float64),
                   rt_sched_ms=req["rt_sched_ms"].to_numpy(np.float64), names=list(names),
                   group_of=dict(group_of))


def _measure(o: Objective, f: RequestFrame, scope: np.ndarray, key: np.ndarray, n: int,
             seconds: np.ndarray) -> tuple[list[Optional[float]], np.ndarray]:
    """Objective ``o`` measured per group ``key`` (0..n-1) of the requests in ``scope``:
    (values, None where there is no data; samples). ``seconds``: each group's length in s."""
    ok = scope & (f.outcome == "ok")
    if o.metric in ("loss", "success"):
        sent = scope & (f.outcome != "unsent")
        hit = sent & (f.outcome == "timeout") if o.metric == "loss" else ok
        samples = np.bincount(key[sent], minlength=n)
        hits = np.bincount(key[hit], minlength=n)
        return [float(h / c) if c else None for h, c in zip(hits, samples)], samples
    if o.metric == "throughput":
        samples = np.bincount(key[scope], minlength=n)
        oks = np.bincount(key[ok], minlength=n)
        return [float(k / s) if c and s > 0 else None for k, c, s in zip(oks, samples, seconds)], samples
    p, _, sched = o.metric.partition("_")
    v = (f.rt_sched_ms if sched else f.rt_sent_ms)
    m = ok & ~np.isnan(v)
    g = grouped_stats(key[m], v[m], n, [PERCENTILES[p]])
    return [float(q) if c else None for q, c in zip(g["quantiles"][:, 0], g["count"])], g["count"]


def judge(o: Objective, measured: Optional[float]) -> tuple[str, Optional[float], Optional[float]]:
    """(state, margin, margin_rel): inclusive limits; ``no_data`` without a value."""
    if measured is None or not math.isfinite(measured):
        return "no_data", None, None
    margin = o.limit - measured if o.op == "<=" else measured - o.limit
    return ("pass" if margin >= 0 else "fail"), margin, margin / o.limit if o.limit else None


def _windows(f: RequestFrame, o: Objective, scope: np.ndarray, duration_s: float, window_s: float
             ) -> list[SloWindow]:
    """The objective per window of scheduled send time; the last one may be shorter."""
    n = max(1, math.ceil(duration_s / window_s - 1e-9)) if duration_s > 0 else 0
    if not n:
        return []
    starts = np.arange(n) * window_s
    ends = np.minimum(starts + window_s, duration_s)
    inside = scope & (f.t_s >= 0) & (f.t_s < duration_s)
    key = np.clip(np.floor(np.nan_to_num(f.t_s, nan=-1.0) / window_s), 0, n - 1).astype(np.int64)
    values, samples = _measure(o, f, inside, key, n, ends - starts)
    return [SloWindow(start_s=float(a), end_s=float(b), measured=v, samples=int(c),
                      state=judge(o, v)[0]) for a, b, v, c in zip(starts, ends, values, samples)]


def _offenders(f: RequestFrame, o: Objective, scope: np.ndarray, duration_s: float
               ) -> tuple[list[SloOffender], int, int]:
    """Devices that miss the objective on their own (not for throughput, a total): the farthest
    off first; (the first MAX_OFFENDERS, how many, devices judged)."""
    if o.metric == "throughput":
        return [], 0, 0
    n = len(f.names)
    values, samples = _measure(o, f, scope, f.device, n, np.full(n, duration_s))
    found, judged = [], 0
    for i, v in enumerate(values):
        state, margin, _ = judge(o, v)
        judged += state != "no_data"
        if state == "fail":
            found.append(SloOffender(device=f.names[i], measured=v, samples=int(samples[i]),
                                     margin=margin))
    found.sort(key=lambda d: d.margin)
    return found[:MAX_OFFENDERS], len(found), judged


def _worst(o: Objective, wins: list[SloWindow]) -> Optional[SloWindow]:
    judged = [w for w in wins if w.measured is not None]
    if not judged:
        return None
    return max(judged, key=lambda w: w.measured) if o.op == "<=" else min(judged, key=lambda w: w.measured)


def evaluate_objective(o: Objective, f: RequestFrame, duration_s: float, window_s: float
                       ) -> SloObjectiveResult:
    in_group = np.array([f.group_of.get(n) == o.group for n in f.names], bool) if o.group else None
    scope = in_group[f.device] if in_group is not None else np.ones(len(f.device), bool)
    values, counts = _measure(o, f, scope, np.zeros(len(f.device), np.int64), 1,
                              np.array([duration_s]))
    measured, samples = values[0], int(counts[0])
    state, margin, rel = judge(o, measured)
    wins = _windows(f, o, scope, duration_s, window_s)
    offenders, n_off, judged = _offenders(f, o, scope, duration_s)
    return SloObjectiveResult(
        key=o.key, metric=o.metric, group=o.group, label=o.label, op=o.op, limit=o.limit,
        unit=o.unit, measured=measured, samples=samples, state=state, margin=margin,
        margin_rel=rel, windows_total=len(wins),
        windows_pass=sum(w.state == "pass" for w in wins),
        windows_fail=sum(w.state == "fail" for w in wins),
        windows_no_data=sum(w.state == "no_data" for w in wins), worst_window=_worst(o, wins),
        missed_windows=[w for w in wins if w.state == "fail"][:MAX_MISSED_WINDOWS],
        offenders=offenders, offenders_total=n_off, devices_judged=judged)


def _text(status: str, results: list[SloObjectiveResult]) -> str:
    if status == "met":
        return f"SLO met: all {len(results)} objective(s) pass"
    bad = [r for r in results if r.state != "pass"]
    parts = []
    for r in bad:
        o = Objective(r.key, r.metric, r.group, r.op, r.limit, r.unit)
        parts.append(f"{o.short} no data" if r.measured is None else
                     f"{o.short} {o.fmt(r.measured)} {'>' if r.op == '<=' else '<'} {o.fmt(r.limit)}")
    return f"SLO {'missed' if status == 'missed' else 'not shown (no data)'}: " + "; ".join(parts)


def evaluate(slo: Slo, f: RequestFrame, duration_s: float) -> SloBlock:
    results = [evaluate_objective(o, f, duration_s, slo.window_s) for o in objectives(slo)]
    states = {r.state for r in results}
    status = "missed" if "fail" in states else "no_data" if "no_data" in states else "met"
    return SloBlock(status=status, window_s=slo.window_s, objectives=results,
                    text=_text(status, results))


def with_verdict(block: SloBlock, verdict_status: str) -> SloBlock:
    """Add the caveat of a run the testbed distorted: its SLO result is not the system's alone."""
    if verdict_status == "trustworthy":
        return block
    what = "miss" if block.status != "met" else "result"
    return block.model_copy(update={"testbed_caveat": (
        f"the testbed distorted this run (verdict {verdict_status}): the SLO {what} may be the "
        f"testbed's, not the system's")})


def exit_code(verdict_status: str, block: Optional[SloBlock]) -> int:
    """0 trustworthy (and every SLO met, or none set), 4 trustworthy but an SLO not met,
    3 the testbed distorted the result (this wins over an SLO miss)."""
    if verdict_status != "trustworthy":
        return 3
    return 4 if block is not None and block.status != "met" else 0
