"""``summary.json`` ``load``: the load a run applied and what it got, the way load tools report
it (wrk2, Vegeta): throughput, latency min/mean/stdev/percentiles/max, timeouts, requests per
client (fairness), and whether the load was an open or a closed loop.

Open loop (the trace's schedule, default): requests leave at their scheduled instants whatever
the answers; the latency from the *scheduled* send (``latency_from_schedule_ms``) is free of
coordinated omission (a late send does not hide the wait it caused). Closed loop (``gateways.
loop: closed``, GE ``--clients N``): N clients each wait for an outcome (plus a think time)
before the next request, so a slow server is sent fewer requests exactly while it is slow —
coordinated omission: the latency percentiles describe what these N clients saw, not what an
open arrival stream would have seen; there is no schedule to measure from.
Built by ``wotbench.analysis.load`` from the measured requests (closed loop: the warm-up and
cool-down phases are recorded in requests.csv and counted apart, in ``excluded``).
"""
from __future__ import annotations

from typing import Literal, Optional

from wotbench.rundir._model import Record
from wotbench.rundir.quantiles import quantiles

F = Optional[float]

LatencyStats = quantiles("LatencyStats", ("p50", "p90", "p99", "p999"), "_ms", min=True,
                         doc="latency of the answered (ok) requests, ms")


class ClientFairness(Record):
    """Requests per client endpoint in the measured window (clients with none count as 0)."""
    clients: int
    min: int
    max: int
    mean: float
    cv: F = None                 # stdev / mean
    jain: F = None               # Jain's index (sum x)^2 / (n sum x^2): 1 = perfectly even


class LoadExcluded(Record):
    """Closed loop: requests recorded in requests.csv but not counted (their phase)."""
    warmup: int = 0
    cooldown: int = 0


class LoadBlock(Record):
    loop: Literal["open", "closed"]
    clients: Optional[int] = None          # distinct client endpoints (null: the port pool)
    window_s: float                        # the measured window: throughput's denominator
    requests: int                          # counted requests (main GEs)
    throughput_rps: float                  # ok responses per second of the window
    timeouts: int
    timeout_share: F = None
    latency_ms: LatencyStats               # from the actual send (R)
    latency_stdev_ms: F = None
    latency_from_schedule_ms: Optional[LatencyStats] = None   # open loop only
    per_client: Optional[ClientFairness] = None
    excluded: LoadExcluded
    think: Optional[str] = None            # closed loop: the think-time distribution
    select: Optional[str] = None           # closed loop: target selection
    note: str                              # what the loop means for these latencies
    # closed loop, issue 35: request budgets and the concurrency the clients really had
    requests_per_client: Optional[int] = None   # the budget (null: none, the run's duration)
    ramp_s: Optional[float] = None               # clients' starts spread over it (null: none)
    clients_done: Optional[int] = None           # clients that used their whole budget
    realised_clients: F = None             # Jain's index x clients: equally served clients
    clients_unanswered: Optional[int] = None     # clients without an answered request
    concurrency_shortfall: Optional[str] = None  # set when realised_clients < half of clients
