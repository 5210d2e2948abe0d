"""Readiness: every device answers a CoAP ping (RFC 7252 §4.3: empty CON -> RST) before load.

One unconnected UDP socket pings every device that has not answered yet, every 100 ms, until
all answered or the deadline passed. Replies are matched by source address and message id.
"""
from __future__ import annotations

import select
import socket
import struct
import time
from typing import Callable, Iterable

from wotbench.errors import EnvironmentProblem


class NotReady(EnvironmentProblem):
    def __init__(self, missing: list[str], timeout_s: float, hint: str = ""):
        shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
        super().__init__(f"{len(missing)} device(s) did not answer a CoAP ping within "
                         f"{timeout_s:g} s: {shown}{hint}")
        self.missing = missing


def ping_packet(mid: int) -> bytes:
    return struct.pack("!BBH", 0x40, 0x00, mid & 0xFFFF)  # ver 1, CON, tkl 0, code 0.00


def wait_ready(devices: Iterable[tuple[str, str, int]], timeout_s: float = 15.0,
               dead: Callable[[], dict[str, str]] | None = None) -> float:
    """Ping ``(name, ip, port)`` devices until each answered with RST; return seconds taken.

    ``dead()`` (called every 0.5 s) may return ``{name: reason}`` for devices known to have
    exited, which fails at once instead of waiting for the timeout.
    """
    pending = {(ip, int(port)): name for name, ip, port in devices}
    mids = {addr: i & 0xFFFF for i, addr in enumerate(pending)}
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        next_round = next_dead_check = 0.0
        while pending:
            now = time.monotonic()
            if now >= deadline:
                raise NotReady(sorted(pending.values()), timeout_s)
            if now >= next_round:
                for addr in list(pending):
                    try:
                        sock.sendto(ping_packet(mids[addr]), addr)
                    except OSError:
                        pass  # e.g. ECONNREFUSED echoed from a previous ICMP error: retry
                next_round = now + 0.1
            if dead is not None and now >= next_dead_check:
                next_dead_check = now + 0.5
                gone = {n: why for n, why in dead().items() if n in pending.values()}
                if gone:
                    raise NotReady(sorted(gone), timeout_s, " -- " + "; ".join(
                        f"{n}: {why}" for n, why in sorted(gone.items())[:5]))
            r, _, _ = select.select([sock], [], [], max(0.0, min(next_round, deadline) - now))
            while r:
                try:
                    data, src = sock.recvfrom(64)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    continue  # ICMP port unreachable reported on the socket
                if (len(data) >= 4 and data[0] >> 6 == 1 and (data[0] >> 4) & 3 == 3
                        and src in pending and struct.unpack("!H", data[2:4])[0] == mids[src]):
                    del pending[src]
        return time.monotonic() - t0
    finally:
        sock.close()
