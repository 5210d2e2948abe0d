"""A small tmpfs at a path of the test's own, for runs and writes that must meet a full disk
(root only: mount). Shared by the file-fault tests and ``make bench-faults``."""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class NoTmpfs(Exception):
    """Why no tmpfs could be mounted here (a test skips with it)."""


@contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """``path`` (created if missing) on a tmpfs of ``size`` (e.g. "2m"), unmounted afterwards
    (lazily if still busy)."""
    if os.geteuid() != 0:
        raise NoTmpfs("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise NoTmpfs(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)
