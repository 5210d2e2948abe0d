"""summary.json ``phases`` (issue 35): the figures of ``gateways.http.setup`` and ``verify``,
each its own gateway-emulator run before T0 / after the test (``RUN/phases/<name>/ge/``), kept
apart from the test's (``wotbench.analysis.http_phases``)."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir._model import Record


class PhaseFigures(Record):
    requests: int
    ok: int                            # answered 2xx
    error: int                         # another status
    timeout: int
    reset: int
    unsent: int
    codes: dict[str, int]              # status -> count ("" for none)
    took_s: float                      # the GE's run, first send to last outcome
    latency_p50_ms: Optional[float] = None
    latency_p99_ms: Optional[float] = None
    latency_max_ms: Optional[float] = None


class PhasesBlock(Record):
    setup: Optional[PhaseFigures] = None
    verify: Optional[PhaseFigures] = None
