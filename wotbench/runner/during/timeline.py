"""The run's timeline on CLOCK_MONOTONIC: pure arithmetic, no clock read here (the caller
passes "now"), so every rule is unit-tested without processes.

    T0 = now + lead                         the CD-GE starts (calibration: the CD node alone)
    test start = T0 + calibration_s         the main GE(s) start
    test end   = test start + duration_s    the trace ends
    deadline   = test end + timeout + margin   GEs still running then are stopped

The lead is the time to create and start the GE containers/processes and let them load their
traces before T0 (docs/CONTRACTS.md §8).
"""
from __future__ import annotations

from dataclasses import dataclass

NS = 1_000_000_000
END_MARGIN_S = 15.0      # added to the bounded wait for the GEs
BASE_LEAD_S = 1.0
TRACE_LOAD_RATE = 2e6    # requests a GE loads per second (generous)


def lead_s(ges: int, per_ge_s: float, requests: int) -> float:
    """Seconds between choosing T0 and T0: a base, each GE's start cost, the trace load."""
    return BASE_LEAD_S + per_ge_s * ges + requests / TRACE_LOAD_RATE


@dataclass(frozen=True)
class Timeline:
    t0_ns: int
    calibration_s: float
    duration_s: float
    timeout_ms: int

    @classmethod
    def plan(cls, now_ns: int, lead: float, calibration_s: float, duration_s: float,
             timeout_ms: int) -> "Timeline":
        return cls(now_ns + int(lead * NS), calibration_s, duration_s, timeout_ms)

    @property
    def test_start_ns(self) -> int:
        return self.t0_ns + int(self.calibration_s * NS)

    @property
    def test_end_ns(self) -> int:
        return self.test_start_ns + int(self.duration_s * NS)

    @property
    def deadline_ns(self) -> int:
        """When a GE still running is no longer waited for."""
        return self.test_end_ns + int((self.timeout_ms / 1000 + END_MARGIN_S) * NS)

    def impairment_s(self, max_lead_s: float = 10.0) -> float:
        """How long a time-limited impairment (pumba --duration) must last: calibration, test,
        the GE timeout and the end margin, plus the start lead (bounded)."""
        return (self.calibration_s + self.duration_s + self.timeout_ms / 1000 + END_MARGIN_S
                + max_lead_s)

    def phase(self, now_ns: int) -> tuple[str, float]:
        """("starting" | "calibration" | "test", fraction of that phase done) at ``now_ns``."""
        if now_ns < self.t0_ns:
            return "starting", 0.0
        if now_ns < self.test_start_ns:
            return "calibration", (now_ns - self.t0_ns) / max(1, self.test_start_ns - self.t0_ns)
        return "test", min(1.0, (now_ns - self.test_start_ns) /
                           max(1, self.test_end_ns - self.test_start_ns))
