"""What a runtime must offer the runner: the declared backend.

``Runner`` (``main.py``) drives a run through this interface only; it never asks which backend
it has and never touches a backend's internals. Two backends implement it today:
``DockerBackend`` (FROM scratch images, per-run internal bridges, least-privilege containers)
and ``ProcessBackend`` (the same binaries as pinned local processes on 127.x.y.z).

For the author of a third backend (a remote Docker engine, Kubernetes)
---------------------------------------------------------------------
Implement the small interfaces below, in the spirit of Pumba's composed runtime client: each
is its own ``Protocol``, a caller asks only for the part it uses (``watch.py`` needs
``Inspector`` + ``Lifecycle``, ``hogs.py`` only ``Stressor``), and a test double needs only
that part. ``RunBackend`` is their sum; ``BackendKind`` is the backend before the run exists.
Register the kind in ``inputs.KINDS`` (and, if ``backend: auto`` may pick it, in
``inputs.AUTO``). ``tests/unit/test_runner_backend.py`` fails until every method is there
with the protocol's parameters and types. run.json's ``backend`` field (``rundir.RunRecord``)
lists the known names: add yours there too.

Life cycle, as the runner calls it::

    conn = kind.connect()                  # backend choice: raises when the runtime is away
    kind.adapt(cfg, conn)                  # before planning: loopback addresses, a free subnet
    kind.impairment_options(conn)          # what netimpair's backends need of this runtime
    b = kind.create(run_id, run_dir, log, conn)
    b.prepare(binaries)                    # images; "hog" is there when the run has episodes
    b.prepare_programs(programs)           # third-party servers / proxy (wotbench.config.byo)
    b.setup_network(subnet, devices, gateways)
    b.start_devices(devices)               # bounded parallel, inside the backend
    b.start_fleets(fleets)                 # wot-fleet engines: many devices each (runner/deployment/fleets.py)
    ... readiness (CoAP ping), b.impairment_targets(names) for netem/pumba ...
    b.create_ge(g) for every GE; b.start_ge(g) in start order (absolute start times: fast)
    b.launch_hog(spec) for injected contention
    ... b.exited(device names), b.exit_code(ge) about once a second while the test runs ...
    b.cpu_limit_unavailable()              # before the start: a cpu_quota fault it cannot apply
    b.prepare_cpu_limit(name)              # before the test, for each server of a cpu_quota fault
    b.restart(device, grace_s)             # sut_faults restart, from the fault's own thread
    b.limit_cpu(name, cpus)                # sut_faults cpu_quota, from the faults' thread
    b.release_cpu_limit(name)              # the test ended: its throttling, the cgroup gone
    b.stop(names, grace_s)                 # SIGTERM, wait: components write their logs
    b.save_output(name, path)              # failed components
    b.cleanup()                            # every path; removes everything the run created

Rules every backend keeps:

- Names are component names (``cpu-3``, ``cd-node``, ``ge-0``, ``cd-ge``, ``hog-0-cpu``); a
  name the backend never created is not an error for ``pid``/``created``/``signal`` (it is
  simply not running).
- Everything created carries the run id (Docker: label ``wotbench.run``; processes: the
  environment variable ``WOTBENCH_RUN``) so that ``cleanup`` and ``wotbench clean`` find it and
  touch nothing else.
- Scale (1000 devices): ``start_devices``, ``stop`` and ``cleanup`` work in bounded parallel
  inside the backend (never one thread per device, never unbounded API calls at once);
  ``cleanup`` removes in the order stop -> disconnect -> remove, retrying what the runtime
  reports as busy; ``exited`` is called about once a second with every device name, so it
  must cost one runtime query (or answer from a cache fed by the runtime's event stream),
  not one query per device.
- ``cleanup`` is idempotent and never raises for objects already gone: it runs in the
  ``finally`` of every run, after Ctrl-C and after failed steps.
- The runner calls every method from its main thread (the process backend relies on it: a
  child's parent-death signal fires when the thread that spawned it ends), except
  ``restart`` and ``limit_cpu``, which the SUT faults call from threads of their own
  (``Restarter``, ``CpuLimiter``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:   # type names only: the data types live with their modules
    from wotbench.config.byo import Program
    from wotbench.config.schema import Config
    from wotbench.netimpair import DeviceTarget
    from wotbench.rundir import BridgeRecord

    from wotbench.runner.deployment.components import DeviceRun, GeRun
    from wotbench.runner.deployment.fleets import FleetRun
    from wotbench.runner.during.hogspec import HogSpec

Log = Callable[[str], None]


@runtime_checkable
class Networks(Protocol):
    def setup_network(self, subnet: str, devices: dict[str, str], gateways: list[str]) -> None:
        """Make ``devices`` (name -> IPv4) reachable from every gateway (GE names) with those
        exact addresses; raise ConfigError for an address this runtime cannot give."""

    def network_record(self) -> list["BridgeRecord"]:
        """run.json ``networks``: what was created."""


@runtime_checkable
class Lifecycle(Protocol):
    def prepare(self, binaries: dict[str, Path]) -> None:
        """Everything that can be built before the run starts (images), from the static
        binaries by program name (``gateway-emulator``, ``wot-device``, ``hog``)."""

    def prepare_programs(self, programs: dict[str, "Program"]) -> None:
        """The third-party programs a run starts (``devices[i].server``, ``gateways.proxy``),
        by config key: check that each is here (a local image, a command on this host) and
        prepare it; ConfigError naming ``<key>.image`` / ``<key>.command`` and the fix when one
        is missing or this runtime cannot run it. A ``DeviceRun`` with ``program`` set runs it."""

    def start_devices(self, devices: Sequence["DeviceRun"]) -> None:
        """Create and start every device, in bounded parallel where the runtime allows it.
        A device's own output (stdout/stderr) goes to ``DeviceRun.stdout`` when the runtime
        keeps none itself."""

    def start_fleets(self, fleets: Sequence["FleetRun"]) -> None:
        """Create and start every wot-fleet engine (``"wot-fleet"`` is among the binaries given
        to ``prepare``): the plan's cpuset, its RLIMIT_NOFILE raised to ``req.nofile``, least
        privilege; on a runtime with limits, ``req.memory_bytes`` and ``req.pids``. A fleet is
        one component named ``FleetRun.name`` for every other method (stop, exited, ...)."""

    def create_ge(self, g: "GeRun") -> None:
        """Create a gateway emulator without starting it (it has an absolute start time, so
        ``start_ge`` must be quick)."""

    def start_ge(self, g: "GeRun") -> None:
        """Start a GE created by ``create_ge``."""

    def created(self, name: str) -> bool:
        """Was the component ever created (False: nothing to stop, no output to save)."""

    def signal(self, name: str, sig: int) -> None:
        """Send ``sig``; a component that is gone already (or never existed) is not an error."""

    def stop(self, names: Sequence[str], grace_s: float) -> dict[str, Optional[int]]:
        """SIGTERM every component in ``names`` that still runs, wait until each has exited
        or ``grace_s`` has passed (one deadline for all), and return every name's exit code,
        None for one still running (names never created are left out). The caller decides
        what to do with those still running (SIGKILL)."""

    def cleanup(self) -> dict[str, int]:
        """Remove everything this run created (idempotent); counts by kind, for the log."""


@runtime_checkable
class Inspector(Protocol):
    def cgroup(self, name: str) -> Optional[dict[str, Path]]:
        """The component's own cgroup directories (controller -> dir; "v2" for the unified
        hierarchy), for CPU accounting; None when it has none of its own (a local process)."""

    def pid(self, name: str) -> Optional[int]:
        """Host pid of the running component, None when not running or never created."""

    def exit_code(self, name: str) -> Optional[int]:
        """Exit code of a component that has exited; None while it runs."""

    def exited(self, names: set[str]) -> dict[str, int]:
        """Exit codes of the components in ``names`` that are no longer running."""

    def describe_exit(self, name: str) -> str:
        """One phrase for a failure message ("container exited with 137 (OOM-killed ...)")."""

    def save_output(self, name: str, path: Path) -> None:
        """Keep the component's own output (stdout/stderr) at ``path``, if the runtime holds
        any (a process backend already wrote it to the component's ``stdout`` file)."""

    def runtime_lost(self, probe: bool = False,
                     error: Optional[BaseException] = None) -> Optional[str]:
        """Why the container runtime went away during the run (a daemon restart), else None;
        ``probe``: may ask the runtime (after ``error``), not only what it already knows."""


@runtime_checkable
class Restarter(Protocol):
    """The ``restart`` SUT fault (``runner/sut_restart.py``): a started server stopped and
    started again while the test runs."""

    def restart(self, device: "DeviceRun", grace_s: float) -> bool:
        """Stop the running component ``device`` (every process of it: a server's children too;
        SIGTERM, SIGKILL to what is left after ``grace_s``) and start it again with the same
        command, config, placement and limits; return once it was started again (it may not
        answer yet). Its stop is not an exit: afterwards ``pid``/``exit_code``/``exited`` are
        the new process's. ProcessLookupError when it was never started.

        Returns whether the new process is bound to the calling thread (a local process gets
        its parent-death signal when the thread that started it ends): the caller then keeps
        that thread alive while the component runs. Called from the fault's own thread, not the
        runner's main thread."""


@runtime_checkable
class CpuLimiter(Protocol):
    """The ``cpu_quota`` SUT fault (``runner/sut_faults.py``): a started server limited to a
    number of cores' worth of CPU time (the CFS quota) from a given second of the test on."""

    def cpu_limit_unavailable(self) -> Optional[str]:
        """Why this backend cannot limit a server's CPU time on this host (a whole sentence:
        what it needs and what to do instead), None when it can. Asked before anything starts."""

    def prepare_cpu_limit(self, name: str) -> None:
        """Before the test, for the started component ``name``: whatever lets ``limit_cpu``
        take effect at once later (a cgroup of its own, no limit yet). OSError when the host
        refuses it."""

    def limit_cpu(self, name: str, cpus: float) -> None:
        """From now on at most ``cpus`` cores' worth of CPU time for the component (every
        process of it); a ``restart`` keeps the limit. Called from the faults' thread."""

    def release_cpu_limit(self, name: str) -> Optional[int]:
        """The test ended: undo what ``prepare_cpu_limit`` created where the component's stop
        needs it gone, and return the CFS periods in which it was throttled (None: unknown).
        Idempotent; ``cleanup`` releases whatever is left."""


@runtime_checkable
class HogHandle(Protocol):
    def stop(self, timeout: float) -> bytes:
        """SIGTERM if still running, wait, return the hog's stdout (its JSON report line);
        kill it when it does not stop. Idempotent."""


@runtime_checkable
class Stressor(Protocol):
    """Deliberate contention (Pumba's stress sidecars): the hogs of ``contention:``."""

    def launch_hog(self, spec: "HogSpec") -> HogHandle:
        """Start the hog of ``spec`` (the ``hog`` binary given to ``prepare``), unprivileged
        and pinned to ``spec.cores``; it sleeps until its own absolute start time."""


@runtime_checkable
class ImpairTargets(Protocol):
    def impairment_targets(self, names: Sequence[str]) -> list["DeviceTarget"]:
        """What netem/pumba need to reach each running device's network namespace."""


@runtime_checkable
class Describer(Protocol):
    def describe(self) -> dict[str, Any]:
        """Facts for run.json ``host``, keyed by ``rundir.HostRecord`` fields (e.g.
        ``{"docker": "20.10.24"}``); never raises."""


@runtime_checkable
class Neighbours(Protocol):
    """What else runs on this host: the contention verdict names other WoTbench runs."""

    def other_runs(self) -> dict[str, int]:
        """Run id -> how many of its containers or processes are alive now, for every WoTbench
        run on this host but this one; never raises (an unreachable runtime: what was found)."""

    def container_info(self, container_id: str) -> Optional[tuple[str, dict[str, str]]]:
        """A container's name and labels (None: unknown, or no container runtime)."""

    def remove_abandoned(self) -> list[str]:
        """Remove what earlier runs without a live harness left (runner/teardown/leftovers.py), saying
        what was found by which run; the ids of those runs. Never raises."""


@runtime_checkable
class RunBackend(Networks, Lifecycle, Inspector, Restarter, CpuLimiter, Stressor, ImpairTargets,
                 Describer, Neighbours, Protocol):
    """Everything the runner uses. ``name`` is recorded in run.json, never branched on."""
    name: str


@runtime_checkable
class BackendKind(Protocol):
    """A backend before the run exists: how to reach its runtime, what it changes in the
    config, how it is created."""
    name: str
    runtime: str                    # what connect() reaches, for messages ("Docker")
    ge_start_lead_s: float          # time to create + start one GE (sets T0's lead)
    needs_docker: bool              # doctor checks Docker and cgroups for it
    container_namespaces: bool      # netem/pumba can enter the devices' network namespaces

    def connect(self) -> Any:
        """The live runtime client a run shares (one per run: doctor checks, images, the
        backend, the impairment sidecars), None when the backend needs none; raises when the
        runtime does not answer (``backend: auto`` then tries the next kind)."""

    def adapt(self, cfg: "Config", connection: Any) -> tuple["Config", list[str]]:
        """The config this backend runs (e.g. loopback subnet, a free subnet when the default is
        taken) and warnings to record; ``connection`` is what ``connect`` returned."""

    def impairment_options(self, connection: Any) -> dict[str, dict[str, Any]]:
        """Per netimpair backend, the keyword arguments it needs of this runtime."""

    def fleet_nofile_hard(self) -> Optional[int]:
        """The hard RLIMIT_NOFILE a wot-fleet engine can get from this runtime (None: unknown
        or unlimited); ``adapt`` sizes the engines by it (fleet_capacity.size_fleets)."""

    def create(self, run_id: str, run_dir: Path, log: Log, connection: Any) -> RunBackend:
        """The backend for one run; ``connection`` is what ``connect`` returned."""
