"""summary.json ``sut_faults`` (issue 35): each scheduled fault in the system under test (when
it took effect) and the throughput and latency of the requests sent in the windows before,
during and after it (``wotbench.analysis.sut_faults``); and ``RUN/sut-faults.json``, what the
runner recorded of each fault as it applied it (``wotbench.runner.sut_faults``)."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir._model import Record

F = Optional[float]


class FaultWindow(Record):
    start_s: float
    end_s: float
    sent: int                          # requests scheduled in the window
    ok: int                            # of those scheduled in it
    failed: int                        # error, timeout, reset
    throughput_rps: float              # ok responses that arrived in the window, per second
    p50_ms: F = None                   # R from the scheduled send of its ok requests
    p99_ms: F = None


class FaultFigures(Record):
    device: str
    action: str                        # pause | kill | restart | cpu_quota
    at_s: float                        # scheduled
    applied_s: F = None                # when it took effect (null: it did not, see error)
    resumed_s: F = None                # a pause: when SIGCONT was sent; a restart: when the
                                       # server answered its readiness probe again
    stopped_s: F = None                # a restart: its old tree gone, the new one started
    downtime_s: F = None               # a restart: resumed_s - applied_s
    cpus: F = None                     # a cpu_quota change: the new quota (cores)
    throttled_periods: Optional[int] = None   # ... process backend: CFS periods its cgroup
                                       # was throttled in (the kernel enforcing it)
    error: Optional[str] = None
    before: FaultWindow
    during: FaultWindow                # a kill or cpu_quota change: window_s after it
    after: Optional[FaultWindow] = None   # a pause's or restart's window_s after it ended


class FaultRecord(Record):
    """One scheduled fault as the runner recorded it; the ``*_ns`` stamps are monotonic ns from
    the test's start, null where the step did not happen (``error`` says why, if it failed)."""
    device: str
    action: str
    at_s: float
    for_s: F                           # a pause's length (config)
    cpus: F                            # a cpu_quota's cores (config)
    window_s: float
    applied_ns: Optional[int]
    resumed_ns: Optional[int]
    stopped_ns: Optional[int]
    throttled_periods: Optional[int]   # cpu_quota on the process backend: the periods throttled
    error: Optional[str]


class FaultsFile(Record):
    """``RUN/sut-faults.json``."""
    faults: list[FaultRecord]
