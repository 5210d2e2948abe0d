"""Cumulative counters of a component whose processes were replaced (a SUT ``restart`` fault,
a container restarted): the new process counts CPU and run-queue wait from 0 again, so the
series drops. :func:`monotone` carries the old total across each drop, so interpolating and
differencing the series gives the time used in each interval instead of a negative value (the
old process's last moments after its last sample are not in the data; nothing is made up)."""
from __future__ import annotations

import numpy as np


def monotone(cum: np.ndarray) -> np.ndarray:
    """``cum`` (samples in time order, NaN = not read) with every drop turned into a restart
    from the last value before it."""
    out = np.asarray(cum, np.float64).copy()
    known = np.flatnonzero(np.isfinite(out))
    if len(known) < 2:
        return out
    v = out[known]
    prev = np.concatenate(([v[0]], v[:-1]))
    offset = np.cumsum(np.where(v < prev, prev, 0.0))
    out[known] = v + offset
    return out
