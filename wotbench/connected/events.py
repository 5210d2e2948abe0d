"""The connected devices' upstream events (docs/CONNECTED.md "Upstream events: schedule and
stamps", CONTRACTS §3c): each engine's ``events-log-*.csv`` (one row per event whose due time
came: ``device,seq,due_ns,sent_ns,outcome``) and its ``conn-summary.json`` ``upstream`` totals
become summary.json's ``connected.events`` (:class:`EventFigures`) and connected-summary.json's
``events``. The send lag (sent − due, one engine's CLOCK_MONOTONIC) is the testbed's: the
engine's timer and loop, like the open-loop applications' send lag, and judged by the same
1 ms p99 (:mod:`wotbench.connected.summary`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.stats import quantiles_of
from wotbench.csvcheck import read_csv_checked
from wotbench.rundir.connected_block import ConnStats, EventFigures
from wotbench.rundir.connected_files import ConnSummary, ConnUpstream
from wotbench.rundir.layout import EVENTS_LOG_GLOB

OUTCOMES = ("sent", "queued", "unsent_down", "backlog_full", "send_error")
COLUMNS = {"device": "int", "seq": "int", "due_ns": "int", "sent_ns": "int?",
           "outcome": OUTCOMES}
SEND_LAG_RULE_MS = 1.0        # the open-loop send-lag bound (the applications' too)
HIST_BUCKETS = 96             # conn_events.c CN_EV_HIST: 4 per octave from 1.024 µs


def bucket_lo(b: int) -> int:
    """The lower bound (ns) of the engines' send-lag bucket ``b`` (conn_events.c)."""
    if b < 4:
        return b << 10
    e, sub = (b - 4) // 4 + 2, (b - 4) % 4
    return ((4 + sub) << (e - 2)) << 10


_LOS = [bucket_lo(b) for b in range(HIST_BUCKETS + 1)]


def hist_quantile_ns(hist: list[tuple[int, int]], q: float) -> Optional[int]:
    """The upper bound of the bucket that holds quantile ``q`` of a summed histogram."""
    total = sum(n for _, n in hist)
    if not total:
        return None
    need, seen = q * total, 0
    for lo, n in sorted(hist):
        seen += n
        if seen >= need:
            b = _LOS.index(lo) if lo in _LOS else HIST_BUCKETS - 1
            return _LOS[min(b + 1, HIST_BUCKETS)]
    return _LOS[HIST_BUCKETS]


def read_event_rows(path: Path) -> pd.DataFrame:
    """One ``events-log-*.csv``, every value checked; a row whose ``sent_ns`` does not go
    with its outcome (present exactly when sent) or lies before its due time is named
    ``FILE:LINE``."""
    df = read_csv_checked(path, COLUMNS, "events-log.csv", AnalysisError)
    sent = df["outcome"] == "sent"
    bad = (sent != df["sent_ns"].notna()) | (sent & (df["sent_ns"] < df["due_ns"]))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        r = df.iloc[i]
        raise AnalysisError(
            f"{path}:{i + 2}: outcome {r['outcome']} with sent_ns "
            f"{'empty' if pd.isna(r['sent_ns']) else int(r['sent_ns'])} (due_ns "
            f"{int(r['due_ns'])}), expected a sent_ns at or after due_ns exactly when the "
            "outcome is sent")
    return df


def read_events(dirs: list[Path]) -> pd.DataFrame:
    frames = [read_event_rows(f) for d in dirs for f in sorted(d.glob(EVENTS_LOG_GLOB))]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame({c: pd.Series(dtype="float64") for c in COLUMNS})


def event_figures(engines: list[ConnSummary], dirs: list[Path],
                  warmup_end_ns: Optional[int]) -> Optional[EventFigures]:
    """The events of these engines; ``warmup_end_ns`` None: the engines are on several hosts'
    clocks (a merged run), so the send lag is over every row. None when no engine has events
    or an engine's files predate the rows."""
    ups: list[ConnUpstream] = [e.upstream for e in engines if e.upstream is not None]
    if len(ups) != len(engines) or not sum(u.scheduled for u in ups):
        return None
    rows = read_events(dirs)
    if len(rows) != sum(u.rows for u in ups):
        raise AnalysisError(f"{', '.join(str(d) for d in dirs)}: {len(rows)} rows in "
                            f"{EVENTS_LOG_GLOB}, expected the {sum(u.rows for u in ups)} of "
                            "conn-summary.json upstream.rows")
    m = rows if warmup_end_ns is None else rows[rows["due_ns"] >= warmup_end_ns]
    s = m[m["outcome"] == "sent"]
    lag_ms = ((s["sent_ns"] - s["due_ns"]) / 1e6).to_numpy(float)
    hist: dict[int, int] = {}
    for u in ups:
        for lo, n in u.lag_hist:
            hist[lo] = hist.get(lo, 0) + n
    p99 = hist_quantile_ns(list(hist.items()), 0.99)
    return EventFigures(
        scheduled=sum(u.scheduled for u in ups),
        outcomes={k: sum(getattr(u, k) for u in ups) for k in OUTCOMES},
        rows=len(rows), unlogged=sum(u.unlogged for u in ups), measured=len(m),
        send_lag=quantiles_of(ConnStats, lag_ms),
        send_lag_all_p99_ms=p99 / 1e6 if p99 is not None else None,
        bytes=sum(u.bytes for u in ups), rule_ms=SEND_LAG_RULE_MS,
        after_warmup=warmup_end_ns is not None)


def _bucket_floor_ms(upper_ms: float) -> float:
    """The lower bound of the histogram bucket whose upper bound is ``upper_ms``."""
    ns = round(upper_ms * 1e6)
    lower = [lo for lo in _LOS if lo < ns]
    return (lower[-1] if lower else 0) / 1e6


def judged_p99_ms(ev: EventFigures) -> Optional[float]:
    """What the verdict holds against the rule: the rows' p99 after the warm-up, or, when
    rows were not logged, the larger of it and the engines' histogram's (every sent event).
    The histogram gives a bucket (4 per octave, up to 25 % wide), so it is judged by that
    bucket's lower bound: only a p99 surely above the rule counts against the run."""
    p = ev.send_lag.p99_ms
    if ev.unlogged and ev.send_lag_all_p99_ms is not None:
        return max(p or 0.0, _bucket_floor_ms(ev.send_lag_all_p99_ms))
    return p


def event_reason(ev: Optional[EventFigures]) -> Optional[str]:
    """The verdict's reason when the engines sent their devices' events late, else None."""
    p99 = judged_p99_ms(ev) if ev else None
    if p99 is None or p99 <= ev.rule_ms:
        return None
    src = ("the engines' histogram of every sent event, rows beyond the reserved ones not logged"
           if ev.unlogged and p99 != ev.send_lag.p99_ms else "after the warm-up")
    return (f"the engines sent their devices' upstream events late: send lag (sent − due) p99 "
            f"{p99:.2f} ms > {ev.rule_ms:g} ms ({src}; the open-loop applications' rule)")
