"""Which 127.S.0.0/16 block a process-backend run puts its devices in.

All of 127/8 is loopback on Linux, and a process-backend run's devices listen on plain loopback
addresses. Two such runs on one host (two users, two CI jobs, a sweep beside a test) would both
bind 127.0.0.10:5683 with SO_REUSEADDR-style sharing or fail on it, and one run's requests could
be answered by the other's devices: wrong figures nobody sees. So every run claims a block with
an exclusive ``flock`` on a file of its own under /dev/shm; the kernel drops the lock when the
harness exits, however it exits, so a dead run never holds a block. Block 0 (127.0.0.0/16) is
the first: a run alone on the host uses the addresses it always did.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from wotbench.errors import EnvironmentProblem

LOCK_DIR = Path("/dev/shm/wotbench-loopback")
BLOCKS = 255                     # 127.0.0.0/16 .. 127.254.0.0/16 (127.255/16 holds the broadcast)

_held: Optional[tuple[int, int]] = None   # (block, fd) of this process's run


def subnet(block: int) -> str:
    return f"127.{block}.0.0/16"


def claim(lock_dir: Path = LOCK_DIR) -> int:
    """Claim the first free block for this process's run (a process runs one run at a time:
    the block of its previous run is given back first)."""
    release()
    global _held
    lock_dir.mkdir(mode=0o1777, parents=True, exist_ok=True)
    for block in range(BLOCKS):
        path = lock_dir / f"block-{block}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held = (block, fd)
        return block
    raise EnvironmentProblem(f"{BLOCKS} process-backend runs already run on this host (every "
                             f"127.S.0.0/16 block is claimed in {lock_dir}); wait for one to end")


def release() -> None:
    """Give this process's block back (cleanup; claim() does it too)."""
    global _held
    if _held is not None:
        os.close(_held[1])
        _held = None


def held() -> Optional[int]:
    return _held[0] if _held else None
