"""What a run holds besides its stage values (:mod:`wotbench.runner.stages`), in two typed
groups so that the runner is no bag of attributes, and :class:`RunState`, what each stage
function is handed besides its typed input:

``Resources``: what the stages acquired on the host and the cleanup releases on every path (a
run stopped half-way releases what it had: each is set the moment it exists).
``RunLog``: what happened, for run.json (failures, warnings, GE exits, phase times, how the run
ended); the stages append to it, :func:`wotbench.runner.record.run_record` reads it.
``RunState``: the two groups, the cell's seat, and each stage value the moment it exists (the
cleanup and run.json read what there is: a run stopped half-way records what it had).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from wotbench.monitor.recorder import Monitor
from wotbench.rundir import EpisodeRecord, Phases, RunDir, disk
from wotbench.rundir.record import PushVerify
from wotbench.runner import notify_sink, sut_faults
from wotbench.runner.backends.interface import RunBackend
from wotbench.runner.deployment.lease import Lease
from wotbench.runner.during.hogs import Hogs
from wotbench.runner.during.timeline import Timeline
from wotbench.runner.prepare.hostlimits import HostTuning
from wotbench.runner.prepare.isolation import CoreShield
from wotbench.runner.stages import CellSeat, Components, Inputs


def log(msg: str) -> None:
    print(f"wotbench: {msg}", flush=True)


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


@dataclass
class RunState:
    """What a stage function gets besides its typed input: the resources it acquires
    (``held``), the account it adds to (``happened``), the cell's seat (given at construction,
    None on one host), and the stage values so far, each set by its stage the moment it exists
    (``inputs`` by ``prepare``, ``parts`` by ``deploy``, ``timeline`` by ``run_test``)."""
    held: Resources
    happened: RunLog = field(default_factory=RunLog)
    cell: Optional[CellSeat] = None
    inputs: Optional[Inputs] = None           # 1. prepared
    parts: Optional[Components] = None        # 2. deployed
    timeline: Optional[Timeline] = None       # 3. the test's T0, calibration, test, deadline

    @property
    def share(self) -> Optional[frozenset[str]]:
        """A cell's devices (None: every device)."""
        return self.cell.devices if self.cell else None

    @property
    def rd(self) -> Optional[RunDir]:
        return self.inputs.rd if self.inputs else None

    @property
    def run_dir(self) -> Optional[Path]:
        return self.rd.path if self.rd else None

    def stage(self, done: str) -> None:
        """A preparation stage ended: a cell says so (its seat's progress); one host is quiet."""
        if self.cell is not None:
            self.cell.progress(done)

    def fail(self, component: str, what: str) -> None:
        """A component failed: recorded for run.json (with why it could not write, when the
        run directory's disk is full) and said."""
        what += disk.full_note(self.rd.path) if self.rd else ""
        self.happened.failure(component, what)
        log(f"FAILURE {component}: {what}")
