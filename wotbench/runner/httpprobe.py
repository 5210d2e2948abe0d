"""The harness's readiness probes of an HTTP->CoAP proxy (``gateways.proxy.mode: http``), with
the standard library's HTTP client: wait until it accepts a TCP connection, then one GET that
it must forward to a device. Only before the test; never on the load path.
"""
from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass
from typing import Callable, Optional
from urllib.parse import urlsplit

ROUND_S = 0.2


def wait_accepting(host: str, port: int, timeout_s: float,
                   gone: Optional[Callable[[], Optional[str]]] = None) -> Optional[str]:
    """Connect to ``host:port`` every round until it accepts; None when it did, else why not
    (the last error, or what ``gone`` says about the program: e.g. "exited with 1")."""
    deadline = time.monotonic() + timeout_s
    why = "no answer"
    while True:
        try:
            with socket.create_connection((host, port), timeout=ROUND_S * 5):
                return None
        except OSError as e:
            why = e.strerror or str(e)
        dead = gone() if gone else None
        if dead:
            return dead
        if time.monotonic() >= deadline:
            return why
        time.sleep(ROUND_S)


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    reason: str
    body: bytes


def get(uri: str, timeout_s: float) -> HttpAnswer:
    """One HTTP/1.1 GET of ``uri`` (http://host:port/target, the target sent as written);
    OSError (refused, reset, timeout) when no answer came."""
    u = urlsplit(uri)
    target = uri[len(f"{u.scheme}://{u.netloc}"):] or "/"
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", target, headers={"Accept": "*/*"})
        r = conn.getresponse()
        return HttpAnswer(r.status, r.reason, r.read(4096))
    except http.client.HTTPException as e:   # not HTTP at all (e.g. a CoAP-only port)
        raise OSError(f"not an HTTP answer ({type(e).__name__}: {e})") from None
    finally:
        conn.close()
