"""The disk a file lives on, in words: which filesystem, how much is free, and a write failure
on it as an :class:`~wotbench.errors.EnvironmentProblem` that names the file, the disk, what
the write needed and the fix (exit code 1, never a traceback).

    disk.write_error(path, oserror, needed=4096)   # the error to raise
    disk.full_note(run_dir)                        # "" unless that disk is (nearly) full
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from wotbench.errors import EnvironmentProblem

FULL_BELOW = 1 << 20    # less than 1 MiB free: no component can write its logs there
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class Disk:
    mount: str              # the mount point holding the path
    fstype: Optional[str]   # from /proc/self/mountinfo (None where unknown)
    free: int               # bytes this (possibly unprivileged) process may still use
    total: int

    def describe(self) -> str:
        kind = f" ({self.fstype})" if self.fstype else ""
        return f"{self.mount}{kind}: {size(self.free)} free of {size(self.total)}"


def size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"   # not reached


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (a file not written yet has none)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _mount_point(path: Path) -> Path:
    dev = path.stat().st_dev
    while path != path.parent and path.parent.stat().st_dev == dev:
        path = path.parent
    return path


def _fstype(mount: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> Optional[str]:
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):   # the last mount on a point is the visible one
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) > 4 and fields[4] == str(mount) and right:
            return right.split()[0]
    return None


def disk_of(path: str | os.PathLike) -> Optional[Disk]:
    """The disk holding ``path`` (None when even that cannot be told)."""
    try:
        p = _existing(Path(path))
        st = os.statvfs(p)
        mount = _mount_point(p)
    except OSError:
        return None
    return Disk(str(mount), _fstype(mount), st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize)


def write_error(path: str | os.PathLike, err: OSError, needed: Optional[int] = None,
                at_least: bool = False) -> EnvironmentProblem:
    """What to raise when writing ``path`` failed with ``err``; ``needed``: the bytes the
    write wanted (``at_least``: the bytes it had reached when it failed, a streamed write)."""
    path = Path(path)
    d = disk_of(path)
    on = d.describe() if d else "its disk"
    if err.errno in NO_SPACE:
        what = "no space left" if err.errno == errno.ENOSPC else "disk quota exceeded"
        need = "" if needed is None else \
            f"; this file needs {'more than ' if at_least else ''}{size(needed)}"
        where = d.mount if d else str(path.parent)
        return EnvironmentProblem(
            f"cannot write {path}: {what} on the disk holding it ({on}{need}). Fix: free space "
            f"on {where} or write to a disk with room (wotbench run --out-root DIR); files "
            f"written before are kept")
    if err.errno == errno.EROFS:
        return EnvironmentProblem(f"cannot write {path}: the filesystem ({on}) is read-only. "
                                  "Fix: write to a writable disk (wotbench run --out-root DIR)")
    if err.errno in (errno.EACCES, errno.EPERM):
        return EnvironmentProblem(f"cannot write {path}: permission denied. Fix: make "
                                  f"{path.parent} writable for this user or write elsewhere")
    if err.errno == errno.ENOENT:
        return EnvironmentProblem(f"cannot write {path}: the directory {path.parent} does not "
                                  "exist. Fix: create it, or write elsewhere")
    return EnvironmentProblem(f"cannot write {path}: {err.strerror or err}")


def as_problem(e: BaseException, where: str | os.PathLike) -> BaseException:
    """A full disk met by a write no helper wrapped (``where``: the file or directory it was
    writing), as the environment problem it is; any other exception unchanged."""
    if isinstance(e, OSError) and e.errno in NO_SPACE:
        return write_error(e.filename or where, e)
    return e


def full_note(path: str | os.PathLike) -> str:
    """``"; the disk holding <path> is full (...)"`` when it has less than FULL_BELOW free, else
    "": why a component that writes there failed."""
    d = disk_of(path)
    if d is None or d.free >= FULL_BELOW:
        return ""
    return f"; it could not write its output: the disk holding {path} is full ({d.describe()})"
