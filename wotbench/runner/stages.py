"""The typed values a run hands from stage to stage (:class:`wotbench.runner.main.Runner`;
each stage is a function of its own module: ``prepare/stage.py``, ``deployment/stage.py``,
``during/stage.py``, ``teardown/stop.py``):

    CellSeat (given)  ->  Inputs (prepared)  ->  Components (deployed)  ->  Timeline (the test
    ran on it, :mod:`wotbench.runner.during.timeline`)  ->  RunOutcome (ended)

``Inputs``: what the pre-flight decided and the run directory written from it (resolved config,
plan, trace, push schedules, DTLS key); everything the deployment is built from.
``Components``: what the run deploys (devices, wot-fleet engines, gateway emulators, the CD's
pair, the proxy), built from the inputs alone (:mod:`wotbench.runner.deployment.build`).
``RunOutcome``: how the run ended, before any analysis (:mod:`wotbench.run_command` concludes).
``CellSeat``: what makes a run one cell of a run across hosts, given at construction.
What the runner holds besides these (resources to release, run.json's account) is typed in
:mod:`wotbench.runner.run_state`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from cd_module.node import CdSettings
from wotbench.config.schema import Config
from wotbench.deploy.plan import Plan
from wotbench.rundir import RunDir
from wotbench.runner.backends.interface import BackendKind
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.prepare.dtlskey import DtlsCreds
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.deployment.impair import Impairments


@dataclass(frozen=True)
class CellSeat:
    """A cell of a run across hosts (:mod:`wotbench.distributed.cell`): only ``devices`` (global
    names and ids kept) run here, the node's name is in the run id (unique across the nodes),
    and T0 comes from ``t0(run_dir, lead_s)`` (the coordinator's, on this node's
    CLOCK_MONOTONIC). ``progress(stage)``: the runner names each preparation stage as it ends
    (the cell logs it with the time it took: a cell is never silent until its first line)."""
    node: str
    devices: frozenset[str]
    t0: Callable[[Path, float], int]
    progress: Callable[[str], None] = lambda stage: None


@dataclass(frozen=True)
class Inputs:
    """Stage 1: the prepared inputs. Made when the run directory exists; the trace summary,
    push schedules and DTLS key are added (``dataclasses.replace``) as they are written, so a
    run that fails half-way still records what it had."""
    kind: BackendKind
    connection: Any                   # kind.connect(): one runtime client per run
    impair: Impairments
    binaries: dict[str, Path]
    cfg: Config                       # as loaded (adapted to the backend)
    resolved: Config                  # with the plan's addresses and cores
    plan: Plan
    cd: CdSettings
    rd: RunDir
    share: Optional[frozenset[str]] = None    # a cell's devices (None: every device)
    trace_summary: Any = None                 # the trace written (requests, ...)
    pushing: frozenset[str] = frozenset()     # devices[].push: the process devices that send
    fleet_push: dict[str, list] = field(default_factory=dict)   # ... the engines': rows by name
    dtls: Optional[DtlsCreds] = None          # dtls.enabled: the key file and identity

    @property
    def run_id(self) -> str:
        return self.rd.path.name


@dataclass(frozen=True)
class Components:
    """Stage 2: what the run deploys (the objects are filled in as they start: journals, start
    times, warm-up)."""
    devices: list[DeviceRun]          # devices, external endpoints and the CD node
    fleets: list[FleetRun]            # wot-fleet engines (their devices are not in devices)
    ges: list[GeRun]                  # main GEs
    cd_ge: Optional[GeRun] = None
    proxy: Optional[DeviceRun] = None   # gateways.proxy (role external: not started)

    @property
    def all_ges(self) -> list[GeRun]:
        return self.ges + ([self.cd_ge] if self.cd_ge else [])

    @property
    def started_devices(self) -> list[DeviceRun]:
        """What the backend runs: devices (not external endpoints), the CD node, the proxy."""
        return [d for d in self.devices + ([self.proxy] if self.proxy else []) if d.started]

    @property
    def push_fleets(self) -> list[FleetRun]:
        """The engines hosting pushing devices (devices[].push)."""
        return [f for f in self.fleets if f.push_timeout_ms is not None]

    @property
    def devices_and_proxy(self) -> list[DeviceRun]:
        return self.devices + ([self.proxy] if self.proxy else [])

    @property
    def http_targets(self) -> list[tuple[int, str, int]]:
        """(device id, address, port) of every HTTP device: where setup/verify requests go."""
        return [(d.id, d.address, d.port) for d in self.devices if d.protocol == "http"]


@dataclass(frozen=True)
class RunOutcome:
    """Stage 3's end: how a run ended, before any analysis (what ``run`` needs to conclude)."""
    run_dir: Optional[Path]
    interrupted: Optional[int]        # the signal that stopped it
    error: Optional[BaseException]    # a WotbenchError (bad input, environment) or a bug
    aborted: bool                     # the test did not complete (component failure)
    exit_hint: Optional[int]
    failures: int                     # component failures recorded in run.json
    report: bool                      # the config asks for report.html
