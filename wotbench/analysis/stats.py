"""Vectorised statistics helpers shared by the analysis modules."""
from __future__ import annotations

from typing import Any, Sequence, TypeVar

import numpy as np

from wotbench.rundir.quantiles import Quantiles
from wotbench.rundir.values import fnum

# quantiles reported for response times: key suffix -> q
RT_QUANTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99,
                                  "p999": 0.999}


def grouped_stats(codes: np.ndarray, values: np.ndarray, n_groups: int,
                  qs: Sequence[float]) -> dict[str, np.ndarray]:
    """Count, mean, quantiles (numpy 'linear' method) and max of ``values`` per group code.

    ``codes`` are integers 0..n_groups-1. NaN values must be removed by the caller. One lexsort,
    so 10^6 values take well under a second.
    """
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    counts = np.bincount(codes, minlength=n_groups).astype(np.int64)
    out: dict[str, np.ndarray] = {"count": counts}
    quant = np.full((n_groups, len(qs)), np.nan)
    mean = np.full(n_groups, np.nan)
    vmax = np.full(n_groups, np.nan)
    if len(values):
        v = _sort_by_group(codes, values, n_groups)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        ok = counts > 0
        s, c = starts[ok], counts[ok]
        for j, q in enumerate(qs):
            pos = s + q * (c - 1)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, s + c - 1)
            frac = pos - lo
            quant[ok, j] = v[lo] + (v[hi] - v[lo]) * frac
        sums = np.bincount(codes, weights=values, minlength=n_groups)
        mean[ok] = sums[ok] / c
        vmax[ok] = v[s + c - 1]
    out["mean"] = mean
    out["quantiles"] = quant
    out["max"] = vmax
    return out


def _sort_by_group(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """``values`` sorted by (group code, value): a float sort, then a stable (radix) sort of the
    small integer codes — several times faster than np.lexsort on 10^6 rows."""
    order = np.argsort(values)
    if n_groups == 1:
        return values[order]
    small = codes[order].astype(np.int16 if n_groups < 2**15 else np.int64)
    return values[order[np.argsort(small, kind="stable")]]


def row_stats(g: dict[str, np.ndarray], i: int, qs: dict[str, float] = RT_QUANTILES,
              unit: str = "_ms") -> dict[str, Any]:
    """Group ``i`` of a :func:`grouped_stats` result as a JSON-ready dict."""
    res: dict[str, Any] = {"count": int(g["count"][i]), f"mean{unit}": fnum(g["mean"][i])}
    for j, k in enumerate(qs):
        res[f"{k}{unit}"] = fnum(g["quantiles"][i, j])
    res[f"max{unit}"] = fnum(g["max"][i])
    return res


Q = TypeVar("Q", bound=Quantiles)


def quantiles_of(family: type[Q], v: np.ndarray) -> Q:
    """The :class:`~wotbench.rundir.quantiles.Quantiles` ``family`` of the values ``v`` (NaN
    dropped): each quantile by ``np.quantile`` (linear), mean, max, min and the count, as the
    family reports them; None for each statistic without data."""
    v = np.asarray(v, dtype=np.float64)
    v = v[~np.isnan(v)]
    u, has = family.UNIT, len(v) > 0
    out: dict[str, Any] = {f"{k}{u}": (fnum(float(np.quantile(v, q))) if has else None)
                           for k, q in family.QS.items()}
    if family.MEAN:
        out[f"mean{u}"] = fnum(float(v.mean())) if has else None
    if family.MAX:
        out[f"max{u}"] = fnum(float(v.max())) if has else None
    if family.MIN:
        out[f"min{u}"] = fnum(float(v.min())) if has else None
    if family.COUNT:
        out[family.COUNT] = int(len(v))
    return family(**out)




def ks_distance(a: np.ndarray, b: np.ndarray, tol: float = 0.0) -> float:
    """Two-sample Kolmogorov-Smirnov distance, optionally with a horizontal tolerance.

    With ``tol`` > 0 this is sup_x max(F_b(x - tol) - F_a(x), F_a(x - tol) - F_b(x), 0): the
    largest vertical gap left after either CDF may be shifted by up to ``tol`` towards the other.
    ``tol`` = 0 gives the classic KS statistic. Returns NaN if either sample is empty.
    """
    a = np.sort(np.asarray(a, dtype=np.float64))
    b = np.sort(np.asarray(b, dtype=np.float64))
    if len(a) == 0 or len(b) == 0:
        return float("nan")

    def one_side(f: np.ndarray, g: np.ndarray) -> float:
        # sup_x F_f(x - tol) - F_g(x); attained at the jumps x = f_i + tol of the first term.
        ff = np.searchsorted(f, f, side="right") / len(f)
        gg = np.searchsorted(g, f + tol, side="right") / len(g)
        return float(np.max(ff - gg))

    return max(0.0, one_side(a, b), one_side(b, a))


def cdf_points(values: np.ndarray, n: int = 201) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, quantile values) on an even probability grid: a compact CDF for plots."""
    p = np.linspace(0.0, 1.0, n)
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return p, np.full(n, np.nan)
    return p, np.quantile(values, p)
