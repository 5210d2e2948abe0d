"""summary.json ``sut_faults`` (issue 35): each scheduled fault in the system under test (when
it took effect) and the throughput and latency of the requests sent in the windows before,
during and after it (``wotbench.analysis.sut_faults``)."""
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
    action: str                        # pause | kill
    at_s: float                        # scheduled
    applied_s: F = None                # when it took effect (null: it did not, see error)
    resumed_s: F = None                # a pause: when SIGCONT was sent
    error: Optional[str] = None
    before: FaultWindow
    during: FaultWindow
    after: Optional[FaultWindow] = None   # a kill has no after
