"""The ``push`` block of summary.json: what the devices sent themselves (devices[].push,
push-requests.csv of each, docs/CONTRACTS.md §3 "Push"). Per operation: outcomes, the
response time R (the kernel receive stamp − the first send, user-space receive when there is
no stamp) of ok answers, the RFC 7252 retransmissions and the test-phase throughput; the devices' send lag (sent − due), which
like a GE's is the testbed's, not the system under test's."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.loading import OUTCOMES, RunData
from wotbench.analysis.stats import quantiles_of
from wotbench.rundir.summary import Outcomes, PushBlock, PushLagTimes, PushOp, PushTimes

LATE_US = 1000.0     # a device send more than 1 ms after its due instant is late


def timeout_ms(run: RunData) -> float:
    """The longest of the pushing devices' timeouts (0 without any), engines' included."""
    procs = [d.log_summary.push.timeout_ms for d in run.devices.values()
             if d.log_summary is not None and d.log_summary.push is not None]
    engines = [f.summary.push.timeout_ms for f in run.fleets.values()
               if f.summary is not None and f.summary.push is not None]
    return float(max(procs + engines, default=0))


def table(run: RunData) -> pd.DataFrame:
    """Every device's push rows with the device's name (an engine's: its fleet-push.csv, the
    names looked up by index)."""
    frames = [d.push.assign(name=n) for n, d in run.devices.items() if d.push is not None]
    frames += [f.push.assign(name=f.names_of(f.push["device"].to_numpy(np.int64)))
               for f in run.fleets.values() if f.push is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _outcomes(m: pd.DataFrame) -> Outcomes:
    counts = m["outcome"].astype(str).value_counts()
    return Outcomes(**{o: int(counts.get(o, 0)) for o in OUTCOMES})


def _r_ms(m: pd.DataFrame) -> np.ndarray:
    sent = m["sent_ns"].to_numpy(np.float64)
    rx = m["received_kernel_ns"].to_numpy(np.float64)
    rx = np.where(np.isnan(rx), m["received_ns"].to_numpy(np.float64), rx)
    ok = (m["outcome"].astype(str) == "ok").to_numpy()
    return ((rx - sent) / 1e6)[ok]


def _failed(t: pd.DataFrame, phase: str) -> list[str]:
    m = t[(t["phase"].astype(str) == phase) & (t["outcome"].astype(str) != "ok")]
    return [f"{r.name}: {r.op} {r.outcome}" + (f" {r.code}" if isinstance(r.code, str) else "")
            for r in m.itertuples()][:20]


def analyse(run: RunData) -> Optional[PushBlock]:
    t = table(run)
    if t.empty:
        return None
    by_op = {}
    for (op, phase), m in t.groupby([t["op"].astype(str), t["phase"].astype(str)], sort=True):
        oc = _outcomes(m)
        retx = m["retransmissions"].fillna(0).to_numpy(np.int64)
        by_op[op] = PushOp(phase=phase, requests=len(m), outcomes=oc,
                           retransmissions=int(retx.sum()),
                           with_retransmissions=int((retx > 0).sum()),
                           throughput_per_s=round(oc.ok / run.duration_s, 3)
                           if phase == "test" and run.duration_s else None,
                           response_ms=quantiles_of(PushTimes, _r_ms(m)))
    test = t[(t["phase"].astype(str) == "test")]
    sent = test["sent_ns"].to_numpy(np.float64)
    lag = ((sent - test["scheduled_ns"].to_numpy(np.float64)) / 1e3)[~np.isnan(sent)]
    return PushBlock(devices=int(t["name"].nunique()), by_op=by_op,
                     send_lag=quantiles_of(PushLagTimes, lag),
                     late_share=round(float((lag > LATE_US).mean()), 6) if len(lag) else None,
                     late_us=LATE_US, setup_failed=_failed(t, "setup"),
                     teardown_failed=_failed(t, "teardown"), verify=list(run.run.push_verify))
