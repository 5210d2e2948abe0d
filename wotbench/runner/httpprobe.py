"""The harness's readiness probe of HTTP systems under test (``protocol: http``): a GET of the
group's first path from this host, again every round, until each target answered with any
HTTP status (a 404 is an answer: the server is up). Only before the test; never on the load
path. Uses the standard library's ``http.client`` (HTTP/1.1, ``Connection: close``).
"""
from __future__ import annotations

import http.client
import time
from typing import Callable, Iterable, Optional

ROUND_S = 0.2
REQUEST_TIMEOUT_S = 1.0


def get_status(host: str, port: int, path: str, timeout_s: float) -> Optional[int]:
    """One ``GET /path``: the response status, None when nothing answered."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", "/" + path.lstrip("/"), headers={"Connection": "close"})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def probe_all(targets: Iterable[tuple[str, str, int, str]], timeout_s: float,
              dead: Optional[Callable[[], dict[str, str]]] = None) -> tuple[list[str], dict[str, int]]:
    """GET every ``(name, host, port, path)`` until it answers: (names that never did,
    status of each that did)."""
    pending = {t[0]: t for t in targets}
    status: dict[str, int] = {}
    gone: list[str] = []    # exited: not answering, and not worth waiting for
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        round_end = time.monotonic() + ROUND_S
        for name, host, port, path in list(pending.values()):
            left = deadline - time.monotonic()
            code = get_status(host, port, path, max(0.05, min(REQUEST_TIMEOUT_S, left)))
            if code is not None:
                status[name] = code
                del pending[name]
        if dead is not None:
            for n in set(dead()) & set(pending):
                gone.append(n)
                del pending[n]
        if pending:
            time.sleep(max(0.0, min(round_end, deadline) - time.monotonic()))
    return sorted([*pending, *gone]), status
