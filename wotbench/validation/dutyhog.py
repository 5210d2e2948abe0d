"""A duty-cycled CPU antagonist for the graded study (``antagonist: {kind: duty-loop}``).

``python -m wotbench.validation.dutyhog --duty 0.45 --seconds 10 [--workers N] [--cores 0,1]
[--period-ms 100] [--kernel]``: N worker processes (processes, not threads: Python's lock would
serialise threads' user time), each busy ``duty`` of every period and asleep the rest, for
``seconds``. Worker i is pinned to ``cores[i % len(cores)]`` when cores are given, else free to
move. ``--kernel`` spends the busy part in the kernel (reads of /dev/zero, system time) instead
of user time. Nice level: the launcher wraps the command in ``nice -n``.

Bounded twice: by ``--seconds`` here and by the launcher's ``timeout -s KILL``. Prints one JSON
line at the end: ``{"started": true, "ran_s": ..., "workers": N}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

CHUNK = 1 << 18     # one /dev/zero read: ~20-50 µs of kernel copy, short against a 100 ms period


def _spin_user(until_ns: int) -> None:
    x = 0
    while time.monotonic_ns() < until_ns:
        for _ in range(2000):
            x += 1


def _spin_kernel(until_ns: int, fd: int) -> None:
    while time.monotonic_ns() < until_ns:
        os.read(fd, CHUNK)


def work(duty: float, period_ns: int, end_ns: int, kernel: bool) -> None:
    fd = os.open("/dev/zero", os.O_RDONLY) if kernel else -1
    busy_ns = int(duty * period_ns)
    t = time.monotonic_ns()
    while t < end_ns:
        stop = min(t + busy_ns, end_ns)
        _spin_kernel(stop, fd) if kernel else _spin_user(stop)
        nxt = t + period_ns
        left = (nxt - time.monotonic_ns()) / 1e9
        if left > 0:
            time.sleep(left)
        t = nxt


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="dutyhog")
    ap.add_argument("--duty", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cores", default="")
    ap.add_argument("--period-ms", type=float, default=100.0)
    ap.add_argument("--kernel", action="store_true")
    a = ap.parse_args(argv)
    if not 0 < a.duty <= 1:
        ap.error(f"--duty must be in (0, 1], got {a.duty}")
    if not 0 < a.seconds <= 600:
        ap.error(f"--seconds must be in (0, 600], got {a.seconds}")
    if not 1 <= a.workers <= 16:
        ap.error(f"--workers must be 1..16, got {a.workers}")
    if not 1 <= a.period_ms <= 1000:
        ap.error(f"--period-ms must be 1..1000, got {a.period_ms}")
    return a


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    cores = [int(c) for c in a.cores.split(",") if c.strip()]
    start = time.monotonic_ns()
    end = start + int(a.seconds * 1e9)
    kids = []
    for i in range(a.workers):
        pid = os.fork()
        if pid == 0:
            try:
                if cores:
                    os.sched_setaffinity(0, {cores[i % len(cores)]})
                work(a.duty, int(a.period_ms * 1e6), end, a.kernel)
            finally:
                os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    print(json.dumps({"started": True, "ran_s": (time.monotonic_ns() - start) / 1e9,
                      "workers": a.workers}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
