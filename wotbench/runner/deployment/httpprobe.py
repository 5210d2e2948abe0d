"""The harness's HTTP readiness probes, with the standard library's ``http.client`` (HTTP/1.1).
Only before the test; never on the load path.

- HTTP systems under test (``protocol: http``): ``probe_all`` GETs each group's first path,
  again every round, until each target answered with any HTTP status (a 404 is an answer: the
  server is up).
- An HTTP->CoAP proxy (``gateways.proxy.mode: http``): ``wait_accepting`` until it accepts a TCP
  connection, then ``get`` of a request it must forward to a device.
"""
from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional
from urllib.parse import urlsplit

ROUND_S = 0.2
REQUEST_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    reason: str
    body: bytes


def _get(host: str, port: int, target: str, timeout_s: float, headers: dict[str, str]) -> HttpAnswer:
    """One GET of ``target``; OSError (refused, reset, timeout, not HTTP) when no answer came."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", target, headers=headers)
        r = conn.getresponse()
        return HttpAnswer(r.status, r.reason, r.read(4096))
    except http.client.HTTPException as e:   # not HTTP at all (e.g. a CoAP-only port)
        raise OSError(f"not an HTTP answer ({type(e).__name__}: {e})") from None
    finally:
        conn.close()


def get(uri: str, timeout_s: float) -> HttpAnswer:
    """One HTTP/1.1 GET of ``uri`` (http://host:port/target, the target sent as written);
    OSError (refused, reset, timeout) when no answer came."""
    u = urlsplit(uri)
    target = uri[len(f"{u.scheme}://{u.netloc}"):] or "/"
    return _get(u.hostname or "", u.port or 80, target, timeout_s, {"Accept": "*/*"})


def get_status(host: str, port: int, path: str, timeout_s: float) -> Optional[int]:
    """One ``GET /path``: the response status, None when nothing answered."""
    try:
        return _get(host, port, "/" + path.lstrip("/"), timeout_s,
                    {"Connection": "close"}).status
    except OSError:
        return None


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
