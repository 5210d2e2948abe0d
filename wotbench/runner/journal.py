"""Where the gateway emulators keep their journals, and what happens to them after the run.

A GE started with ``--journal FILE`` keeps its request table in FILE (shared mapping): if the
GE dies, what it measured is still there (:mod:`wotbench.rundir.ge_journal` turns it into its
files). FILE lives on a tmpfs — ``/dev/shm/wotbench/<run id>/`` — because tmpfs pages are never
written back, so the GE's stores never fault; the directory is removed when the run ends. It
also names the run's lease, so ``wotbench clean`` can tell a dead run's journals from a live
run's.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

from wotbench.labels import NOBODY
from wotbench.runner.lease import lease_state

ROOT = Path("/dev/shm/wotbench")
LEASE_NOTE = "lease-path"


def make_dir(run_id: str, lease_file: Path, root: Path = ROOT) -> Optional[Path]:
    """The run's journal directory, writable by the GEs (they run as nobody); None where there
    is no tmpfs at ``root`` (the GEs then run without a journal)."""
    if not root.parent.is_dir():
        return None
    d = root / run_id
    d.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    (d / LEASE_NOTE).write_text(str(lease_file))
    if os.geteuid() == 0:
        os.chown(d, NOBODY, NOBODY)
    return d


def remove_dir(d: Optional[Path]) -> None:
    if d is not None:
        shutil.rmtree(d, ignore_errors=True)


def abandoned(root: Path = ROOT) -> list[Path]:
    """Journal directories whose run's lease is not live (its harness is gone)."""
    out = []
    for d in sorted(root.glob("*")) if root.is_dir() else []:
        try:
            lease = (d / LEASE_NOTE).read_text().strip()
        except OSError:
            lease = None
        if lease_state(lease) != "live":
            out.append(d)
    return out
