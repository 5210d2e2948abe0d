"""What a run holds besides its stage values (:mod:`wotbench.runner.stages`), in two typed
groups so that the runner is no bag of attributes:

``Resources``: what the stages acquired on the host and the cleanup releases on every path (a
run stopped half-way releases what it had: each is set the moment it exists).
``RunLog``: what happened, for run.json (failures, warnings, GE exits, phase times, how the run
ended); the stages append to it, :meth:`wotbench.runner.main.Runner.record` reads it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from wotbench.monitor.recorder import Monitor
from wotbench.rundir import EpisodeRecord, Phases
from wotbench.rundir.record import PushVerify
from wotbench.runner import notify_sink, sut_faults
from wotbench.runner.backends.interface import RunBackend
from wotbench.runner.deployment.lease import Lease
from wotbench.runner.during.hogs import Hogs
from wotbench.runner.prepare.hostlimits import HostTuning
from wotbench.runner.prepare.isolation import CoreShield


@dataclass
class Resources:
    """Acquired by the stages, released by ``Runner.cleanup`` (each only if it was acquired)."""
    tuning: HostTuning                       # host settings raised for the run (prepare)
    shield: Optional[CoreShield] = None      # placement.isolate_cores (prepare)
    lease: Optional[Lease] = None            # components stop themselves when it lapses
    journal_dir: Optional[Path] = None       # the GEs' journals (deployment/journal.py)
    backend: Optional[RunBackend] = None     # the runtime: containers or local processes
    started: bool = False                    # the backend started components
    hogs: Optional[Hogs] = None              # contention: episodes
    monitor: Optional[Monitor] = None        # per-component CPU, collectl
    sink: Optional[notify_sink.SinkRun] = None          # notify: (issue 35)
    faults: Optional[sut_faults.FaultRunner] = None     # sut_faults: (issue 35)


@dataclass
class RunLog:
    """What happened during the run: run.json's account beyond the stage values."""
    failures: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    other_runs: dict[str, int] = field(default_factory=dict)   # other runs on this host
    contention: list[EpisodeRecord] = field(default_factory=list)   # hog episodes launched
    ge_exit: dict[str, Optional[int]] = field(default_factory=dict)
    ge_died_ns: dict[str, int] = field(default_factory=dict)   # failed GEs: when seen
    push_verify: list[PushVerify] = field(default_factory=list)   # devices[].push verify
    phases: Phases = field(default_factory=Phases)
    interrupted: Optional[int] = None        # the signal that stopped the run
    error: Optional[BaseException] = None
    aborted: bool = False                    # the test could not complete (GE failure)
    exit_hint: Optional[int] = None          # 2 when a GE rejected its input

    def failure(self, component: str, what: str) -> None:
        self.failures.append({"component": component, "what": what,
                              "at_mono_ns": time.monotonic_ns()})

    @property
    def stopped(self) -> bool:
        """Interrupted or failed: the test did not run to its end."""
        return bool(self.interrupted or self.error)
