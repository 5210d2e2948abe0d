"""The sweep report's rows (:func:`wotbench.sweep.report.collect`): one :class:`PointRow` per
point, the point's state beside the :class:`RunFacts` a series shows, read from its run's typed
summary.json, run.json and plan.json (None where a fact is not available). The tables, the
figures (:mod:`wotbench.sweep.figures`) and the results (:mod:`wotbench.sweep.aggregate`)
read their attributes; :meth:`PointRow.fact` is for the readers that pick a fact by its name
(a figure's axis, a results metric)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class RunFacts:
    """The facts of one point's summary.json; all None when it has none."""
    devices: Optional[int] = None
    throughput_rps: Optional[float] = None
    offered_rps: Optional[float] = None
    rt_p50_ms: Optional[float] = None
    rt_mean_ms: Optional[float] = None
    rt_p95_ms: Optional[float] = None
    rt_p99_ms: Optional[float] = None
    loss_share: Optional[float] = None
    timeouts: Optional[int] = None
    sut_cpu_cores: Optional[float] = None
    sut_rss_peak_mib: Optional[float] = None
    rd_devices: Optional[float] = None
    rd_cd: Optional[float] = None
    rd_cd_baseline: Optional[float] = None
    ge_kept_up: Optional[bool] = None
    late_share: Optional[float] = None
    ks: Optional[float] = None
    lag_p99_us: Optional[float] = None
    cpu_total_pct: Optional[float] = None
    # how much of the devices' response time the host added (evidence.host_share)
    testbed_ms: Optional[float] = None
    testbed_share: Optional[float] = None
    testbed_worst_share: Optional[float] = None
    # the notification sink's (summary.json notify): the worst subscriber's latency and lost
    # share, every subscriber's notifications/s together
    notify_p50_ms: Optional[float] = None
    notify_p99_ms: Optional[float] = None
    notify_per_s: Optional[float] = None
    notify_lost_share: Optional[float] = None

    def fact(self, key: str) -> Any:
        """A fact by its name (a figure's axis, a results metric: aggregate.METRICS)."""
        return getattr(self, key)


@dataclass(kw_only=True)
class PointRow(RunFacts):
    """One point of the sweep: its state (sweep.json), its run's facts and what follows from
    them."""
    id: str
    setting: str
    repeat: int
    overrides: dict[str, Any]
    status: str
    verdict: Optional[str]
    reasons: list[str]
    error: Optional[str]
    exit_code: Optional[int]
    run_dir: Optional[str]               # relative to the sweep dir
    has_summary: bool
    host: Optional[str] = None           # swarm: the node whose cell stopped being faithful
    affinity: str                        # placement.affinity: the plan's, else the config's
    tput_per_device: Optional[float] = None
    offered_per_device: Optional[float] = None
    cd_rt_ms: Optional[float] = None     # the CD's median response time, S (1 + R_d)
    report: Optional[str] = None         # the run's report.html, relative to the sweep dir
