"""Arrivals under a rate profile (``devices[].rate_profile``, :mod:`wotbench.config.rate_profile`):
a renewal process with the group's RIT distribution in *operational time*, mapped back to real
time through the profile's cumulative rate Λ(t) = ∫ rate. With an exponential RIT this is the
standard construction of a non-homogeneous Poisson process (time change); with a deterministic
one the requests are evenly spaced at the current rate.

Λ is integrated on a grid of at most 1 ms (trapezoids), exact for the steps (their edges fall on
the grid when step_s is a whole number of ms) and within the grid's error for ramps and sines.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

MAX_GRID = 4_000_001


def cumulative(profile, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(t in ms, Λ(t) in expected arrivals) on the grid."""
    n = int(min(MAX_GRID, max(2, round(duration_s * 1000) + 1)))
    t_ms = np.linspace(0.0, duration_s * 1000.0, n)
    r = profile.rate(t_ms / 1000.0, duration_s)
    if profile.shape in ("steps", "burst"):   # piecewise constant: left-point rule is exact
        lam = np.concatenate([[0.0], np.cumsum(r[:-1] * np.diff(t_ms) / 1000.0)])
    else:
        lam = np.concatenate([[0.0], np.cumsum((r[1:] + r[:-1]) / 2 * np.diff(t_ms) / 1000.0)])
    return t_ms, lam


def profiled_arrivals(profile, dist, rng: np.random.Generator, count: int, duration_ms: float,
                      arrivals: Callable) -> list[np.ndarray]:
    """Arrival times (ms, < duration) of ``count`` devices under ``profile``; ``arrivals`` is the
    steady generator (``generate._arrivals``) used in operational time, where the RIT keeps its
    own mean: τ = Λ(t) x mean RIT."""
    t_ms, lam = cumulative(profile, duration_ms / 1000.0)
    tau = lam * dist.mean
    rows = arrivals(dist, rng, count, float(tau[-1]))
    return [np.interp(row, tau, t_ms) for row in rows]
