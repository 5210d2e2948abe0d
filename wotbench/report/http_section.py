"""The report's "HTTP" section (issue 22): status codes, requests without a status, the waits for
a free connection and the connection pool (keep-alive or a connection per request). Mapped
from ``summary.json`` ``http`` (:class:`~wotbench.rundir.http_block.HttpBlock`); nothing is
recomputed here."""
from __future__ import annotations

from wotbench.rundir import Summary

MODE_TEXT = {
    "keep-alive": "keep-alive: each target's pool was connected before the start and reused; a "
                  "request that found every connection of its target busy waited for one",
    "per-request": "a new TCP connection per request (Connection: close): every response time "
                   "includes the TCP handshake",
    "mixed": "the gateway emulators used different connection modes",
}


def _status_class(code: str) -> str:
    return {"2": "ok", "5": "server error", "4": "client error", "3": "redirect (not followed)",
            "1": "informational"}.get(code[:1], "?")


def http(s: Summary) -> dict:
    b = s.http
    if b is None:
        return {"available": False}
    rows = [{"code": c, "class": _status_class(c), "requests": n,
             "share": n / b.requests if b.requests else None}
            for c, n in sorted(b.status_codes.items())]
    rows += [{"code": "—", "class": f"no status: {o}", "requests": n,
              "share": n / b.requests if b.requests else None}
             for o, n in sorted(b.without_status.items())]
    w = b.wait_ms
    return {"available": True, "b": b, "rows": rows, "mode": MODE_TEXT[b.connection],
            "pool": b.pool.model_dump(),
            "wait": {"n": b.queued, "share": b.queued_share, "p50": w.p50_ms, "p95": w.p95_ms,
                     "p99": w.p99_ms, "max": w.max_ms}}
