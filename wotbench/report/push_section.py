"""The report's "Push" section: the requests the devices sent themselves (devices[].push), per
operation (outcomes, R percentiles, throughput, retransmissions), the devices' send lag and the setups and
teardowns that failed. Mapped from ``summary.json`` ``push`` (:class:`PushBlock`); nothing is
recomputed here."""
from __future__ import annotations

from wotbench.rundir import Summary

PHASES = ("setup", "test", "teardown")


def push(s: Summary) -> dict:
    b = s.push
    if b is None:
        return {"available": False}
    ops = sorted(b.by_op.items(), key=lambda kv: (PHASES.index(kv[1].phase), kv[0]))
    rows = [{"op": name, "phase": o.phase, "requests": o.requests, **o.outcomes.model_dump(),
             "p50": o.response_ms.p50_ms, "p95": o.response_ms.p95_ms,
             "p99": o.response_ms.p99_ms, "max": o.response_ms.max_ms,
             "throughput": o.throughput_per_s, "retransmissions": o.retransmissions,
             "with_retransmissions": o.with_retransmissions} for name, o in ops]
    lag = b.send_lag
    return {"available": True, "devices": b.devices, "rows": rows,
            "lag": {"n": lag.n, "p50": lag.p50_us, "p99": lag.p99_us, "max": lag.max_us},
            "late_share": b.late_share, "late_ms": b.late_us / 1e3,
            "setup_failed": list(b.setup_failed), "teardown_failed": list(b.teardown_failed),
            "verify": [{"text": v.describe(), "ok": v.found >= v.expected} for v in b.verify]}
