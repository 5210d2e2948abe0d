"""Keep a bench's own sampling threads off the run's device cores.

A bench samples the host once a second while `wotbench run` measures. The harness pins itself
to the plan's OS cores; a bench thread left free lands on a device core, where its once-a-second
work (and the Docker daemon's, for the calls it makes) delays the devices it is measuring: the
fleet bench's own samplers were a 1 s-periodic source of the engines' late services (an ftrace
of the device core, docs/FLEET.md). Each sampling thread calls :meth:`RunCorePin.pin` on every
tick; it pins the calling thread once the run's plan.json names the OS cores.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

from wotbench.rundir import RunDir


class RunCorePin:
    def __init__(self, out_root: Optional[Path]) -> None:
        self.out_root = out_root
        self.cores: Optional[list[int]] = None

    def pin(self) -> None:
        """Pin the calling thread to the run's OS cores as soon as its plan names them."""
        if self.cores is not None or self.out_root is None:
            return
        for plan in (RunDir(d).plan_json for d in self.out_root.iterdir() if d.is_dir()):
            if not plan.is_file():
                continue
            try:
                cores = json.loads(plan.read_text()).get("os_cores")
            except (OSError, ValueError):
                return   # being written: the next tick reads it
            if cores:
                try:
                    os.sched_setaffinity(0, cores)   # 0: this thread only (Linux)
                except OSError as e:   # (cores gone from this cpuset) sample on, unpinned
                    print(f"bench: sampler not pinned to {cores}: {e}", file=sys.stderr)
                self.cores = list(cores)
            return
