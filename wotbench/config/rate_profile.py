"""Rate profiles of generated workloads (issue 35): ``devices[].rate_profile``, a device's
request rate over the test instead of the one steady rate of its ``rit``.

Shapes (rates in requests per second per device):

- ``steps``: ``rates: [1, 10, 100, 500]`` each held ``step_s`` seconds, the last to the end;
- ``ramp``: from ``start`` to ``end`` linearly over ``ramp_s`` (null: the whole test), then held;
- ``burst``: ``base`` with ``peak`` for ``length_s`` every ``every_s`` (the first burst at
  ``every_s``);
- ``sine``: ``mean + amplitude * sin(2 pi t / period_s)`` (amplitude below mean).

The group's ``rit`` keeps its shape (exponential: a non-homogeneous Poisson process;
deterministic: evenly spaced at the current rate): arrivals are its renewal process in
operational time, mapped back through the profile's cumulative rate
(:mod:`wotbench.workload.rate_profile`). Schema and the rate function only.
"""
from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

MIN_RATE = 0.001   # req/s: the cumulative rate must keep rising to be inverted
MAX_RATE = 1e6

_KEYS = {"steps": ("rates", "step_s"), "ramp": ("start", "end"),
         "burst": ("base", "peak", "every_s", "length_s"),
         "sine": ("mean", "amplitude", "period_s")}
_OPTIONAL = {"ramp": ("ramp_s",)}


class RateProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    shape: Literal["steps", "ramp", "burst", "sine"] = Field(
        description="steps | ramp | burst | sine (wotbench.config.rate_profile)")
    rates: Optional[list[float]] = Field(None, min_length=1, description="steps: req/s per device")
    step_s: Optional[float] = Field(None, gt=0, description="steps: how long each rate holds")
    start: Optional[float] = Field(None, description="ramp: req/s at the start")
    end: Optional[float] = Field(None, description="ramp: req/s at its end")
    ramp_s: Optional[float] = Field(None, gt=0, description="ramp: its length (null: the test)")
    base: Optional[float] = Field(None, description="burst: req/s between bursts")
    peak: Optional[float] = Field(None, description="burst: req/s in a burst")
    every_s: Optional[float] = Field(None, gt=0, description="burst: period of the bursts")
    length_s: Optional[float] = Field(None, gt=0, description="burst: length of each")
    mean: Optional[float] = Field(None, description="sine: mean req/s")
    amplitude: Optional[float] = Field(None, ge=0, description="sine: amplitude, below mean")
    period_s: Optional[float] = Field(None, gt=0, description="sine: period")

    @model_validator(mode="after")
    def _keys(self) -> "RateProfile":
        need = _KEYS[self.shape]
        allowed = set(need) | set(_OPTIONAL.get(self.shape, ())) | {"shape"}
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"shape {self.shape} needs {', '.join(need)}; {missing[0]} is "
                             "missing")
        extra = [k for k in type(self).model_fields if k not in allowed
                 and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"{extra[0]} is not a key of shape {self.shape}, expected "
                             f"{', '.join(sorted(allowed - {'shape'}))}")
        rates = {"steps": self.rates or [], "ramp": [self.start, self.end],
                 "burst": [self.base, self.peak],
                 "sine": [(self.mean or 0) - (self.amplitude or 0),
                          (self.mean or 0) + (self.amplitude or 0)]}[self.shape]
        bad = [r for r in rates if not MIN_RATE <= r <= MAX_RATE]
        if bad:
            what = "mean - amplitude" if self.shape == "sine" else "every rate"
            raise ValueError(f"{what} must be {MIN_RATE:g}..{MAX_RATE:g} req/s per device, got "
                             f"{bad[0]:g} (a rate of 0 cannot be scheduled: use a small one)")
        if self.shape == "burst" and self.length_s >= self.every_s:
            raise ValueError(f"burst length_s {self.length_s:g} must be below every_s "
                             f"{self.every_s:g}")
        return self

    def rate(self, t_s: np.ndarray, duration_s: float) -> np.ndarray:
        """req/s per device at the instants t_s (seconds from the test start)."""
        t = np.asarray(t_s, dtype=float)
        if self.shape == "steps":
            k = np.minimum((t // self.step_s).astype(np.int64), len(self.rates) - 1)
            return np.asarray(self.rates, dtype=float)[np.maximum(k, 0)]
        if self.shape == "ramp":
            span = self.ramp_s or duration_s
            return self.start + (self.end - self.start) * np.clip(t / span, 0.0, 1.0)
        if self.shape == "burst":
            phase = np.mod(t, self.every_s)
            in_burst = (t >= self.every_s) & (phase < self.length_s)
            return np.where(in_burst, self.peak, self.base)
        return self.mean + self.amplitude * np.sin(2 * np.pi * t / self.period_s)

    def mean_rate(self, duration_s: float) -> float:
        """The profile's mean req/s per device over the test (for the trace's summary)."""
        t = np.linspace(0.0, duration_s, 100_001)
        return float(self.rate(t, duration_s).mean())
