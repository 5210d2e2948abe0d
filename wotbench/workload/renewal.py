"""Arrival times of independent renewal processes (the trace generator's request arrivals)."""
from __future__ import annotations

import math

import numpy as np


def arrivals(dist, rng: np.random.Generator, count: int, duration_ms: float) -> list[np.ndarray]:
    """Arrival times (ms, < duration) of ``count`` independent renewal processes."""
    n_exp = duration_ms / dist.mean
    k = max(4, int(n_exp + 6 * math.sqrt(n_exp) + 10))
    x = np.asarray(dist.sample(rng, (count, k)), dtype=float)
    x[:, 0] *= rng.random(count)          # random phase
    t = np.cumsum(x, axis=1)
    while (t[:, -1] < duration_ms).any():  # rare: extend rows that fell short
        more = np.asarray(dist.sample(rng, (count, k)), dtype=float)
        t = np.concatenate([t, t[:, -1:] + np.cumsum(more, axis=1)], axis=1)
    return [row[row < duration_ms] for row in t]
