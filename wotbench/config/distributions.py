"""Service-time and inter-arrival-time distributions (all values in milliseconds).

A spec is a mapping ``{dist, mean, cv?, shape?, file?}`` (contract section 5). Every
distribution is parameterised by its *mean* plus a coefficient of variation ``cv`` or a
``shape``, so that the mean the user writes is the mean they get:

============== =========================== =============================================
dist           parameters                  notes
============== =========================== =============================================
deterministic  mean                        cv 0
exponential    mean                        cv 1
uniform        mean, cv (<= 1/sqrt 3)      on [mean(1-cv*sqrt3), mean(1+cv*sqrt3)]
normal         mean, cv (< 1)              truncated at 0; the *truncated* distribution
                                           has the given mean and cv (solved numerically)
lognormal      mean, cv
gamma          mean, cv                    shape k = 1/cv^2
weibull        mean, cv                    shape k solved from cv with scipy (brentq)
pareto         mean, shape (> 1) or cv     x_m = mean (a-1)/a; cv finite only for a > 2
empirical      file [, mean]               one sample (ms) per line; with ``mean`` the
                                           samples are rescaled to that mean
============== =========================== =============================================

API: :func:`validate_spec` (problems, no exception), :func:`make_distribution`
(raises :class:`DistributionError`), and :class:`Distribution` with ``mean``, ``cv``,
``sample(rng, size)``, ``ppf(u)``, ``cdf(x)`` and ``bin_means(n)``.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Literal, Mapping, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

DISTS = ("deterministic", "exponential", "uniform", "normal", "lognormal", "gamma",
         "weibull", "pareto", "empirical")
_NEEDS_CV = ("uniform", "normal", "lognormal", "gamma", "weibull")
_SQRT3 = math.sqrt(3.0)
# weibull shape range we can solve for; cv(0.1) ~ 1.9e2, cv(200) ~ 6.4e-3
_WEIBULL_K = (0.1, 200.0)


class DistSpec(BaseModel):
    """``{dist, mean, cv?, shape?, file?}``; all values in ms (the module docstring). Here, not in
    wotbench.config.schema, so that the things: block (wotbench.config.things_spec), which that
    module imports, takes the same distributions."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    dist: Literal[DISTS] = Field(  # type: ignore[valid-type]
        description="the distribution; `normal` is truncated at 0 (the truncated distribution has "
                    "the given mean and cv)")
    mean: Optional[float] = Field(
        None, gt=0, description="mean, ms; required except for `empirical`, whose samples it "
                                "rescales to this mean")
    cv: Optional[float] = Field(
        None, ge=0, description="coefficient of variation, for uniform (≤ 1/√3), normal (< 1), "
                                "lognormal, gamma, weibull; and pareto (instead of `shape`)")
    shape: Optional[float] = Field(None, gt=0, description="pareto: shape α (> 1)")
    file: Optional[str] = Field(
        None, description="empirical: a file with one sample (ms) per line, relative to the "
                          "config file")


class DistributionError(ValueError):
    """Invalid distribution spec; ``field`` is the offending key (or '' for the spec)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def _weibull_cv(k: float) -> float:
    g1 = math.gamma(1 + 1 / k)
    return math.sqrt(math.gamma(1 + 2 / k) / g1 ** 2 - 1)


@functools.lru_cache(maxsize=64)    # a pure function of cv: every device of a group asks
def weibull_shape_for_cv(cv: float) -> float:
    """Weibull shape k whose coefficient of variation is ``cv`` (cv decreases with k)."""
    from scipy import optimize
    lo, hi = _WEIBULL_K
    return optimize.brentq(lambda k: _weibull_cv(k) - cv, lo, hi, xtol=1e-12)


@functools.lru_cache(maxsize=64)    # a root search (~8 ms): once per cv, not per device
def _truncnorm_alpha_for_cv(cv: float) -> float:
    """alpha = -mu/sigma of a normal truncated at 0 whose cv is ``cv`` (0 < cv < 1)."""
    from scipy import optimize, stats
    def cv_of(a: float) -> float:
        lam = math.exp(stats.norm.logpdf(a) - stats.norm.logsf(a))
        mean = -a + lam
        var = 1 + a * lam - lam * lam
        return math.sqrt(max(var, 0.0)) / mean
    return optimize.brentq(lambda a: cv_of(a) - cv, -60.0, 60.0, xtol=1e-12)


def validate_spec(spec: Mapping[str, Any], base_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """Check a spec; returns ``[(field, message), ...]`` (empty when valid).

    Assumes the basic types are already checked (numbers are numbers)."""
    problems: list[tuple[str, str]] = []
    dist = spec.get("dist")
    mean, cv, shape, file = (spec.get(k) for k in ("mean", "cv", "shape", "file"))
    if dist not in DISTS:
        return [("dist", f"must be one of {', '.join(DISTS)}, got {dist!r}")]
    if dist != "empirical" and mean is None:
        problems.append(("mean", f"required for {dist}"))
    if mean is not None and not mean > 0:
        problems.append(("mean", f"must be > 0, got {mean:g}"))
    if cv is not None and not cv >= 0:
        problems.append(("cv", f"must be >= 0, got {cv:g}"))
    if shape is not None and not shape > 0:
        problems.append(("shape", f"must be > 0, got {shape:g}"))
    unused = {"deterministic": ("cv", "shape", "file"), "exponential": ("cv", "shape", "file"),
              "pareto": ("file",), "empirical": ("cv", "shape")}.get(dist, ("shape", "file"))
    for key in unused:
        if spec.get(key) is not None:
            hint = " (exponential has cv 1; use gamma or weibull for another cv)" \
                if dist == "exponential" and key == "cv" else ""
            problems.append((key, f"not used by {dist}{hint}"))
    if dist in _NEEDS_CV:
        if cv is None:
            problems.append(("cv", f"required for {dist} (coefficient of variation)"))
        elif cv >= 0:
            if dist == "uniform" and cv > 1 / _SQRT3 + 1e-12:
                problems.append(("cv", f"must be <= 0.577 (1/sqrt(3)) for uniform, else samples "
                                       f"would be negative, got {cv:g}"))
            elif dist == "normal" and not 0 < cv < 1:
                problems.append(("cv", f"must be > 0 and < 1 for normal truncated at 0, got {cv:g}"))
            elif dist in ("lognormal", "gamma") and cv <= 0:
                problems.append(("cv", f"must be > 0 for {dist} (use deterministic for 0), got {cv:g}"))
            elif dist == "weibull":
                lo, hi = _weibull_cv(_WEIBULL_K[1]), _weibull_cv(_WEIBULL_K[0])
                if not lo <= cv <= hi:
                    problems.append(("cv", f"must be between {lo:.3g} and {hi:.3g} for weibull, got {cv:g}"))
    if dist == "pareto":
        if shape is None and cv is None:
            problems.append(("shape", "required for pareto (tail index > 1), or give cv"))
        elif shape is not None and cv is not None:
            problems.append(("cv", "give either shape or cv for pareto, not both"))
        elif shape is not None and 0 < shape <= 1:
            problems.append(("shape", f"must be > 1 for pareto (finite mean), got {shape:g}"))
        elif cv is not None and cv == 0:
            problems.append(("cv", "must be > 0 for pareto, got 0"))
    if dist == "empirical":
        if file is None:
            problems.append(("file", "required for empirical (one sample in ms per line)"))
        else:
            try:
                _load_samples(file, base_dir)
            except DistributionError as e:
                problems.append(("file", e.message))
    return problems


def _resolve_path(file: str | Path, base_dir: str | Path | None) -> Path:
    p = Path(file).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


def _load_samples(file: str | Path, base_dir: str | Path | None) -> np.ndarray:
    path = _resolve_path(file, base_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DistributionError("file", f"file not found: {path}") from None
    except OSError as e:
        raise DistributionError("file", f"cannot read {path}: {e.strerror}") from None
    values = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            v = float(line)
        except ValueError:
            raise DistributionError("file", f"{path}:{lineno}: {line!r} is not a number, "
                                            f"expected one sample in ms per line") from None
        if not (v >= 0 and math.isfinite(v)):
            raise DistributionError("file", f"{path}:{lineno}: sample must be >= 0, got {line}")
        values.append(v)
    if not values:
        raise DistributionError("file", f"{path}: no samples")
    arr = np.asarray(values, dtype=float)
    if arr.mean() <= 0:
        raise DistributionError("file", f"{path}: the samples' mean must be > 0")
    return arr


class Distribution:
    """A distribution of non-negative values in ms with a known mean."""

    name = "?"

    def __init__(self, mean: float, cv: float):
        self.mean = float(mean)
        self.cv = float(cv)

    def sample(self, rng: np.random.Generator, size: int | tuple = 1) -> np.ndarray:
        raise NotImplementedError

    def ppf(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def cdf(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def bin_means(self, n: int, points_per_bin: int = 4096) -> np.ndarray:
        """Conditional means E[X | X in k-th n-quantile bin], k = 0..n-1 (ascending).

        A uniform choice among these n values has *exactly* the distribution's mean, and its
        CDF is within 1/n of the target CDF everywhere (each value lies inside its bin)."""
        j = (np.arange(points_per_bin) + 0.5) / points_per_bin
        u = (np.arange(n)[:, None] + j[None, :]) / n
        means = self.ppf(u).mean(axis=1)
        # the midpoint rule underestimates the last bin of heavy tails: fix the mean exactly
        total = means.mean()
        if total > 0 and math.isfinite(self.mean):
            means = means * (self.mean / total)
        return means

    def __repr__(self) -> str:
        return f"<{self.name} mean={self.mean:g} cv={self.cv:g}>"


class Deterministic(Distribution):
    name = "deterministic"

    def __init__(self, mean: float):
        super().__init__(mean, 0.0)

    def sample(self, rng, size=1):
        return np.full(size, self.mean)

    def ppf(self, u):
        return np.full(np.shape(u), self.mean)

    def cdf(self, x):
        return (np.asarray(x) >= self.mean).astype(float)

    def bin_means(self, n, points_per_bin=0):
        return np.full(n, self.mean)


class _Scipy(Distribution):
    def __init__(self, name: str, frozen, mean: float, cv: float):
        super().__init__(mean, cv)
        self.name = name
        self.frozen = frozen

    def sample(self, rng, size=1):
        return self.frozen.rvs(size=size, random_state=rng)

    def ppf(self, u):
        return self.frozen.ppf(u)

    def cdf(self, x):
        return self.frozen.cdf(x)


class Empirical(Distribution):
    name = "empirical"

    def __init__(self, samples: np.ndarray):
        self.samples = np.sort(np.asarray(samples, dtype=float))
        m = self.samples.mean()
        super().__init__(m, float(self.samples.std() / m) if m > 0 else 0.0)

    def sample(self, rng, size=1):
        return rng.choice(self.samples, size=size, replace=True)

    def ppf(self, u):
        idx = np.clip(np.ceil(np.asarray(u) * len(self.samples)).astype(int) - 1, 0, len(self.samples) - 1)
        return self.samples[idx]

    def cdf(self, x):
        return np.searchsorted(self.samples, np.asarray(x), side="right") / len(self.samples)

    def bin_means(self, n, points_per_bin=0):
        # exact conditional means of the n equal-probability bins of the sample set
        s = self.samples
        cum = np.concatenate([[0.0], np.cumsum(s)])
        edges = np.arange(n + 1) / n * len(s)
        def partial(x):  # sum of the first x (fractional) samples
            i = np.minimum(np.floor(x).astype(int), len(s))
            frac = x - i
            nxt = s[np.minimum(i, len(s) - 1)]
            return cum[i] + frac * nxt
        return (partial(edges[1:]) - partial(edges[:-1])) / (len(s) / n)


def make_distribution(spec: Mapping[str, Any], base_dir: str | Path | None = None) -> Distribution:
    """Build a distribution from a spec (mapping or pydantic model); raises DistributionError."""
    from scipy import stats   # imported here: scipy costs ~1 s at start-up
    if hasattr(spec, "model_dump"):
        spec = spec.model_dump()
    problems = validate_spec(spec, base_dir)
    if problems:
        raise DistributionError(*problems[0])
    dist = spec["dist"]
    mean, cv, shape = spec.get("mean"), spec.get("cv"), spec.get("shape")
    if dist == "deterministic":
        return Deterministic(mean)
    if dist == "exponential":
        return _Scipy(dist, stats.expon(scale=mean), mean, 1.0)
    if dist == "uniform":
        half = mean * cv * _SQRT3
        return _Scipy(dist, stats.uniform(loc=mean - half, scale=2 * half), mean, cv)
    if dist == "normal":
        alpha = _truncnorm_alpha_for_cv(cv)
        lam = math.exp(stats.norm.logpdf(alpha) - stats.norm.logsf(alpha))
        sigma = mean / (-alpha + lam)
        mu = -alpha * sigma
        return _Scipy(dist, stats.truncnorm(a=alpha, b=np.inf, loc=mu, scale=sigma), mean, cv)
    if dist == "lognormal":
        s2 = math.log1p(cv * cv)
        return _Scipy(dist, stats.lognorm(s=math.sqrt(s2), scale=mean * math.exp(-s2 / 2)), mean, cv)
    if dist == "gamma":
        k = 1.0 / (cv * cv)
        return _Scipy(dist, stats.gamma(a=k, scale=mean / k), mean, cv)
    if dist == "weibull":
        k = weibull_shape_for_cv(cv)
        return _Scipy(dist, stats.weibull_min(c=k, scale=mean / math.gamma(1 + 1 / k)), mean, cv)
    if dist == "pareto":
        a = shape if shape is not None else 1 + math.sqrt(1 + 1 / (cv * cv))
        xm = mean * (a - 1) / a
        pcv = 1 / math.sqrt(a * (a - 2)) if a > 2 else math.inf
        return _Scipy(dist, stats.pareto(b=a, scale=xm), mean, pcv)
    if dist == "empirical":
        samples = _load_samples(spec["file"], base_dir)
        if mean is not None:
            samples = samples * (mean / samples.mean())
        return Empirical(samples)
    raise DistributionError("dist", f"unknown distribution {dist!r}")  # pragma: no cover
