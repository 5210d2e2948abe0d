"""Devices that talk first in a synthetic run directory: ``push-requests.csv`` and the
``device-summary.json`` ``push`` entry as wot-device --push writes them (CONTRACTS.md §3)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd

from analysis_fixtures import TEST_START_NS


@dataclass(frozen=True)
class Push:
    """One row of push-requests.csv; times in ms from the test start (None: empty)."""
    phase: str
    op: str
    outcome: str
    at_ms: float                       # due
    lag_ms: Optional[float] = 0.01     # sent − due (None: not sent)
    r_ms: Optional[float] = 2.0        # kernel receive − sent (None: no answer)
    code: str = "2.04"
    method: str = "PUT"
    path: str = "example_data"
    retx: int = 0                      # RFC 7252 retransmissions


def readings(n: int, every_ms: float, start_ms: float = 100.0, r_ms: float = 2.0,
             lag_ms: float = 0.01) -> list[Push]:
    """``n`` answered test readings, one every ``every_ms``."""
    return [Push("test", "reading", "ok", start_ms + i * every_ms, lag_ms, r_ms)
            for i in range(n)]


def add_push(root: Path, device: str, dev_id: int, rows: list[Push]) -> pd.DataFrame:
    """Write the device's push files into the run directory ``root``; the rows written."""
    out = []
    for i, p in enumerate(rows):
        sent = None if p.lag_ms is None else int((p.at_ms + p.lag_ms) * 1e6)
        rx = None if sent is None or p.r_ms is None else sent + int(p.r_ms * 1e6)
        out.append({"index": i, "device": dev_id, "method": p.method, "path": p.path,
                    "scheduled_ns": int(p.at_ms * 1e6), "sent_ns": sent,
                    "received_ns": None if rx is None else rx + 30_000,
                    "code": p.code if rx is not None else "", "outcome": p.outcome,
                    "retransmissions": p.retx, "received_kernel_ns": rx, "phase": p.phase,
                    "op": p.op})
    df = pd.DataFrame(out)
    for c in ("sent_ns", "received_ns", "received_kernel_ns"):
        df[c] = df[c].astype("Int64")
    d = root / "devices" / device
    df.to_csv(d / "push-requests.csv", index=False)
    counts = df["outcome"].value_counts()
    summary_path = d / "device-summary.json"
    s = json.loads(summary_path.read_text())
    s["push"] = {"id": dev_id, "requests": len(df),
                 "outcomes": {o: int(counts.get(o, 0))
                              for o in ("ok", "error", "timeout", "reset", "unsent")},
                 **{ph: int((df["phase"] == ph).sum()) for ph in ("setup", "test", "teardown")},
                 "started": True, "start_mono_ns": TEST_START_NS, "timeout_ms": 10000,
                 "rx_stamps": "kernel", "late_answers_acked": 0, "location": None,
                 "send_lag_us": {"sent": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0,
                                 "max": 0.0}}
    summary_path.write_text(json.dumps(s))
    return df
