"""The report's view of the wot-fleet engines (summary ``fleet``) and of many devices
(``series/per_device.csv``): per engine loop its lag beside the devices' response times, and the
devices as distributions and top/bottom N, so 100 000 devices make a page of the same size as
100 (never one row per device beyond ``ROWS_MAX``)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from wotbench.csvcheck import read_optional_csv
from wotbench.rundir import RunDir, Summary

ROWS_MAX = 100        # the per-device table lists every device up to this many
TOP_N = 10
# per_device.csv column -> what the distribution row says
SPREAD = {"requests": "requests per device", "rt_p50_ms": "median response time (ms)",
          "rt_p99_ms": "p99 response time (ms)", "rd_p99": "p99 R_d",
          "device_in_p99_us": "p99 device in: read lag + queueing (µs)",
          "service_p99_us": "p99 service overshoot (µs)", "testbed_loss": "testbed losses"}


def fleet(s: Summary) -> Optional[dict[str, Any]]:
    """One row per engine loop: its lag quantiles (µs) and late share, beside the devices'."""
    if s.fleet is None:
        return None
    rows = []
    for e in s.fleet.engines:
        for lp in e.per_loop:
            rows.append({
                "engine": e.name, "loop": lp.loop, "requests": lp.requests,
                "read_lag": lp.read_lag, "timer_late": lp.timer_late, "busy_over": lp.busy_over,
                "queueing": lp.queueing, "late_share": lp.late_share,
                "flagged": ", ".join(str(w) for w in lp.windows_flagged),
                "wakeups": lp.engine.wakeups if lp.engine else None})
    rt = s.overall.response_time_ms.from_sent
    return {"rows": rows, "engines": s.fleet.engines, "behind": s.fleet.behind,
            "limit_ms": s.fleet.loop_lag_ms, "definition": s.fleet.definition,
            "rt_p50_ms": rt.p50_ms, "rt_p99_ms": rt.p99_ms}


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and not np.isfinite(v) else v)
             for k, v in r.items()} for r in df.to_dict("records")]


def devices_at_scale(rd: RunDir) -> Optional[dict[str, Any]]:
    """The devices as distributions (quantiles over the devices of each figure) and the
    slowest / fastest / most-lost ``TOP_N``; None without series/per_device.csv."""
    df = read_optional_csv(rd.series("per_device"))
    if df is None:
        return None
    spread = []
    for col, what in SPREAD.items():
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)
        v = v[np.isfinite(v)]
        q = np.quantile(v, [0, 0.5, 0.9, 0.99, 1]) if len(v) else [None] * 5
        spread.append({"what": what, "devices": int(len(v)),
                       **dict(zip(("min", "p50", "p90", "p99", "max"), q))})
    answered = df[np.isfinite(pd.to_numeric(df["rt_p99_ms"], errors="coerce"))]
    cols = ["device", "requests", "timeout", "testbed_loss", "rt_p50_ms", "rt_p99_ms",
            "device_in_p99_us"]
    lost = df[df["testbed_loss"] > 0].nlargest(TOP_N, "testbed_loss")
    return {"devices": int(len(df)), "spread": spread,
            "slowest": _records(answered.nlargest(TOP_N, "rt_p99_ms")[cols]),
            "fastest": _records(answered.nsmallest(TOP_N, "rt_p99_ms")[cols]),
            "most_lost": _records(lost[cols]),
            "no_answer": int(len(df) - len(answered))}
