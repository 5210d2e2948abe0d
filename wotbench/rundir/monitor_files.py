"""Two small files the monitor writes in ``RUN/monitor/`` (wotbench.monitor.recorder):
``clock.json``, one instant on both clocks (to map collectl's UTC stamps onto CLOCK_MONOTONIC),
and ``cost.json``, the monitor's own CPU time (read by the SUT resources' block)."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir._model import Record


class MonitorClock(Record):
    """``monitor/clock.json``: the same instant as wall time and CLOCK_MONOTONIC."""
    wall_s: float
    mono_ns: int


class MonitorCost(Record):
    """``monitor/cost.json``: the sampling thread's CPU time per part, over the whole run."""
    samples: int
    components: int                    # components read at the last sample
    components_cpu_ns: int
    host_counters_cpu_ns: int
    process_scan_cpu_ns: int
    sut_cpu_ns: int
    sut_components: int
    interval_s: float
    elapsed_s: float
    share_of_a_core: Optional[float]   # null: no time elapsed
