"""Files the monitor reads again and again (procfs, cgroupfs): opened once, each read one
``pread`` at offset 0 (the kernel regenerates the text), so sampling costs no open/close."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def open_ro(path: str | Path) -> Optional[int]:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def pread_text(fd: Optional[int], size: int = 8192) -> Optional[str]:
    if fd is None:
        return None
    try:
        return os.pread(fd, size, 0).decode(errors="replace")
    except OSError:
        return None
