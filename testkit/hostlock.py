"""The machine-wide host lock (/tmp/wotbench-exclusive.lock) for benchmarks that measure
timing or CPU: taken here unless the caller already holds it (``flock FILE make bench``
passes the locked file descriptor down to its children; taking it again would wait forever)."""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK = Path("/tmp/wotbench-exclusive.lock")


def _inherited() -> bool:
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if os.readlink(fd) == str(LOCK):
                return True
        except OSError:
            pass
    return False


def hold(timeout_s: float = 900.0) -> int | None:
    """Blocks until this process holds the lock (returns its fd; it is released at exit), or
    returns None when an ancestor holds it. TimeoutError after ``timeout_s``."""
    if _inherited():
        return None
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    deadline, said = time.monotonic() + timeout_s, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise TimeoutError(f"{LOCK} still held after {timeout_s:g} s") from None
            if not said:
                print(f"waiting for the host lock {LOCK} ...", flush=True)
                said = True
            time.sleep(1.0)
