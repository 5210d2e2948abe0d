"""One type for every percentile family of the run directory's JSON files.

A family is the statistics of one sample: how many values (``count``, or ``n``), their mean,
some quantiles (numpy's linear interpolation), the largest and sometimes the smallest value,
each key carrying the family's unit suffix (``p99_ms``, ``p50_us``, ``p99``). The families
differ only in which quantiles they report, in their unit, and in where the count and mean
stand, so :func:`quantiles` makes each of them from one description; every family is a
:class:`Quantiles` and keeps the JSON keys (and their order) it always had::

    RtStats = quantiles("RtStats", ("p50", "p90", "p95", "p99", "p999"), unit="_ms")
    # {"count", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"}

A statistic without data is None (JSON null); a family read from a C program's file may
declare its values required (``required=True``): that file always writes numbers.
"""
from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional

from pydantic import create_model

from wotbench.rundir._model import Record


class Quantiles(Record):
    """Base of every percentile family (see :func:`quantiles`); the class variables describe
    the family, so code that fills one (``wotbench.analysis.stats``) needs no copy of it."""

    QS: ClassVar[dict[str, float]] = {}   # key stem -> quantile, in the family's order
    UNIT: ClassVar[str] = ""               # the key suffix of every value ("_ms", "_us", "")
    COUNT: ClassVar[Optional[str]] = None  # "count", "n" or None (not reported)
    MEAN: ClassVar[bool] = False
    MAX: ClassVar[bool] = False
    MIN: ClassVar[bool] = False

    def value(self, stem: str) -> Optional[float]:
        """A statistic by its stem (``"p99"``, ``"max"``), whatever the family's unit."""
        return getattr(self, stem + self.UNIT)


_Q = {"p5": 0.05, "p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def quantiles(name: str, qs: tuple[str, ...], unit: str = "", *,
              count: Optional[Literal["count", "n"]] = "count", mean: bool = True,
              max: bool = True, min: bool = False, tail: bool = False, required: bool = False,
              doc: str = "") -> type[Quantiles]:
    """A :class:`Quantiles` family named ``name``: ``count`` first, then ``mean``, the
    quantiles ``qs`` and ``max``/``min`` (``tail``: the quantiles first, then mean, max and
    the count last, the layout of the observe, block-wise and DTLS blocks)."""
    value: Any = (float, ...) if required else (Optional[float], None)
    stats: dict[str, Any] = {f"{q}{unit}": value for q in qs}
    head: dict[str, Any] = {}
    if mean:
        head[f"mean{unit}"] = value
    tailf: dict[str, Any] = {}
    if max:
        tailf[f"max{unit}"] = value
    if min:
        tailf[f"min{unit}"] = value
    n: dict[str, Any] = {count: (int, ...) if required else (int, 0)} if count else {}
    fields = ({**stats, **head, **tailf, **n} if tail else {**n, **head, **stats, **tailf})
    model = create_model(name, __base__=Quantiles, __module__=__name__, __doc__=doc or None,
                         **fields)
    model.QS = {q: _Q[q] for q in qs}
    model.UNIT, model.COUNT, model.MEAN, model.MAX, model.MIN = unit, count, mean, max, min
    return model
