"""Gateway-emulator integrity (paper §6.1, Table 1): did the GE send when the trace said?

For every GE and every device it serves, the rows that were actually sent (``sent_ns`` not empty)
are taken in trace order. Expected RIT = difference of consecutive ``scheduled_ns`` of the same
device, submitted RIT = difference of consecutive ``sent_ns``. Send lag = sent − scheduled.

Rule (``kept_up`` true) — all of, on the GE's pooled samples:
  * late_share  = share of sends with lag >  late_threshold_ms   <= max_late_share (1 %)
  * early_share = share of sends with lag < −late_threshold_ms   <= max_late_share
  * lag_p99_ms <= late_threshold_ms
  * ks_tol <= max_ks (0.05): KS distance between the expected and the submitted RIT
    distributions, allowing a horizontal tolerance of ``late_threshold_ms`` (a plain KS is also
    reported, as in the paper, but it is meaningless for deterministic RITs where µs jitter
    alone makes it ~0.5).
``kept_up`` is None (not checked) with fewer than 2 sent requests.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from wotbench.rundir import GeIntegrityParams

from .stats import cdf_points, fnum, ks_distance


def _rit_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Sent rows of one GE in trace order: lag (ms) and per-device RIT pairs (ms)."""
    sent = df["sent"].to_numpy()
    m = ~np.isnan(sent)
    dev = df["device"].to_numpy(np.int64)[m]
    idx = df["index"].to_numpy(np.int64)[m]
    sched = df["sched"].to_numpy()[m]
    snt = sent[m]
    order = np.lexsort((idx, dev))
    dev, sched, snt = dev[order], sched[order], snt[order]
    same = dev[1:] == dev[:-1]
    return {
        "device": dev,
        "lag_ms": (snt - sched) / 1e6,
        "rit_dev": dev[1:][same],
        "exp_rit_ms": np.diff(sched)[same] / 1e6,
        "sub_rit_ms": np.diff(snt)[same] / 1e6,
    }


def _block(lag: np.ndarray, exp: np.ndarray, sub: np.ndarray, p: GeIntegrityParams,
           full: bool) -> dict[str, Any]:
    thr = p.late_threshold_ms
    n = len(lag)
    b: dict[str, Any] = {"sent": int(n)}

    def rit(x: np.ndarray) -> dict[str, Any]:
        if len(x) == 0:
            return {"count": 0, "mean_ms": None, "p5_ms": None, "p50_ms": None}
        q5, q50 = np.quantile(x, [0.05, 0.5])
        return {"count": int(len(x)), "mean_ms": float(x.mean()), "p5_ms": float(q5),
                "p50_ms": float(q50)}

    b["expected_rit"] = rit(exp)
    b["submitted_rit"] = rit(sub)
    b["ks"] = fnum(ks_distance(exp, sub)) if len(exp) else None
    b["ks_tol"] = fnum(ks_distance(exp, sub, tol=thr)) if len(exp) else None
    if n:
        qs = np.quantile(lag, [0.5, 0.9, 0.99, 0.999])
        b["lag_ms"] = {"mean": float(lag.mean()), "p50": float(qs[0]), "p90": float(qs[1]),
                       "p99": float(qs[2]), "p999": float(qs[3]), "max": float(lag.max()),
                       "min": float(lag.min())}
        b["late_share"] = float(np.count_nonzero(lag > thr) / n)
        b["early_share"] = float(np.count_nonzero(lag < -thr) / n)
    else:
        b["lag_ms"] = {k: None for k in ("mean", "p50", "p90", "p99", "p999", "max", "min")}
        b["late_share"] = None
        b["early_share"] = None
    if full:
        b["kept_up"], b["problems"] = judge(b, p)
    return b


def judge(b: dict[str, Any], p: GeIntegrityParams) -> tuple[bool | None, list[str]]:
    """Apply the kept-up rule to one block; returns (kept_up, list of violated conditions)."""
    if b["sent"] < 2 or b["late_share"] is None:
        return None, ["fewer than 2 requests sent"]
    problems = []
    thr = p.late_threshold_ms
    if b["late_share"] > p.max_late_share:
        problems.append(f"{b['late_share']:.2%} of sends later than {thr:g} ms "
                        f"(limit {p.max_late_share:.2%})")
    if b["early_share"] > p.max_late_share:
        problems.append(f"{b['early_share']:.2%} of sends earlier than {thr:g} ms")
    if b["lag_ms"]["p99"] > thr:
        problems.append(f"p99 send lag {b['lag_ms']['p99']:.3f} ms > {thr:g} ms")
    if b["ks_tol"] is not None and b["ks_tol"] > p.max_ks:
        problems.append(f"RIT distributions differ: KS (±{thr:g} ms) {b['ks_tol']:.3f} > "
                        f"{p.max_ks:g}")
    return not problems, problems


def ge_integrity(req: pd.DataFrame, ge_id: str, dev_names: dict[int, str],
                 p: GeIntegrityParams, summary: dict[str, Any] | None = None
                 ) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Integrity block of one GE + its RIT CDF and lag CDF series."""
    a = _rit_arrays(req)
    block = _block(a["lag_ms"], a["exp_rit_ms"], a["sub_rit_ms"], p, full=True)
    block["requests"] = int(len(req))
    block["interrupted"] = bool((summary or {}).get("interrupted", False))
    block["wait"] = (summary or {}).get("wait")
    per_dev = {}
    if len(a["device"]):
        dev_ids = np.unique(a["device"])
        # split pooled arrays by device once (arrays are sorted by device)
        lag_split = np.split(a["lag_ms"], np.searchsorted(a["device"], dev_ids[1:]))
        rit_cuts = np.searchsorted(a["rit_dev"], dev_ids[1:])
        exp_split = np.split(a["exp_rit_ms"], rit_cuts)
        sub_split = np.split(a["sub_rit_ms"], rit_cuts)
        for d, lg, ex, su in zip(dev_ids, lag_split, exp_split, sub_split):
            db = _block(lg, ex, su, p, full=True)
            per_dev[dev_names.get(int(d), f"dev-{int(d)}")] = db
    block["devices_not_kept_up"] = sorted(k for k, v in per_dev.items() if v["kept_up"] is False)
    block["per_device"] = per_dev

    prob, exp_q = cdf_points(a["exp_rit_ms"], p.cdf_points)
    _, sub_q = cdf_points(a["sub_rit_ms"], p.cdf_points)
    rit_cdf = pd.DataFrame({"ge": ge_id, "cdf": prob, "expected_rit_ms": exp_q,
                            "submitted_rit_ms": sub_q})
    _, lag_q = cdf_points(a["lag_ms"], p.cdf_points)
    lag_cdf = pd.DataFrame({"ge": ge_id, "cdf": prob, "lag_ms": lag_q})
    return block, rit_cdf, lag_cdf
