"""``summary.json`` ``fleet``: how faithful the wot-fleet engines were (issue 29, "fidelity stays
measured"); null when no device ran in an engine. Built by ``wotbench.analysis.fleet`` from the
engines' logs (docs/CONTRACTS.md §3b), per engine and event loop, over the test and per window
of the contention grid:

- ``read_lag``   = arrival_ns - arrival_kernel_ns: how long a request sat in its socket after
  the kernel stamped it, before the loop read it (the loop was busy elsewhere);
- ``timer_late`` = end_ns - due_ns of sleep-mode service: how late the loop's timer ended the
  service (S was emulated as S + timer_late);
- ``busy_over``  = end_ns - due_ns of busy-mode service: how much longer the CPU work took than
  S (a worker waited for its core);
- ``queueing``   = start_ns - arrival_ns: the wait for one of the device's own service slots,
  the emulated device's queueing (the system's, as a thread pool's queue is in a wot-device).

The first three are the testbed's distortion; the evidence rule ``loop_lag``
(``cd_module.evidence``) flags a window where a loop's requests were later than
``evidence.params.loop_lag_ms`` (read lag or timer lateness) more often than the GE rule allows.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from wotbench.rundir._model import Record
from wotbench.rundir.fleet_files import FleetLoop
from wotbench.rundir.quantiles import quantiles

EngineLag = quantiles("EngineLag", ("p50", "p99", "p999"), "_us",
                      doc="one lag of an engine loop's requests, µs (numpy linear quantiles)")


class LoopFidelity(Record):
    """One event loop of one engine, over the test."""
    loop: int
    requests: int                       # its log rows that arrived in the test
    read_lag: EngineLag
    timer_late: EngineLag               # sleep-mode service only
    busy_over: EngineLag                # busy-mode service only
    queueing: EngineLag
    late_share: Optional[float] = None  # rows later than the limit (read lag or timer late)
    windows_flagged: list[int] = Field(default_factory=list)   # evidence windows loop_lag fired in
    engine: Optional[FleetLoop] = None  # what the engine reported itself (fleet-summary.json)


class EngineFidelity(Record):
    """One engine (a component hosting many devices)."""
    name: str
    devices: int                        # devices it hosted (fleet-devices.csv / its input)
    loops: Optional[int] = None         # from fleet-summary.json (None: the engine wrote none)
    workers: Optional[int] = None
    log_entries: int                    # rows over its loops' logs
    log_dropped: Optional[int] = None
    rss_bytes: Optional[int] = None
    rss_per_device_bytes: Optional[float] = None
    # 5.03 answers because a loop's job pool was empty: the engine's limit, not the device's
    # queue (the loss block still counts them as refused_503; the warnings say how many)
    pool_503: Optional[int] = None
    per_loop: list[LoopFidelity] = Field(default_factory=list)


class FleetBlock(Record):
    definition: str
    loop_lag_ms: float                  # the limit the evidence rule uses (EvidenceParams)
    engines: list[EngineFidelity] = Field(default_factory=list)
    behind: bool = False                # some loop's window was flagged by loop_lag
