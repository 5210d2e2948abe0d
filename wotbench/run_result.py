"""How one run ended, for whoever asked for it: the CLI (its exit code), a sweep point, a
capacity step and the validation study (its run directory and summary, instead of looking
for the newest summary.json). Written by :func:`wotbench.run_command.run` (one host) and the
coordinator of :mod:`wotbench.distributed` (the merged run)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from wotbench.rundir.summary import Summary


@dataclass(frozen=True)
class RunResult:
    exit_code: int                   # 0 trustworthy, 3 flagged, 4 SLO missed, 2, 1, 128+N
    run_dir: Optional[Path]          # None: the run stopped before it made one
    summary: Optional[Summary] = None   # None: not analysed (interrupted, failed early)
