"""Each cell's clock against the coordinator's: an NTP-style exchange, the bound, T0.

A response time never crosses two clocks (a cell's GE stamps both the send and the answer),
so the clocks matter only for when the cells start and for lining up their time series. The
coordinator sends at t1 (its wall clock), the cell receives at t2 and answers at t3 (the
cell's wall clock), the coordinator receives at t4. Then (RFC 5905 §8)

    offset θ = ((t2 − t1) + (t3 − t4)) / 2     the cell's clock minus the coordinator's
    delay  δ = (t4 − t1) − (t3 − t2)           the round trip, without the cell's own time

and the true offset lies within θ ± δ/2 whatever the asymmetry of the path. Of a burst of
exchanges the one with the smallest δ is kept (a queued packet only widens the interval).
T0 is a wall-clock instant of the coordinator; a cell starts at T0 + θ on its wall clock,
mapped to its CLOCK_MONOTONIC (the clock of every start time in a run).
"""
from __future__ import annotations

from typing import Optional, Sequence

from pydantic import BaseModel, Field

NTP_FIX = ("synchronise the node's clock (chrony or systemd-timesyncd against the same server "
           "as the others), or raise the run's clock bound")


class Exchange(BaseModel, frozen=True):
    """One request/answer: t1, t4 on the coordinator's wall clock, t2, t3 on the cell's (ns)."""
    t1_ns: int
    t2_ns: int
    t3_ns: int
    t4_ns: int

    @property
    def delay_ns(self) -> int:
        return (self.t4_ns - self.t1_ns) - (self.t3_ns - self.t2_ns)

    @property
    def offset_ns(self) -> float:
        return ((self.t2_ns - self.t1_ns) + (self.t3_ns - self.t4_ns)) / 2

    @property
    def valid(self) -> bool:
        """Both clocks moved forward and the round trip is not negative."""
        return self.t4_ns >= self.t1_ns and self.t3_ns >= self.t2_ns and self.delay_ns >= 0


class Estimate(BaseModel):
    offset_ns: float        # the cell's clock minus the coordinator's
    delay_ns: int           # round trip of the exchange used
    samples: int            # exchanges offered
    valid: int              # of which valid

    @property
    def error_ns(self) -> float:
        """Half the round trip: the true offset is within offset ± error."""
        return self.delay_ns / 2

    @property
    def worst_ns(self) -> float:
        """The largest the true offset can be, in magnitude."""
        return abs(self.offset_ns) + self.error_ns


def estimate(exchanges: Sequence[Exchange]) -> Estimate:
    """The minimum-delay exchange's offset; ValueError when no exchange is valid."""
    good = [e for e in exchanges if e.valid]
    if not good:
        raise ValueError(f"no valid clock exchange among {len(exchanges)} (a clock stepped "
                         "backwards during the exchange, or none was made)")
    best = min(good, key=lambda e: (e.delay_ns, e.t1_ns))
    return Estimate(offset_ns=best.offset_ns, delay_ns=best.delay_ns, samples=len(exchanges),
                    valid=len(good))


class CellClock(BaseModel):
    node: str
    before: Estimate                 # measured before T0 (used to map T0)
    after: Optional[Estimate] = None  # measured after the run (None: the cell was lost)

    @property
    def drift_ns(self) -> Optional[float]:
        return None if self.after is None else self.after.offset_ns - self.before.offset_ns


class ClockCheck(BaseModel):
    bound_ns: int = Field(ge=0)
    cells: list[CellClock]
    start_skew_ns: float      # bound on how far apart any two cells (or a cell and T0) start
    refused: list[str] = []   # before T0: a run with any of these must not start
    flagged: list[str] = []   # after the run: the offsets moved beyond the bound


def start_skew_ns(cells: Sequence[CellClock]) -> float:
    """Each cell starts within ``before.error`` of T0 (it corrects by its offset), so two
    cells start at most the sum of the two largest errors apart (one cell: its error)."""
    errors = sorted((c.before.error_ns for c in cells), reverse=True)
    return sum(errors[:2])


def check(cells: Sequence[CellClock], bound_ns: int) -> ClockCheck:
    """Refuse (before T0) a cell whose offset or its measurement error is beyond the bound;
    flag (after the run) one whose offset drifted beyond it. Each message names the node."""
    refused, flagged = [], []
    for c in cells:
        b = c.before
        if b.worst_ns > bound_ns:
            why = ("its clock is off" if abs(b.offset_ns) > b.error_ns
                   else "the exchange's round trip is too long to vouch for it")
            refused.append(f"{c.node}: clock offset {_ms(b.offset_ns)} ± {_ms(b.error_ns)} "
                           f"beyond the bound {_ms(bound_ns)} ({why}); fix: {NTP_FIX}")
        if c.after is not None and (c.after.worst_ns > bound_ns or abs(c.drift_ns) > bound_ns):
            flagged.append(f"{c.node}: clock offset {_ms(c.after.offset_ns)} ± "
                           f"{_ms(c.after.error_ns)} after the run (drift {_ms(c.drift_ns)}), "
                           f"beyond the bound {_ms(bound_ns)}: its series may be shifted; "
                           f"fix: {NTP_FIX}")
    return ClockCheck(bound_ns=bound_ns, cells=list(cells), start_skew_ns=start_skew_ns(cells),
                      refused=refused, flagged=flagged)


def t0_mono_ns(t0_wall_ns: int, offset_ns: float, wall_now_ns: int, mono_now_ns: int) -> int:
    """T0 (coordinator wall clock) on the cell's CLOCK_MONOTONIC, from one instant read on the
    cell's wall and monotonic clocks together."""
    return mono_now_ns + round(t0_wall_ns + offset_ns - wall_now_ns)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"
