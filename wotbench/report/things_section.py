"""The report's "Things" table: requests grouped by Thing Model and affordance.

Rows come from the trace directory's ``things/affordances.csv``
(:mod:`wotbench.things.files`): a request of the GEs' ``requests.csv`` belongs to a row when its device id is in the row's group, its
method is the row's and its path matches the row's ``pattern`` (an OBSERVE row counts
registrations, and ``notifications`` the notifications the GEs received for them, from their
``notifications.csv``; latency and losses of those are in the report's Observe section). Per row: the outcomes (every request ends in exactly one),
R percentiles of the ok answers (answer received − sent, ms; p95 also from the scheduled send,
which counts a wait before the send, e.g. for a free HTTP connection), the ok throughput over the
test and over the op's own span (first send to last answer: a registration storm's rate). Recomputed from the run's files, as nothing in ``summary.json`` groups by affordance.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.loading import OUTCOMES, read_requests
from wotbench.errors import WotbenchError
from wotbench.rundir import RunDir
from wotbench.rundir.layout import GE_NOTIFICATIONS, GE_REQUESTS


def _ge_request_files(rd: RunDir, ge_dirs: list[str]) -> list[Path]:
    dirs = [rd.path / d for d in ge_dirs] or sorted(rd.ges_dir.glob("ge-*"))
    return [d / GE_REQUESTS for d in dirs if (d / GE_REQUESTS).is_file()]


def _notifications(files: list[Path]) -> Optional[pd.DataFrame]:
    """(device, path) of every notification the GEs received; None: no observation in the run."""
    frames = [pd.read_csv(p.parent / GE_NOTIFICATIONS, usecols=["device", "path"])
              for p in files if (p.parent / GE_NOTIFICATIONS).is_file()]
    return pd.concat(frames, ignore_index=True) if frames else None


def _notified(notes: Optional[pd.DataFrame], a) -> Optional[int]:
    """Notifications of the observe row ``a`` (its group's devices, a path of its pattern)."""
    if notes is None or a.method != "OBSERVE":
        return None
    dev = notes["device"].to_numpy()
    m = ((dev >= a.first_device) & (dev < a.first_device + a.devices)
         & notes["path"].astype(str).str.fullmatch(a.pattern).to_numpy())
    return int(m.sum())


def _pct(x: np.ndarray, q: float) -> Optional[float]:
    return float(np.percentile(x, q, method="inverted_cdf")) if len(x) else None


def _span_rate(ok: pd.DataFrame) -> Optional[float]:
    """ok answers per second over the op's own span (first send to last answer): a phase's
    rate (registrations/s of a storm), where the test-long rate would dilute it."""
    if len(ok) < 2:
        return None
    span = (ok["received_ns"].max() - ok["sent_ns"].min()) / 1e9
    return len(ok) / span if span > 0 else None


def things_table(rd: RunDir, ge_dirs: list[str], duration_s: Optional[float]) -> dict:
    """``{"available", "rows": [...], "note"}`` for the report template."""
    f = rd.things_affordances
    if not f.is_file():
        return {"available": False}
    aff = pd.read_csv(f)
    files = _ge_request_files(rd, ge_dirs)
    try:
        frames = [read_requests(p)[["device", "method", "path", "scheduled_ns", "sent_ns",
                                    "received_ns", "outcome"]] for p in files]
        notes = _notifications(files)
    except (WotbenchError, ValueError) as e:
        return {"available": True, "rows": [], "note": f"requests.csv cannot be read: {e}"}
    if not frames:
        return {"available": True, "rows": [], "note": "no GE requests.csv in the run"}
    req = pd.concat(frames, ignore_index=True)
    dev = req["device"].to_numpy()
    meth = req["method"].astype(str).to_numpy()
    path = req["path"].astype(str)
    rows = []
    for a in aff.itertuples(index=False):
        m = ((dev >= a.first_device) & (dev < a.first_device + a.devices)
             & (meth == a.method) & path.str.fullmatch(a.pattern).to_numpy())
        sel = req[m]
        ok = sel[sel["outcome"] == "ok"]
        r_ms = ((ok["received_ns"] - ok["sent_ns"]).to_numpy(dtype=float) / 1e6)
        # from the scheduled send: includes any wait before the send (an HTTP connection's)
        r_sched = ((ok["received_ns"] - ok["scheduled_ns"]).to_numpy(dtype=float) / 1e6)
        counts = sel["outcome"].value_counts()
        rows.append({"model": a.model, "group": a.group, "affordance": a.affordance, "op": a.op,
                     "method": a.method, "path": a.path, "requests": int(len(sel)),
                     **{o: int(counts.get(o, 0)) for o in OUTCOMES},
                     "p50": _pct(r_ms, 50), "p95": _pct(r_ms, 95), "p99": _pct(r_ms, 99),
                     "max": float(r_ms.max()) if len(r_ms) else None,
                     "p95_scheduled": _pct(r_sched, 95),
                     "throughput": len(ok) / duration_s if duration_s else None,
                     "span_rate": _span_rate(ok), "notifications": _notified(notes, a)})
    rows.sort(key=lambda r: (r["model"], r["group"], r["affordance"], r["op"]))
    # a directory's verify phase: each instance's TD read back, found = answered ok
    verify = [{"group": r["group"], "found": r["ok"], "requests": r["requests"]}
              for r in rows if r["op"] == "verify"]
    return {"available": True, "rows": rows, "note": None, "outcomes": list(OUTCOMES),
            "verify": verify}
