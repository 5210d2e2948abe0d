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


def stationary_arrivals(dist, rng: np.random.Generator, count: int, duration_ms: float
                        ) -> list[np.ndarray]:
    """As :func:`arrivals`, but each process observed in its steady state: the first arrival
    is the forward recurrence time U * X* (X* length-biased: drawn with probability
    proportional to its value), so the expected count over any window is window / mean even
    when the mean is as long as the test (a Thing read every 30 s in a 30 s test). With a plain
    X1, U * X1 has half X's mean and such a test holds up to 1.5 times too many requests."""
    pool = np.asarray(dist.sample(rng, max(8 * count, 64)), dtype=float)
    if pool.sum() > 0:
        first = rng.choice(pool, size=count, p=pool / pool.sum())
    else:
        first = np.zeros(count)
    first = first * rng.random(count)
    n_exp = duration_ms / dist.mean
    k = max(4, int(n_exp + 6 * math.sqrt(n_exp) + 10))
    x = np.asarray(dist.sample(rng, (count, k)), dtype=float)
    x[:, 0] = first
    t = np.cumsum(x, axis=1)
    while (t[:, -1] < duration_ms).any():
        more = np.asarray(dist.sample(rng, (count, k)), dtype=float)
        t = np.concatenate([t, t[:, -1:] + np.cumsum(more, axis=1)], axis=1)
    return [row[row < duration_ms] for row in t]
