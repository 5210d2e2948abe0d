"""How every number looks in WoTbench's reports (the run report, the sweep and capacity
report, the validation table): one place, like wrk2's units.c. A missing value is "–"."""
from __future__ import annotations

from typing import Any

MISSING = "–"


def number(v: Any, digits: int = 1, unit: str = "") -> str:
    """``1,234.5 ms``; a value that is not a number is shown as it is."""
    if v is None:
        return MISSING
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f:  # NaN
        return MISSING
    s = f"{f:,.{digits}f}"
    return f"{s} {unit}".rstrip() if unit else s


def ms(v: Any, digits: int = 1) -> str:
    """Milliseconds; below 1 ms three decimals (µs resolution) unless digits are given."""
    if v is not None and digits == 1:
        try:
            if abs(float(v)) < 1:
                digits = 3
        except (TypeError, ValueError):
            pass
    return number(v, digits, "ms")


def pct(v: Any, digits: int = 1) -> str:
    """A share (0..1) as ``12.5 %``; tiny non-zero shares as ``<0.1 %``."""
    if v is None:
        return MISSING
    try:
        f = float(v) * 100
    except (TypeError, ValueError):
        return str(v)
    if 0 < f < 0.1:
        return "<0.1 %"
    return f"{f:.{digits}f} %"


def rate(v: Any, digits: int = 1) -> str:
    return number(v, digits, "req/s")


def count(v: Any) -> str:
    return number(v, 0)


def secs(v: Any, digits: int = 1) -> str:
    return number(v, digits, "s")


def sci(v: Any, digits: int = 1) -> str:
    """Scientific notation for values spanning decades (p-values): ``3.2e-05``."""
    return MISSING if v is None else f"{float(v):.{digits}e}"


def cell(v: Any, digits: int = 2) -> str:
    """A table cell of mixed facts: yes/no, integers as they are, floats fixed-point."""
    if v is None:
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


FILTERS = {"ms": ms, "pct": pct, "num": number, "rate": rate, "count": count, "secs": secs,
           "sci": sci, "cell": cell}


def jinja_env(package: str):
    """A Jinja2 environment over ``<package>/templates`` with the formatters as filters."""
    from jinja2 import Environment, PackageLoader, select_autoescape
    env = Environment(loader=PackageLoader(package, "templates"),
                      autoescape=select_autoescape(["html", "j2"], default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env
