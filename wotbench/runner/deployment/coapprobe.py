"""The harness's own small CoAP client (RFC 7252): readiness pings of the servers WoTbench does
not build (third-party devices, external endpoints, a proxy) and one proxied request that shows
whether a proxy forwards. Only before the test; never on the load path.

- :func:`ping_all`: an empty CON to every target, again every round, until each answered
  (RST or any reply from its address) or the time is up; one socket for all.
- :func:`proxied_get`: a GET carrying Proxy-Uri (or Proxy-Scheme + Uri-Host/Port/Path) to the
  proxy; returns the response code ("2.05", "5.05", ...) or None, following an empty ACK to
  the separate response (which it ACKs).
"""
from __future__ import annotations

import ipaddress
import os
import select
import socket
import struct
import time
from typing import Callable, Iterable, Optional
from urllib.parse import urlsplit

CON, NON, ACK, RST = 0, 1, 2, 3
GET = 1
URI_HOST, URI_PORT, URI_PATH, URI_QUERY, PROXY_URI, PROXY_SCHEME = 3, 7, 11, 15, 35, 39
ROUND_S = 0.2


def _family(host: str) -> int:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET


def _resolve(host: str, port: int) -> tuple:
    return socket.getaddrinfo(host, port, _family(host), socket.SOCK_DGRAM)[0][4][:2]


def header(mtype: int, code: int, mid: int, token: bytes = b"") -> bytes:
    return struct.pack("!BBH", 0x40 | (mtype << 4) | len(token), code, mid) + token


def _ext(v: int) -> tuple[int, bytes]:
    if v < 13:
        return v, b""
    if v < 269:
        return 13, bytes([v - 13])
    return 14, struct.pack("!H", v - 269)


def options(opts: list[tuple[int, bytes]]) -> bytes:
    """Encode (number, value) pairs, sorted by number (RFC 7252 section 3.1)."""
    out, last = b"", 0
    for num, val in sorted(opts, key=lambda o: o[0]):
        d, dx = _ext(num - last)
        n, nx = _ext(len(val))
        out += bytes([(d << 4) | n]) + dx + nx + val
        last = num
    return out


def _uint(v: int) -> bytes:
    return v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""


def proxy_options(uri: str, mode: str) -> list[tuple[int, bytes]]:
    """The options that carry ``uri`` to a forward proxy (``proxy-uri`` | ``proxy-scheme``)."""
    if mode == "proxy-uri":
        return [(PROXY_URI, uri.encode())]
    u = urlsplit(uri)
    opts = [(URI_HOST, (u.hostname or "").encode()), (URI_PORT, _uint(u.port or 5683)),
            (PROXY_SCHEME, u.scheme.encode())]
    opts += [(URI_PATH, seg.encode()) for seg in u.path.split("/")[1:] if seg or u.path != "/"]
    opts += [(URI_QUERY, q.encode()) for q in u.query.split("&") if q]
    return opts


def parse(data: bytes) -> Optional[tuple[int, str, int, bytes]]:
    """(type, "c.dd" code, message id, token) of a datagram, None when it is not CoAP."""
    if len(data) < 4 or data[0] >> 6 != 1 or len(data) < 4 + (data[0] & 0x0F):
        return None
    code = data[1]
    return ((data[0] >> 4) & 3, f"{code >> 5}.{code & 31:02d}",
            struct.unpack("!H", data[2:4])[0], data[4:4 + (data[0] & 0x0F)])


def ping_all(targets: Iterable[tuple[str, str, int]], timeout_s: float,
             dead: Optional[Callable[[], dict[str, str]]] = None) -> list[str]:
    """Ping every ``(name, host, port)`` until it answers; the names that never did."""
    targets = list(targets)
    pending: dict[tuple, str] = {}
    unresolved = []
    for name, host, port in targets:
        try:
            pending[_resolve(host, port)] = name
        except OSError:
            unresolved.append(name)
    socks = {f: socket.socket(f, socket.SOCK_DGRAM) for f in {socket.AF_INET, socket.AF_INET6}}
    try:
        deadline = time.monotonic() + timeout_s
        mid = int.from_bytes(os.urandom(2), "big")
        while pending and time.monotonic() < deadline:
            for addr in pending:
                mid = (mid + 1) & 0xFFFF
                try:
                    socks[socket.AF_INET6 if ":" in addr[0] else socket.AF_INET].sendto(
                        header(CON, 0, mid), addr)
                except OSError:
                    pass   # e.g. no route: it stays pending
            end = min(deadline, time.monotonic() + ROUND_S)
            while pending and (left := end - time.monotonic()) > 0:
                ready, _, _ = select.select(list(socks.values()), [], [], left)
                for s in ready:
                    try:
                        _, addr = s.recvfrom(2048)
                    except OSError:
                        continue   # ICMP port unreachable: not answered yet
                    pending.pop(addr[:2], None)
            if dead is not None:
                gone = set(dead())
                pending = {a: n for a, n in pending.items() if n not in gone}
        return sorted(set(pending.values()) | set(unresolved))
    finally:
        for s in socks.values():
            s.close()


def proxied_get(proxy: tuple[str, int], uri: str, mode: str, timeout_s: float) -> Optional[str]:
    """Send one GET for ``uri`` through the forward proxy; the response code, None if none."""
    addr = _resolve(*proxy)
    token, mid = os.urandom(4), int.from_bytes(os.urandom(2), "big")
    msg = header(CON, GET, mid, token) + options(proxy_options(uri, mode))
    with socket.socket(_family(addr[0]), socket.SOCK_DGRAM) as s:
        deadline = time.monotonic() + timeout_s
        next_send = 0.0
        while (left := deadline - time.monotonic()) > 0:
            if time.monotonic() >= next_send:   # CON retransmission, simplified: every second
                s.sendto(msg, addr)
                next_send = time.monotonic() + 1.0
            ready, _, _ = select.select([s], [], [], min(left, 0.2))
            if not ready:
                continue
            try:
                data, src = s.recvfrom(4096)
            except OSError:
                continue
            m = parse(data)
            if m is None or src[:2] != addr:
                continue
            mtype, code, rmid, rtoken = m
            if mtype == RST and rmid == mid:
                return "reset"
            if mtype == ACK and rmid == mid and code == "0.00":
                next_send = deadline          # empty ACK: the separate response follows
                continue
            if rtoken == token:
                if mtype == CON:
                    s.sendto(header(ACK, 0, rmid), addr)
                return code
    return None
