"""``run.json``: what the harness deployed and what happened (docs/CONTRACTS.md §4).

The runner builds a :class:`RunRecord` and writes it with ``RunDir.write_run`` when the run
starts (``in_progress``) and again on every path at its end (also after Ctrl-C or a failed
step), before the analysis runs; the analysis, report, sweep and
validation read it with ``RunDir.read_run``. Every field but the identity has a default, so a
record of a run that failed early (or a hand-made one) still loads.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record


class HostRecord(Record):
    hostname: Optional[str] = None
    kernel: Optional[str] = None
    machine: Optional[str] = None
    cpus: Optional[int] = None
    python: Optional[str] = None
    harness_cpus: list[int] = Field(default_factory=list)
    docker: Optional[str] = None          # Docker Engine version (Docker backend)
    cpu_model: Optional[str] = None       # /proc/cpuinfo "model name"


class Window(Record):
    start_mono_ns: int
    end_mono_ns: int


class TestWindow(Record):
    start_mono_ns: int
    duration_s: float


class CdRecord(Record):
    """The contention detector's sizing (``cd_module.node``)."""
    device: str = "cd-node"
    service_time_us: int
    mode: str
    interval_s: float
    calibration_s: Optional[float] = None
    resources: Optional[str] = None       # relative to the run dir


class DeviceRecord(Record):
    """One device (or the CD node) as deployed."""
    name: str
    id: Optional[int] = None              # device id in the trace
    address: Optional[str] = None
    port: int = 5683
    group: Optional[str] = None
    role: str = "device"                  # device | cd-node
    resources: Optional[str] = None       # resource file, relative to the run dir
    cpuset: Optional[str] = None
    threads: int = 1
    response: Optional[str] = None        # wot-device --response (None: written before it existed)
    cpu_quota: Optional[float] = None
    memory_mb: Optional[int] = None
    log_dir: Optional[str] = None         # relative to the run dir
    # what runs instead of wot-device (wotbench.config.byo): "image X", "command Y" or
    # "external endpoint H:P"; null for a wot-device (which writes a device log)
    server: Optional[str] = None
    # the pod (container) it shares with other devices (wotbench.deploy.pods); null: its own
    container: Optional[str] = None


class FleetRecord(Record):
    """One wot-fleet engine as deployed (docs/CONTRACTS.md §3b): its devices are the trace's
    ids ``first_id`` .. ``first_id + devices - 1`` (their names, endpoints and resource files
    are in ``dir``/devices.csv); they are not listed in ``devices``."""
    name: str                             # <group>-fleet<j>: its container or process
    group: str
    first_id: int
    devices: int
    address: str                          # Docker: the container's; process: its first device's
    first_port: int
    last_port: int
    cpuset: str
    loops: int
    workers: int
    log_capacity: int                     # fleet-log rows preallocated per loop
    nofile: int
    memory_bytes: int                     # container memory limit (planned)
    dir: str                              # relative to the run dir: fleets/<name>/


class GeRecord(Record):
    """One gateway emulator (a main GE or the CD's GE)."""
    id: str
    dir: str                              # output directory, relative to the run dir
    cpu: Optional[int] = None
    trace: Optional[str] = None
    wait: Optional[str] = None
    start_at_mono_ns: Optional[int] = None


class BridgeRecord(Record):
    name: str
    subnet: str
    devices: Optional[int] = None
    gateways: Optional[dict[str, str]] = None


class PlanNote(Record):
    faithful: bool
    warnings: list[str] = Field(default_factory=list)


class EpisodeRecord(Record):
    """An injected contention episode (a hog), times relative to the test start."""
    name: str
    kind: str
    cores: list[int]
    threads: Optional[int] = None
    buffer_bytes: Optional[int] = None
    start_s: float
    end_s: float
    start_mono_ns: Optional[int] = None
    end_mono_ns: Optional[int] = None


class ImpairCounters(Record):
    """The app backend's datagram counts of one device (device-summary.json ``impair``,
    docs/CONTRACTS.md §3)."""
    dir: str
    seed: int
    dropped_in: int = 0
    dropped_out: int = 0
    duplicated: int = 0
    corrupted: int = 0
    delayed_in: int = 0
    delayed_out: int = 0
    duplicated_in: int = 0
    duplicated_out: int = 0
    corrupted_in: int = 0
    corrupted_out: int = 0
    queue_full_in: int = 0
    queue_full_out: int = 0
    held_at_exit_in: int = 0
    held_at_exit_out: int = 0
    send_errors: int = 0
    pings_exempt: int = 0
    oversize_exempt: int = 0


class ImpairedDevice(Record):
    """What one impairment backend applied to one device (``netimpair`` ``Backend.record``)."""
    describe: str
    key: Optional[str] = None
    impairment: dict[str, Any] = Field(default_factory=dict)
    applied: list[str] = Field(default_factory=list)
    target: Optional[str] = None          # netem / pumba: the namespace or container
    interface: Optional[str] = None       # netem
    tc_image: Optional[str] = None        # pumba
    counters: Optional[ImpairCounters] = None   # app backend


class NetworkRecord(Record):
    """Network impairments: the backend's record plus how it was chosen."""
    backend: Optional[str] = None         # null when nothing is impaired
    requested: Optional[str] = None
    reasons: list[str] = Field(default_factory=list)
    devices: dict[str, ImpairedDevice] = Field(default_factory=dict)
    removed: Optional[bool] = None
    removal: list[dict[str, Any]] = Field(default_factory=list)
    in_effect: Optional[bool] = None


class SysctlChange(Record):
    """A host setting the run raised for its duration and restored afterwards."""
    name: str
    before: int
    during: int


class IsolationRecord(Record):
    """``placement.isolate_cores``: what the run moved off its GE and device cores for its
    duration, and what it put back (wotbench.runner.prepare.isolation)."""
    os_cores: list[int]                 # where the host's work went
    shielded_cores: list[int]           # the run's cores kept free of it
    workqueue_cpumask_before: Optional[str] = None   # /sys/devices/virtual/workqueue/cpumask
    workqueue_cpumask_during: Optional[str] = None
    moved: int = 0                      # tasks narrowed to the OS cores
    moved_processes: int = 0
    moved_by_command: dict[str, int] = Field(default_factory=dict)   # the 12 commonest
    refused: int = 0                    # sched_setaffinity refused (e.g. their cpuset)
    gone: int = 0                       # exited before they could be moved
    per_cpu_kthreads: int = 0           # bound to a core by the kernel: left
    pinned_there: int = 0               # allowed on shielded cores only (pinned on purpose): left
    harness: int = 0                    # the harness's own threads (it pins itself)
    excepted: int = 0                   # of placement.isolate_except's processes: left
    restored: Optional[int] = None      # at the end: tasks given their own mask back
    restored_inherited: Optional[int] = None   # born during the run from a moved task
    left_changed: Optional[int] = None  # re-pinned by someone else meanwhile: left
    restore_failed: Optional[int] = None

    def describe(self) -> str:
        """One line for the report and the log."""
        back = (f"; restored {self.restored} (+{self.restored_inherited} born during the run)"
                if self.restored is not None else "; not restored yet")
        return (f"cores {','.join(map(str, self.shielded_cores))} shielded: workqueue cpumask "
                f"{self.workqueue_cpumask_before} -> {self.workqueue_cpumask_during}, "
                f"{self.moved} task(s) of {self.moved_processes} process(es) moved to core(s) "
                f"{','.join(map(str, self.os_cores))}, {self.refused} refused, "
                f"{self.per_cpu_kthreads} per-CPU kernel threads, {self.pinned_there} pinned "
                f"tasks and {self.excepted} excepted left" + back)


class Phases(Record):
    """How long the run's set-up and teardown took (s): what a large run costs besides the test."""
    start_devices_s: Optional[float] = None   # create + start every device (+ the CD node)
    listening_s: Optional[float] = None       # until every device listened
    warmup_s: Optional[float] = None          # the slowest GE's readiness pings
    stop_s: Optional[float] = None            # SIGTERM to every component until they exited
    teardown_s: Optional[float] = None        # removing every container and network


class Failure(Record):
    component: str
    what: str
    # when the harness saw it (CLOCK_MONOTONIC): the component failed at most the watch's
    # check interval (1 s) earlier; absent in older run directories
    at_mono_ns: Optional[int] = None


class PushVerify(Record):
    """One ``phase: verify`` op (devices[].push, runner/during/push_verify.py): the harness's request
    after the test and before the teardown, and how many of its devices the answers named."""
    key: str                         # devices[i].push[j]
    op: str
    group: str
    request: str                     # "GET /endpoint-lookup/"
    answers: dict[str, str] = Field(default_factory=dict)   # target -> code, or what failed
    expected: int                    # devices of the group
    found: int
    missing: list[str] = Field(default_factory=list)        # the first 20 not named

    def describe(self) -> str:
        """One line for the log, the verdict and the report."""
        text = (f"{self.op} ({self.request}) after the test named {self.found} of "
                f"{self.expected} {self.group} device(s)")
        if self.found < self.expected:
            more = self.expected - self.found - len(self.missing)
            text += "; not named: " + ", ".join(self.missing) + (f" (+{more} more)" if more > 0 else "")
            bad = sorted((t, c) for t, c in self.answers.items() if not c.startswith("2."))
            if bad:
                text += "; " + ", ".join(f"{t} answered {c}" for t, c in bad[:3])
        return text


class RunRecord(Record):
    name: Optional[str] = None
    run_id: Optional[str] = None
    backend: Optional[Literal["docker", "process"]] = None
    host: HostRecord = Field(default_factory=HostRecord)
    calibration: Optional[Window] = None  # null when the CD is disabled
    test: Optional[TestWindow] = None
    t0_mono_ns: Optional[int] = None
    cd: Optional[CdRecord] = None
    devices: list[DeviceRecord] = Field(default_factory=list)   # main devices, trace order
    fleets: list[FleetRecord] = Field(default_factory=list)     # devices in wot-fleet engines
    cd_node: Optional[DeviceRecord] = None
    ges: Optional[list[GeRecord]] = None  # null: the analysis looks for ge/*/ directories
    cd_ge: Optional[GeRecord] = None
    # the forward proxy of gateways.proxy (role proxy: started by WoTbench; external: not)
    proxy: Optional[DeviceRecord] = None
    proxy_mode: Optional[str] = None      # proxy-uri | proxy-scheme | http (HTTP->CoAP)
    ge_exit_codes: dict[str, Optional[int]] = Field(default_factory=dict)
    networks: list[BridgeRecord] = Field(default_factory=list)
    plan: Optional[PlanNote] = None
    contention: list[EpisodeRecord] = Field(default_factory=list)
    network: Optional[NetworkRecord] = None
    host_tuning: list[SysctlChange] = Field(default_factory=list)
    isolation: Optional[IsolationRecord] = None   # placement.isolate_cores (null: off)
    phases: Phases = Field(default_factory=Phases)
    failures: list[Failure] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    push_verify: list[PushVerify] = Field(default_factory=list)   # devices[].push phase verify
    # other WoTbench runs alive on this host when this one deployed: run id -> objects found
    other_runs: dict[str, int] = Field(default_factory=dict)
    interrupted: bool = False
    aborted: bool = False
    error: Optional[str] = None
    written_at_utc: Optional[str] = None
    # written true when the run starts (its directory exists; again once T0 is fixed) and false
    # when it ends: still true, the harness is running (its lease is renewed) or was killed
    # (SIGKILL, OOM, a lost machine) and the analysis takes what was measured as invalid
    in_progress: bool = False
