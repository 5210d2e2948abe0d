"""How many of the run's gateway emulators a cell runs: its part of ``gateways.count``.

``gateways.count`` is the run's number of main GEs; on one host they share the trace (device id
mod count, :mod:`wotbench.workload.generate`). A cell used to run all of them for its share,
so 10^6 devices on 4 emulated nodes ran 4 x 17 GEs where the run needed 17 (docs/FLEET.md,
"On the emulated cluster"). A cell now runs the run's count times the larger of its share of
the GEs' endpoints (the devices the trace sends requests to) and of the request rate, rounded
up, at least 1 and at most the run's count: none of its GEs addresses more endpoints or is sent
more requests than one of the run's GEs on one host (up to how the share's ids fall mod its
count). The cell runs with that count (:func:`with_gateways`), so its trace is split over its own
GEs by each device's rank among the share's ids mod its count (:mod:`wotbench.workload.ge_share`;
not id mod count, which the split's round robin makes equal for a whole share): every device of
the share is driven by exactly one GE of its cell, the GEs about equally.
"""
from __future__ import annotations

import math

from wotbench.config.schema import Config


def cell_gateways(count: int, endpoints: int, all_endpoints: int, rate: float,
                  all_rate: float) -> int:
    """The GEs of a cell whose share has ``endpoints`` of the run's ``all_endpoints`` and
    ``rate`` of its ``all_rate`` requests/s, in a run of ``count`` GEs."""
    part = max(endpoints / all_endpoints if all_endpoints > 0 else 0.0,
               rate / all_rate if all_rate > 0 else 0.0)
    # (a float product such as 17 * (250 000 / 10^6) is not rounded up past a whole number)
    return max(1, min(count, math.ceil(round(count * part, 9))))


def with_gateways(cfg: Config, count: int) -> Config:
    """``cfg`` with ``gateways.count`` = ``count`` (a copy; the file it came from is kept)."""
    out = cfg.model_copy(update={"gateways": cfg.gateways.model_copy(update={"count": count})})
    out._source = cfg._source
    return out
