"""``summary.json`` ``slo``: how the run did against the config's service-level objectives
(written by :mod:`wotbench.analysis.slo_judge`, the schema in :mod:`wotbench.config.slo_spec`).

Every objective is judged on the whole test (``state``, which decides) and on each window of
``window_s`` seconds of scheduled send time (``windows_*``, reported). A limit is inclusive: a
value exactly at it passes. ``no_data``: nothing to measure (no 2.xx response for a
percentile, no request sent for a share, none scheduled for a throughput); it never passes.
``margin``: the headroom, in the objective's unit, positive when met (limit − measured for an
upper limit, measured − limit for a lower one); ``margin_rel`` = margin / limit.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record

F = Optional[float]
SloState = Literal["pass", "fail", "no_data"]


class SloWindow(Record):
    start_s: float
    end_s: float
    measured: F = None
    samples: int = 0
    state: SloState


class SloOffender(Record):
    """A device that misses the objective on its own."""
    device: str
    measured: F = None
    samples: int = 0
    margin: F = None


class SloObjectiveResult(Record):
    key: str                              # where it was set: "p95_ms", "groups.sensor.loss_max"
    metric: str                           # p50..p999[_sched], loss, success, throughput
    group: Optional[str] = None           # None: every device
    label: str
    op: Literal["<=", ">="]
    limit: float
    unit: Literal["ms", "share", "req/s"]
    measured: F = None
    samples: int = 0
    state: SloState
    margin: F = None
    margin_rel: F = None
    windows_total: int = 0
    windows_pass: int = 0
    windows_fail: int = 0
    windows_no_data: int = 0
    worst_window: Optional[SloWindow] = None
    missed_windows: list[SloWindow] = Field(default_factory=list)   # at most the first 50
    offenders: list[SloOffender] = Field(default_factory=list)      # the 10 farthest off
    offenders_total: int = 0
    devices_judged: int = 0


class SloBlock(Record):
    status: Literal["met", "missed", "no_data"]
    window_s: float
    objectives: list[SloObjectiveResult] = Field(default_factory=list)
    text: str                             # one line: "SLO missed: p95 61 ms > 50 ms"
    testbed_caveat: Optional[str] = None  # set when the verdict is not trustworthy

    def deciding(self) -> Optional[SloObjectiveResult]:
        """The objective farthest from its limit on the wrong side (missed), else the one with
        the least headroom (met); None without judged objectives."""
        judged = [o for o in self.objectives if o.margin_rel is not None]
        nodata = [o for o in self.objectives if o.state == "no_data"]
        if self.status == "no_data" and nodata:
            return nodata[0]
        return min(judged, key=lambda o: o.margin_rel) if judged else (nodata[0] if nodata else None)
