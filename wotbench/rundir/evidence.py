"""``summary.json`` ``evidence``: what the kernel saw, per window, beside the CD node's R_d
(docs/VALIDATION.md "Evidence"; computed by :mod:`cd_module.evidence`).

Every test window (the CD rule's grid) gets one :class:`PlaceWindow` per place: ``core N`` (the
devices pinned there), ``cd-node`` and each gateway emulator. A window is flagged when any rule
fires; each flag says which rule, where and how much, so the verdict can tell the reader what
showed the distortion. :class:`Antagonist` rows name what else used the run's cores.
"""
from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import ConfigDict, Field, field_validator

from wotbench.rundir._model import Record

F = Optional[float]


class _Measured(Record):
    """A measure without data is null, never NaN: JSON has no NaN (a window beyond the last
    monitor sample, a share of nothing). Checked on assignment too: the analysis fills these
    in place."""
    model_config = ConfigDict(validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nan(cls, v):
        return None if isinstance(v, float) and not math.isfinite(v) else v
# send_lag: pushing devices (devices[].push) sent their own requests late; cpu_wait, stretch,
# wakeup, queueing: the measure that showed the host's added latency beyond the tolerance
# (hostshare); loop_lag: a wot-fleet engine's loop read or ended its devices' requests late
# (cd_module/loop_lag.py)
FlagRule = Literal["cpu_wait", "stretch", "wakeup", "queueing", "other_run", "cd", "send_lag",
                   "loop_lag"]
# how much of the response time the host added (docs/DETECTOR.md "Grades")
Grade = Literal["none", "mild", "moderate", "severe"]
OwnerKind = Literal["injected", "wotbench", "container", "runtime", "host"]


class VerdictParams(Record):
    """How much the testbed may add (config ``verdict:``) and how it is measured
    (docs/DETECTOR.md "The host's share")."""
    # the share of a window's mean response time R the host may add per request ...
    tolerance_share: float = 0.05
    # ... or, when set, the milliseconds it may add (replaces the share)
    tolerance_ms: Optional[float] = None
    # one-sided confidence of the bound a window is judged on: beyond the tolerance when the
    # lower bound of the added latency is; the grade is the point estimate's
    confidence: float = 0.95
    # the grid of the run-queue wait's sub-intervals (the monitor samples once a second): the
    # run's own noise is measured on it, and a window without quiet data is bounded by its own
    sub_window_s: float = 1.0
    # a window is one of the run's own (its calibration level) when outside processes used
    # less than this share of the place's cores and no other run was there
    quiet_share: float = 0.02
    quiet_span_s: float = 10.0               # ... over spans this long (the scan's resolution)
    # the run-queue wait a place may have of its own (share of S), at most: clean busy runs
    # 0.12-0.3 (docs/VALIDATION.md); used when the run has no quiet window
    own_level_cap: float = 0.3
    # grade thresholds, share of the mean R added: none < mild <= ... (docs/DETECTOR.md)
    mild: float = 0.01
    moderate: float = 0.05
    severe: float = 0.15


class EvidenceParams(Record):
    """Thresholds of the direct-evidence rules (docs/VALIDATION.md "The rule" says why these)."""
    # the place's run-queue wait per request as a share of the requests' service time S: the
    # response time the shared core added. Clean busy runs 0.12-0.3, a CPU hog on the core
    # 1.2-1.8, sleep devices <= 0.07 (docs/VALIDATION.md "Choosing the thresholds")
    wait_of_service: float = 0.5
    min_requests: int = 10                   # fewer requests in a window: the rules abstain
    # a wot-fleet loop's request is late when the loop read it (read lag) or ended its sleep
    # service (timer lateness) later than this: the GE rule's late threshold (1 ms), since a
    # request the engine handles that late is distorted as much as a request the GE sent late
    loop_lag_ms: float = 1.0
    loop_max_late_share: float = 0.01        # ... more late than this share (the GE rule's) ...
    loop_alpha: float = 0.01                 # ... at this one-sided binomial significance
    # busy service: wall time / CPU time (1.0: never preempted while serving); steal time and
    # preemption show here, a memory or cache antagonist cannot (the service burns CPU time)
    stretch_p50: float = 1.25
    other_run_share: float = 0.05            # another WoTbench run's components on a run core
    name_min_share: float = 0.02             # antagonists listed from this share of a core
    verdict: VerdictParams = Field(default_factory=VerdictParams)


class EvidenceSources(Record):
    """Which sources this run had: None = available, else why not. A missing source is said in
    the verdict; its rules abstain instead of passing."""
    thread_runqueue_wait: Optional[str] = None
    per_core_cpu: Optional[str] = None
    steal: Optional[str] = None
    cpu_pressure: Optional[str] = None
    process_scan: Optional[str] = None
    device_logs: Optional[str] = None


class Antagonist(_Measured):
    core: int
    pid: int
    comm: str
    owner_kind: OwnerKind
    owner: str = ""
    share: float                             # of the core, over the window
    cmdline: str = ""                        # its command line at the scan ("" before it was kept)


class PlaceWindow(_Measured):
    """One place in one window. Shares are of the window's length unless said otherwise."""
    place: str                               # "core 1", "cd-node", "ge-0"
    cores: list[int] = Field(default_factory=list)   # where it runs ([]: not pinned)
    requests: int = 0
    cpu_s: F = None
    wait_s: F = None
    wait_share: F = None                     # run-queue wait / CPU time
    wait_ms_per_request: F = None
    service_ms_per_request: F = None         # mean S of the requests served (resource files)
    wait_of_service: F = None                # wait per request / S per request
    stretch_p50: F = None
    stretch_p90: F = None
    wakeup_p95_ms: F = None
    lag_p99_ms: F = None                     # a GE (pushing devices): its sends' lag behind the schedule
    late_share: F = None                     # ... the share later than its GE-rule tolerance (1 ms)
    read_lag_p99_ms: F = None                # a wot-fleet loop: arrival - kernel arrival
    timer_late_p99_ms: F = None              # ... end - due of its sleep service
    foreign_share: F = None                  # other processes on this core
    steal_share: F = None
    # the host's share (cd_module/hostshare.py): what it added per request beyond the run's own
    # level, in ms, with its confidence bounds, and as a share of the mean response time
    r_ms: F = None                           # mean measured R of the place's answered requests
    own_ms: F = None                         # the run's own level of the measure, per request
    added_ms: F = None                       # point estimate (>= 0)
    added_low_ms: F = None
    added_high_ms: F = None
    added_share: F = None                    # added_ms / r_ms
    added_by: Optional[str] = None           # the measure that gave it: cpu_wait, stretch, ...
    grade: Optional[Grade] = None
    beyond_tolerance: Optional[bool] = None  # None: not judged (too few requests, not a device)


class Flag(Record):
    rule: FlagRule
    place: str
    text: str                                # "devices on core 1 waited for the CPU 31 % ..."


class WindowEvidence(_Measured):
    window: int
    start_s: float
    end_s: float
    places: list[PlaceWindow] = Field(default_factory=list)
    pressure_share: F = None                 # host CPU pressure "some"
    antagonists: list[Antagonist] = Field(default_factory=list)
    flags: list[Flag] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


class PlaceShare(_Measured):
    """One place (or one device) over the whole test: request-weighted means of its windows."""
    requests: int = 0
    r_ms: F = None
    own_ms: F = None                         # the run's own level, per request
    own_from: str = ""                       # how the own level was found
    noise_from: str = ""                     # what its bounds' uncertainty came from
    added_ms: F = None
    added_share: F = None
    worst_window: Optional[int] = None
    worst_added_ms: F = None
    worst_share: F = None
    grade: Optional[Grade] = None            # of the worst window
    windows_beyond: int = 0


class HostShare(_Measured):
    """``evidence.host_share``: how much of the devices' response time the host added."""
    tolerance: str                           # "5 % of R" or "0.5 ms"
    grade: Grade = "none"                    # the worst device window's
    windows_judged: int = 0
    windows_beyond: int = 0
    worst_window: Optional[int] = None
    worst_place: Optional[str] = None
    worst_added_ms: F = None
    worst_share: F = None
    added_ms: F = None                       # over the test, all devices, per request
    added_share: F = None
    per_place: dict[str, PlaceShare] = Field(default_factory=dict)
    per_device: dict[str, PlaceShare] = Field(default_factory=dict)
    per_group: dict[str, PlaceShare] = Field(default_factory=dict)   # devices[].group


class EvidenceBlock(Record):
    params: EvidenceParams = Field(default_factory=EvidenceParams)
    sources: EvidenceSources = Field(default_factory=EvidenceSources)
    calibration: Optional[WindowEvidence] = None   # the same measures while the CD ran alone
    windows: list[WindowEvidence] = Field(default_factory=list)
    other_runs: dict[str, int] = Field(default_factory=dict)   # at deploy (run.json)
    host_share: Optional[HostShare] = None   # None in summaries written before it

    @property
    def flagged_windows(self) -> list[WindowEvidence]:
        return [w for w in self.windows if w.flagged]

    @property
    def missing(self) -> dict[str, str]:
        return {k: v for k, v in self.sources.model_dump().items() if v}
