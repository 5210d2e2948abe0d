"""Files the harness writes whole are never seen half-written: a reader finds the old file,
the new one, or none (a full disk, a crash or Ctrl-C in the middle leave no torn JSON).

Each write goes to a temporary file in the target's directory (same filesystem: ``os.replace``
is atomic), is flushed and fsynced, then replaces the target. On failure the temporary file is
removed and an :class:`~wotbench.errors.EnvironmentProblem` names the file, the disk, what the
write needed and the fix (:func:`wotbench.rundir.disk.write_error`).

    atomic.write_json(rd.summary_json, data)
    atomic.write_text(path, text)      atomic.write_bytes(path, data)
    with atomic.replacing(path) as f:            # a file object: yaml.safe_dump(data, f)
    with atomic.replacing_path(path) as tmp:     # a path: df.to_csv(tmp), shutil.copyfile(src, tmp)
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Optional

from wotbench.rundir import disk


def _umask(status: Path = Path("/proc/self/status")) -> int:
    """This process's umask without changing it (os.umask would, for every thread)."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _remove(tmp: Path) -> None:
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass


@contextmanager
def replacing_path(path: str | os.PathLike, mode: Optional[int] = None,
                   size: Optional[int] = None) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a path; on a clean exit it is
    fsynced and replaces ``path`` (file mode ``mode``, default 0666 less the umask, as
    ``open()`` would create it: the emulators, running as another user, read some files).
    ``size``: the bytes the file will have, for the error message (else what was written)."""
    path = Path(path)
    tmp: Optional[Path] = None
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(name)
        os.close(fd)
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        written = tmp.stat().st_size if tmp is not None and tmp.exists() else None
        if tmp is not None:
            _remove(tmp)
        if size is not None:
            raise disk.write_error(path, e, size) from None
        raise disk.write_error(path, e, written, at_least=True) from None
    except BaseException:
        if tmp is not None:
            _remove(tmp)
        raise


@contextmanager
def replacing(path: str | os.PathLike, mode: str = "w", **open_kw: Any) -> Iterator[IO]:
    """A file object (``open(tmp, mode, **open_kw)``) whose content replaces ``path`` when the
    block ends without an exception; flushed and closed here."""
    with replacing_path(path) as tmp:
        f = open(tmp, mode, **open_kw)
        try:
            yield f
            f.flush()
        finally:
            f.close()


def write_bytes(path: str | os.PathLike, data: bytes, mode: Optional[int] = None) -> Path:
    path = Path(path)
    with replacing_path(path, mode, size=len(data)) as tmp:
        tmp.write_bytes(data)
    return path


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    return write_bytes(path, text.encode(encoding))


def write_json(path: str | os.PathLike, data: Any, *, indent: Optional[int] = 2,
               **dumps_kw: Any) -> Path:
    """``json.dumps(data, indent=indent, **dumps_kw)`` plus a final newline."""
    return write_text(path, json.dumps(data, indent=indent, **dumps_kw) + "\n")
