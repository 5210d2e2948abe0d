"""``summary.json``: what the analysis concluded (docs/CONTRACTS.md §7; every key is explained
in wotbench/analysis/README.md).

``wotbench.analysis`` builds a :class:`Summary` and writes it with ``RunDir.write_summary``; the
report, the sweep report, the validation study and the capacity search read it with
``RunDir.read_summary`` and use attributes. The parameters of the analysis rules are part of the
schema (``run.params``) and are defined here, so the analysis and its readers share them.

Statistics that had no data are ``None`` (JSON null): JSON has no NaN. A few facts that follow
from the stored ones (``ContentionBlock.contended_s``, ``Baseline.threshold_rd``, the worst GE's
values) are properties: computed on read and never written, so they cannot disagree with them.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record
from wotbench.rundir.connected_block import ConnectedBlock
from wotbench.rundir.evidence import EvidenceBlock, EvidenceParams
from wotbench.rundir.notify import NotifyBlock
from wotbench.rundir.phases import PhasesBlock
from wotbench.rundir.sut_faults import FaultFigures
from wotbench.rundir.http_block import HttpBlock
from wotbench.rundir.fleet import FleetBlock
from wotbench.rundir.load_block import LoadBlock
from wotbench.rundir.quantiles import quantiles
from wotbench.rundir.record import Failure, PushVerify
from wotbench.rundir.slo_block import SloBlock
from wotbench.rundir.sut import SutResourcesBlock

F = Optional[float]
VerdictStatus = Literal["trustworthy", "ge_bottleneck", "contention", "testbed_loss", "invalid"]
ContentionStatus = Literal["detected", "none", "inconclusive", "not_checked"]
RT_QS = ("p50", "p90", "p95", "p99", "p999")   # response times
RD_QS = ("p50", "p95", "p99")                  # R_d, its decomposition and the split of R - S


# --------------------------------------------------------------------------- rule parameters

class GeIntegrityParams(Record):
    rel_tolerance: float = 0.05      # a send may slip 5 % of its device's median RIT
    min_tolerance_ms: float = 0.02   # ... but never less than the GE's own µs-scale jitter
    max_late_share: float = 0.01     # more than 1 % off schedule (shown with confidence 1-alpha)
    alpha: float = 0.01
    max_ks: float = 0.05
    late_threshold_ms: float = 1.0   # absolute lateness, reported only (late_abs_share)
    cdf_points: int = 201
    # closed loop: the GE's stalls (sent - the client's intended instant) may cost at most this
    # share of the clients' cycle time (= of their throughput) (analysis/ge_integrity.py)
    max_stall_share: float = 0.05


class RdParams(Record):
    join_slack_us: float = 0.0   # the GE reads sent_ns right before sendto(): arrival > sent
    window_s: float = 10.0


class ContentionParams(Record):
    window_s: float = 10.0
    window_samples: Optional[int] = None
    k: float = 4.0
    floor: float = 0.10
    alpha: float = 0.05
    min_baseline_samples: int = 8
    min_window_samples: int = 5
    baseline_k: float = 1.0
    baseline_floor_ms: float = 2.0


class AnalysisParams(Record):
    ge: GeIntegrityParams = Field(default_factory=GeIntegrityParams)
    rd: RdParams = Field(default_factory=RdParams)
    contention: ContentionParams = Field(default_factory=ContentionParams)
    evidence: EvidenceParams = Field(default_factory=EvidenceParams)
    # above this many devices (a fleet run: 10^4-10^5) the per-device blocks of summary.json
    # (per_device, ge_integrity per_device, rd and decomposition per_device) and the per-device
    # rows of the response_times / rd_over_time series are left out: 100 000 of them would make
    # summary.json ~300 MB. Every device keeps one row in series/per_device.csv instead.
    per_device_max: int = 2000


# --------------------------------------------------------------------------- run

class RunBlock(Record):
    name: Optional[str] = None
    run_id: Optional[str] = None
    run_dir: str
    backend: Optional[str] = None
    test_start_mono_ns: int
    duration_s: float
    interrupted: bool
    failures: list[Failure] = Field(default_factory=list)
    ges: list[str] = Field(default_factory=list)
    devices: list[str] = Field(default_factory=list)
    cd_device: Optional[str] = None
    analysis_version: int
    params: AnalysisParams
    warnings: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- responses

class Outcomes(Record):
    ok: int = 0
    error: int = 0
    timeout: int = 0
    reset: int = 0
    unsent: int = 0


class OutcomeRates(Record):
    ok: F = None
    error: F = None
    timeout: F = None
    reset: F = None
    unsent: F = None


RtStats = quantiles("RtStats", RT_QS, "_ms")


class ResponseTimes(Record):
    from_sent: RtStats
    from_scheduled: RtStats


class OutcomeBlock(Record):
    requests: int
    sent: int
    outcomes: Outcomes
    rates: OutcomeRates
    loss_rate_of_sent: F = None
    offered_rps: F = None
    throughput_rps: F = None


class Overall(OutcomeBlock):
    devices: int
    duration_s: float
    response_time_ms: ResponseTimes
    response_codes: dict[str, int] = Field(default_factory=dict)   # CoAP code -> responses


class DeviceResponses(OutcomeBlock):
    ge: Optional[str] = None
    response_time_ms: ResponseTimes


# --------------------------------------------------------------------------- GE integrity

RitStats = quantiles("RitStats", ("p5", "p50"), "_ms", max=False)
LagStats = quantiles("LagStats", ("p50", "p90", "p99", "p999"), count=None, min=True)


class GeDeviceIntegrity(Record):
    sent: int
    expected_rit: RitStats
    submitted_rit: RitStats
    ks: F = None
    ks_tol: F = None
    ks_limit: F = None
    lag_ms: LagStats
    tolerance_ms: F = None        # median of the per-send tolerances
    late_share: F = None
    early_share: F = None
    late_p_value: F = None
    early_p_value: F = None
    late_abs_share: F = None      # lag > late_threshold_ms (absolute), for comparison only
    kept_up: Optional[bool] = None
    problems: list[str] = Field(default_factory=list)


class ClosedLoopIntegrity(Record):
    """A closed-loop GE kept up when its clients were not stalled beyond their think time:
    stall = sent - (previous outcome + think time), the time the GE held a client that wanted
    to go; its share of the clients' cycle time (send to next send) is the throughput the GE
    itself cost them."""
    stall_ms: LagStats
    cycle_mean_ms: F = None
    stall_share: F = None        # sum of stalls / sum of cycles (measured phase)
    max_stall_share: float


class GeIntegrity(GeDeviceIntegrity):
    closed_loop: Optional[ClosedLoopIntegrity] = None   # a closed-loop GE (its rule instead)
    requests: int
    interrupted: bool
    wait: Optional[str] = None
    devices_not_kept_up: list[str] = Field(default_factory=list)
    per_device: dict[str, GeDeviceIntegrity] = Field(default_factory=dict)


class GeRule(Record):
    rel_tolerance: float = 0.05
    min_tolerance_ms: float = 0.02
    max_late_share: float
    alpha: float = 0.01
    max_ks: float
    late_threshold_ms: float
    max_stall_share: float = 0.05    # closed loop (absent in older summaries)
    text: str
    closed_text: Optional[str] = None   # the closed-loop rule, when a GE ran one


class GeIntegrityBlock(Record):
    rule: GeRule
    kept_up: Optional[bool] = None
    interrupted: bool
    per_ge: dict[str, GeIntegrity] = Field(default_factory=dict)
    cd_ge: Optional[GeIntegrity] = None

    # one line for a run with several GEs (the sweep report): the worst main GE's value
    @property
    def worst_late_share(self) -> Optional[float]:
        return _largest([g.late_share for g in self.per_ge.values()])

    @property
    def worst_ks_tol(self) -> Optional[float]:
        return _largest([g.ks_tol for g in self.per_ge.values()])

    @property
    def worst_lag_p99_ms(self) -> Optional[float]:
        return _largest([g.lag_ms.p99 for g in self.per_ge.values()])


def _largest(values: list[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return max(present) if present else None


# --------------------------------------------------------------------------- R_d

RdStats = quantiles("RdStats", RD_QS)
DecompStats = quantiles("DecompStats", RD_QS, "_ms")


class Decomposition(Record):
    network_stack: DecompStats
    queueing: DecompStats
    service: DecompStats


class DeviceRd(Record):
    rd: RdStats
    decomposition_ms: Decomposition


class JoinCounters(Record):
    log_rows: int
    matched: int
    unmatched_log_rows: int
    ok_requests: int
    ok_requests_matched: int


class CdPhaseRd(RdStats):
    lost: int = 0


class CdRd(Record):
    calibration: CdPhaseRd
    test: CdPhaseRd
    device: str


class RdBlock(Record):
    definition: str
    requests_with_s: int
    overall: DeviceRd
    join: JoinCounters
    per_device: dict[str, DeviceRd] = Field(default_factory=dict)
    cd: Optional[CdRd] = None


# --------------------------------------------------------------------------- R - S by place

SplitStats = quantiles("SplitStats", RD_QS, "_us")


class Split(Record):
    """R - S of answered requests by place, µs (wotbench/analysis/decomposition.py). ``stamps``:
    kernel = every row had kernel receive stamps at both ends and the device's send time."""
    stamps: Literal["kernel", "user", "mixed", "none"]
    r_minus_s: SplitStats
    network: SplitStats
    network_out: SplitStats
    network_back: SplitStats
    device: SplitStats
    device_in: SplitStats
    device_out: SplitStats
    service: SplitStats
    ge_side: SplitStats


class CdSplit(Record):
    calibration: Split
    test: Split


class SplitBlock(Record):
    definition: str
    overall: Split
    per_device: dict[str, Split] = Field(default_factory=dict)
    cd: Optional[CdSplit] = None


# --------------------------------------------------------------------------- contention

class AbsoluteBaseline(Record):
    service_ms: F = None
    median_excess_ms: F = None
    limit_ms: F = None
    elevated: bool


class Baseline(Record):
    samples: int
    lost: int
    median_rd: F = None
    mad_rd: F = None
    threshold_shift: F = None
    absolute: Optional[AbsoluteBaseline] = None

    @property
    def threshold_rd(self) -> Optional[float]:
        """The CD R_d above which a window's median counts as contended."""
        if self.median_rd is None or self.threshold_shift is None:
            return None
        return self.median_rd + self.threshold_shift


class FlaggedWindow(Record):
    start_s: float
    end_s: float
    shift: F = None          # the CD rule's figures (None when only the direct evidence flagged)
    ratio: F = None
    p_value: F = None
    # what showed it: "cd" and the direct-evidence rules (rundir/evidence.py FlagRule), with
    # one sentence each ("devices on core 1 waited for the CPU 31 % of their CPU time ...")
    shown_by: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class ContentionBlock(Record):
    """The contention verdict: the CD rule and the direct evidence together (``status``);
    ``cd_status`` is the CD rule's alone (None in summaries written before the evidence)."""
    status: ContentionStatus
    reason: Optional[str] = None
    cd_status: Optional[ContentionStatus] = None
    evidence_missing: dict[str, str] = Field(default_factory=dict)   # source -> why
    # processes outside the run that used a run core in windows nothing flagged: named, so a
    # reader sees them, with what the run's own measures say about their effect
    notes: list[str] = Field(default_factory=list)
    params: ContentionParams
    baseline: Optional[Baseline] = None
    windows_tested: int = 0
    windows_flagged: int = 0
    onset_s: F = None
    max_shift: F = None
    median_shift: F = None
    max_ratio: F = None
    flagged_windows: list[FlaggedWindow] = Field(default_factory=list)
    # how much the host added to the devices' response times (evidence.host_share; None in
    # summaries written before it): the worst window's grade, the tolerance, the amounts
    grade: Optional[Literal["none", "mild", "moderate", "severe"]] = None
    tolerance: Optional[str] = None
    added_ms: F = None                 # over the test, per request
    added_share: F = None              # ... of the devices' mean response time
    worst_added_ms: F = None           # the worst window's
    worst_share: F = None

    @property
    def contended_s(self) -> float:
        """Seconds of the test inside flagged windows."""
        return sum(w.end_s - w.start_s for w in self.flagged_windows)


# --------------------------------------------------------------------------- loss

class LossCauses(Record):
    """Requests that did not end ok, by where they were lost (wotbench.analysis.loss)."""
    to_device: int = 0
    from_device: int = 0
    local_send: int = 0
    impairment: int = 0
    refused_503: int = 0
    device_late: int = 0
    sut_error: int = 0
    sut_reset: int = 0
    no_device_log: int = 0
    interrupted: int = 0
    component_failed: int = 0
    push_timeout: int = 0          # a device's own request: no answer, sent on time (SUT)
    push_late_send: int = 0        # ... sent late by a starved device (testbed)
    proxy: int = 0                 # lost by an HTTP->CoAP proxy or its leg to the device (SUT)


class LossBlock(Record):
    requests_not_ok: int
    sent: int
    by_cause: LossCauses
    testbed: int
    configured: int
    sut: int
    testbed_share: F = None
    testbed_devices: int = 0
    first_testbed_loss_s: F = None
    per_device: dict[str, dict[str, int]] = Field(default_factory=dict)


# --------------------------------------------------------------------------- monitor

class MonitorBlock(Record):
    """Resource use (wotbench.analysis.monitor); ``*_missing``: why a series is absent."""
    host_cpu_busy_pct: F = None          # mean over all cores and samples during the test
    cpu_cores_missing: Optional[str] = None
    cpu_components_missing: Optional[str] = None
    # device group -> device CPU µs per request that ended ok, during the test
    device_cpu_us_per_request: dict[str, float] = {}


# --------------------------------------------------------------------------- verdict

class Checks(Record):
    data: Literal["ok", "invalid"]
    ge: Literal["kept_up", "bottleneck", "not_checked"]
    contention: ContentionStatus
    loss: Literal["none", "testbed_loss", "not_checked"] = "not_checked"


class Verdict(Record):
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    exit_code: int
    checks: Checks


ObserveQuantiles = quantiles("ObserveQuantiles", ("p50", "p90", "p95", "p99"), count="n", tail=True)


class ObserveDevice(Record):
    observations: int
    established: int
    received: int
    emitted: int
    lost: int
    configured_rate: F = None      # notifications/s per observable resource (config)
    achieved_rate: F = None        # received per second of observed time, per observer
    latency_p50_ms: F = None
    latency_p99_ms: F = None


class ObserveBlock(Record):
    """Observations (RFC 7641); wotbench/analysis/observe.py explains every figure."""
    observations: int
    established: int
    received: int                  # notifications the GE(s) received
    emitted: int                   # notifications the devices emitted to the GE's observers
    lost: int                      # emitted >= 1 s before the observer stopped, never received
    loss_share: F = None
    in_flight_at_stop: int = 0
    skipped_by_device: int = 0     # sequence holes the device never emitted (coalescing)
    gaps: int = 0                  # GE-side sequence holes (observe.json)
    reordered: int = 0
    duplicates: int = 0
    after_cancel: int = 0
    dropped: int = 0               # not recorded: GE --max-notifications full
    acks_sent: int = 0
    rsts_sent: int = 0
    latency_ms: ObserveQuantiles   # GE receive - device emission (one way)
    service_ms: ObserveQuantiles   # the sensor reads as measured on the device
    configured_service_ms: F = None
    rd: ObserveQuantiles           # (receive - read tick - S) / S
    rate_ratio_median: F = None    # achieved / configured rate, median over devices
    per_device: dict[str, ObserveDevice] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


BlockTimes = quantiles("BlockTimes", ("p50", "p90", "p99"), count="n", mean=False, tail=True)


class BlockKind(Record):
    transfers: int                 # requests with a Block option
    multi_block: int               # ... that needed more than one block
    ok: int                        # multi-block transfers that completed (2.xx)
    failed: int
    outcomes: dict[str, int] = Field(default_factory=dict)
    body_bytes_median: F = None
    blocks_median: F = None
    block_size: Optional[int] = None
    retransmissions: int = 0
    with_retransmissions: int = 0
    time_ms: BlockTimes            # whole transfer, ok ones
    time_ms_no_retransmission: BlockTimes
    time_ms_with_retransmission: BlockTimes


class BlockwiseBlock(Record):
    """Block-wise transfers (RFC 7959); wotbench/analysis/blockwise.py. by_kind: block2 (large
    responses) and block1 (large request bodies)."""
    by_kind: dict[str, BlockKind] = Field(default_factory=dict)


class DtlsMode(Record):
    handshakes: int
    ok: int
    failed: int = 0
    timeout: int = 0
    time_ms: BlockTimes            # ok handshakes: ClientHello sent -> server Finished received


class DtlsBlock(Record):
    """DTLS handshakes of the GEs (coaps://); wotbench/analysis/dtls.py. by_mode: reuse (before
    the start) and per-request (one per request, on the schedule). Failed handshakes are
    testbed/config problems, never the system under test."""
    modes: list[str] = Field(default_factory=list)
    by_mode: dict[str, DtlsMode] = Field(default_factory=dict)
    handshakes: int = 0
    handshakes_failed: int = 0
    requests_without_session: int = 0
    failures: list[str] = Field(default_factory=list)
    ciphers: list[str] = Field(default_factory=list)
    slots_exhausted: int = 0
    attribution: str = "testbed/config (not the system under test)"


PushTimes = quantiles("PushTimes", ("p50", "p95", "p99"), "_ms", count="n", tail=True)
PushLagTimes = quantiles("PushLagTimes", ("p50", "p99"), "_us", count="n", tail=True)


class PushOp(Record):
    """One operation of the pushing devices (``devices[].push[].op``), all its devices."""
    phase: Literal["setup", "test", "teardown"]
    requests: int
    outcomes: Outcomes
    throughput_per_s: Optional[float]   # test phase: answered ok per second of the test
    response_ms: PushTimes              # ok answers: kernel receive stamp − (first) send
    retransmissions: int = 0            # RFC 7252 retransmissions of its requests (as blockwise)
    with_retransmissions: int = 0       # its requests retransmitted at least once


class PushBlock(Record):
    """Requests the devices sent themselves (wotbench/analysis/push_figures.py): per operation, and
    the devices' send lag (sent − due) of the test phase, which is the testbed's like a GE's."""
    devices: int
    by_op: dict[str, PushOp] = Field(default_factory=dict)
    send_lag: PushLagTimes
    late_share: Optional[float]         # test sends later than `late_us`
    late_us: float
    setup_failed: list[str] = Field(default_factory=list)       # "device: op outcome code"
    teardown_failed: list[str] = Field(default_factory=list)
    verify: list[PushVerify] = Field(default_factory=list)      # phase verify (run.json)


class Summary(Record):
    run: RunBlock
    overall: Overall
    per_device: dict[str, DeviceResponses] = Field(default_factory=dict)
    ge_integrity: GeIntegrityBlock
    rd: RdBlock
    contention: ContentionBlock
    verdict: Verdict
    monitor: Optional[MonitorBlock] = None
    loss: Optional[LossBlock] = None
    decomposition: Optional[SplitBlock] = None   # absent in summaries written before it existed
    slo: Optional[SloBlock] = None        # the config's service-level objectives (rundir/slo_block.py)
    observe: Optional[ObserveBlock] = None
    blockwise: Optional[BlockwiseBlock] = None
    dtls: Optional[DtlsBlock] = None
    http: Optional[HttpBlock] = None      # protocol: http runs (rundir/http_block.py, issue 22)
    notify: Optional[NotifyBlock] = None  # notify: the notification sink (rundir/notify.py, issue 35)
    phases: Optional[PhasesBlock] = None  # gateways.http.setup / verify (rundir/phases.py, issue 35)
    sut_faults: Optional[list[FaultFigures]] = None   # sut_faults: (rundir/sut_faults.py, issue 35)
    push: Optional[PushBlock] = None      # devices[].push (issue 23)
    evidence: Optional[EvidenceBlock] = None   # direct kernel evidence per window (rundir/evidence.py)
    sut_resources: Optional[SutResourcesBlock] = None   # the SUT's own CPU and memory (rundir/sut.py)
    load: Optional[LoadBlock] = None   # throughput, latency, fairness, open/closed (rundir/load_block.py)
    fleet: Optional[FleetBlock] = None   # the wot-fleet engines' own lag (rundir/fleet.py, issue 29)
    connected: Optional[ConnectedBlock] = None   # connected devices (rundir/connected_block.py, issue 30)

    @property
    def contended_share(self) -> Optional[float]:
        """The share of the test inside flagged windows (None for a run without duration)."""
        d = self.overall.duration_s
        return self.contention.contended_s / d if d else None
