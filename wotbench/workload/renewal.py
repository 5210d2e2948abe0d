"""Arrival times of independent renewal processes (the trace generator's request arrivals)."""
from __future__ import annotations

import math

import numpy as np


def _columns(dist, duration_ms: float) -> int:
    """Intervals drawn per process at once: the expected count plus six standard deviations."""
    n_exp = duration_ms / dist.mean
    return max(4, int(n_exp + 6 * math.sqrt(n_exp) + 10))


def _times(dist, rng: np.random.Generator, x: np.ndarray, duration_ms: float) -> list[np.ndarray]:
    """The arrival times (< duration) from the intervals ``x`` (one row per process)."""
    count, k = x.shape
    t = np.cumsum(x, axis=1)
    while (t[:, -1] < duration_ms).any():  # rare: extend rows that fell short
        more = np.asarray(dist.sample(rng, (count, k)), dtype=float)
        t = np.concatenate([t, t[:, -1:] + np.cumsum(more, axis=1)], axis=1)
    return [row[row < duration_ms] for row in t]


def arrivals(dist, rng: np.random.Generator, count: int, duration_ms: float) -> list[np.ndarray]:
    """Arrival times (ms, < duration) of ``count`` independent renewal processes."""
    x = np.asarray(dist.sample(rng, (count, _columns(dist, duration_ms))), dtype=float)
    x[:, 0] *= rng.random(count)          # random phase
    return _times(dist, rng, x, duration_ms)


def stationary_arrivals(dist, rng: np.random.Generator, count: int, duration_ms: float
                        ) -> list[np.ndarray]:
    """As :func:`arrivals`, but each process observed in its steady state: the first arrival
    is the forward recurrence time U * X* (X* length-biased: drawn with probability
    proportional to its value), so the expected count over any window is window / mean even
    when the mean is as long as the test (a Thing read every 30 s in a 30 s test). With a plain
    X1, U * X1 has half X's mean and such a test holds up to 1.5 times too many requests."""
    pool = np.asarray(dist.sample(rng, max(8 * count, 64)), dtype=float)
    first = (rng.choice(pool, size=count, p=pool / pool.sum()) if pool.sum() > 0
             else np.zeros(count)) * rng.random(count)
    x = np.asarray(dist.sample(rng, (count, _columns(dist, duration_ms))), dtype=float)
    x[:, 0] = first
    return _times(dist, rng, x, duration_ms)
