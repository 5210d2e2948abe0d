"""Where the gateway emulators keep their journals, and what happens to them after the run.

A GE started with ``--journal FILE`` keeps its request table in FILE (shared mapping): if the
GE dies, what it measured is still there (:mod:`wotbench.runner.teardown.ge_journal` turns it into its
files). FILE lives on a tmpfs — ``/dev/shm/wotbench/<run id>/`` — because tmpfs pages are never
written back, so the GE's stores never fault; the directory is removed when the run ends. It
also names the run's lease, so ``wotbench clean`` can tell a dead run's journals from a live
run's.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from wotbench.labels import NOBODY
from wotbench.runner.deployment.lease import lease_state

ROOT = Path("/dev/shm/wotbench")
LEASE_NOTE = "lease-path"


def make_dir(run_id: str, lease_file: Path, root: Path = ROOT) -> Optional[Path]:
    """The run's journal directory, writable by the GEs (they run as nobody); None where there
    is no tmpfs at ``root`` (the GEs then run without a journal)."""
    if not root.parent.is_dir():
        return None
    root.mkdir(exist_ok=True)
    root.chmod(0o755)
    # made whole under a hidden name, then renamed: another run's or `clean`'s look at the
    # journals never sees this one without its lease note (it would take it for a dead run's)
    tmp = Path(tempfile.mkdtemp(prefix=f".{run_id}.", dir=root))
    (tmp / LEASE_NOTE).write_text(str(lease_file))
    tmp.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(tmp, NOBODY, NOBODY)
    d = root / run_id
    os.rename(tmp, d)
    return d


def remove_dir(d: Optional[Path]) -> None:
    if d is not None:
        shutil.rmtree(d, ignore_errors=True)


def remove_abandoned(say, root: Path = ROOT) -> None:
    """Remove the journals of runs whose harness is gone, saying which."""
    for d in abandoned(root):
        say(f"removing the gateway emulators' journals of run {d.name} (its harness is gone): "
            f"{d}")
        remove_dir(d)


def abandoned(root: Path = ROOT) -> list[Path]:
    """Journal directories whose run's lease is not live (its harness is gone)."""
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.name.startswith("."):
            continue   # being made (make_dir)
        try:
            lease = (d / LEASE_NOTE).read_text().strip()
        except OSError:
            lease = None
        if lease_state(lease) != "live":
            out.append(d)
    return out
