"""How one run ended, for whoever asked for it: the CLI (its exit code), a sweep point, a
capacity step and the validation study (its run directory and summary, instead of looking
for the newest summary.json). Written by :func:`wotbench.run_command.run` (one host) and the
coordinator of :mod:`wotbench.distributed` (the merged run).

``RunDirSeen``: told the run directory the moment it exists, before the test starts (a sweep
records it at once, so a sweep killed during a run knows that point's directory when it
resumes; the validation study watches it for the test's start)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.rundir.summary import Summary


@dataclass(frozen=True)
class RunResult:
    exit_code: int                   # 0 trustworthy, 3 flagged, 4 SLO missed, 2, 1, 128+N
    run_dir: Optional[Path]          # None: the run stopped before it made one
    summary: Optional[Summary] = None   # None: not analysed (interrupted, failed early)


RunDirSeen = Callable[[Path], None]
