"""Strict, fast reading of the project's CSV contracts (docs/CONTRACTS.md §1-§4): the header is
checked, the file parsed with explicit dtypes (pandas' C parser), and when that fails (or a value
breaks its column's rule) the file is rescanned line by line to name every bad line (up to
``MAX_LISTED``): ``FILE:LINE: column X: 'v' is not an integer, expected an integer``. Used for the
inputs (trace and resource files) and by the analysis for what the programs wrote."""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from wotbench.errors import ConfigError, WotbenchError

MAX_LISTED = 20      # bad lines named in one message; the scan stops there


@dataclass(frozen=True)
class IntRange:
    """Column kind: a required integer in ``lo..hi``."""
    lo: int
    hi: int


@dataclass(frozen=True)
class Text:
    """Column kind: a value checked by ``problem(value)`` (None when fine, else what is wrong)."""
    problem: Callable[[str], Optional[str]]
    expected: str


# Column kinds: "int" (required integer), "int?" (integer or empty), "str", "str?", a tuple of
# allowed values, IntRange or Text.
def _pandas_dtypes(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col, kind in spec.items():
        if kind == "int" or isinstance(kind, IntRange):
            out[col] = np.int64
        elif kind == "int?":
            out[col] = np.float64  # empty -> NaN; ns values < 2**53 stay exact
        else:
            out[col] = "category"
    return out


def _check_value(kind: Any, value: str) -> str | None:
    """Return a problem description for one field, or None when it is fine."""
    if isinstance(kind, tuple):
        return None if value in kind else f"'{value}' is not one of {'|'.join(kind)}"
    if isinstance(kind, Text):
        return kind.problem(value)
    if kind in ("int", "int?") or isinstance(kind, IntRange):
        if value == "" and kind == "int?":
            return None
        try:
            v = int(value)
        except ValueError:
            return f"'{value}' is not an integer"
        if isinstance(kind, IntRange) and not kind.lo <= v <= kind.hi:
            return f"{v} is out of range"
        return None
    if kind == "str" and value == "":
        return "empty value"
    return None


def _describe(kind: Any) -> str:
    if isinstance(kind, tuple):
        return "|".join(kind)
    if isinstance(kind, IntRange):
        return f"an integer {kind.lo}..{kind.hi}"
    if isinstance(kind, Text):
        return kind.expected
    return {"int": "an integer", "int?": "an integer or empty", "str": "a non-empty value",
            "str?": "a value"}[kind]


def find_problems(path: Path, spec: dict[str, Any], unique: tuple[str, ...] = (),
                  limit: int = MAX_LISTED) -> list[str]:
    """Slow path: every malformed line of a CSV file (the first problem of each), up to ``limit``
    lines; ``unique`` columns must not repeat a value."""
    problems: list[str] = []
    seen: dict[str, dict[str, int]] = {c: {} for c in unique}
    with open(path, newline="", errors="replace") as fh:   # a bad byte shows as \ufffd
        reader = csv.reader(fh)
        header = next(reader, None) or []
        for row in reader:
            if not row:
                continue
            problem = _row_problem(row, header, spec, seen, reader.line_num)
            if problem is None:
                continue
            if len(problems) == limit:
                problems.append(f"{path}: more bad lines follow (the check stops after {limit})")
                break
            problems.append(f"{path}:{reader.line_num}: {problem}")
    return problems or [f"{path}: could not be parsed as CSV with header {','.join(spec)}"]


def _row_problem(row: list[str], header: list[str], spec: dict[str, Any],
                 seen: dict[str, dict[str, int]], lineno: int) -> str | None:
    if len(row) != len(header):
        return f"{len(row)} fields, expected {len(header)} ({','.join(header)})"
    rec = dict(zip(header, row))
    for col, kind in spec.items():
        problem = _check_value(kind, rec.get(col, ""))
        if problem:
            return f"column {col}: {problem}, expected {_describe(kind)}"
    for col, first in seen.items():
        value = rec.get(col, "")
        if value in first:
            return f"column {col}: {value!r} repeats line {first[value]}, expected each {col} once"
        first[value] = lineno
    return None


def _failed(error: type[WotbenchError], problems: list[str]) -> WotbenchError:
    """``error`` carrying every problem: a ConfigError keeps them as its list."""
    if issubclass(error, ConfigError):
        return error(problems)
    return error("\n".join(problems))


def _values_break_rules(df: pd.DataFrame, spec: dict[str, Any], unique: tuple[str, ...]) -> bool:
    """Whether a parsed column holds a value its kind forbids (the parse itself does not see it)."""
    for col, kind in spec.items():
        values = df[col]
        if kind == "str" and values.isna().any():
            return True
        if isinstance(kind, tuple) and not values.isin(kind).all():
            return True
        if isinstance(kind, IntRange) and not values.between(kind.lo, kind.hi).all():
            return True
        if isinstance(kind, Text) and any(kind.problem("" if pd.isna(v) else str(v))
                                          for v in values.unique()):
            return True
    return any(df[col].duplicated().any() for col in unique)


def read_csv_checked(path: Path, spec: dict[str, Any], what: str,
                     error: type[WotbenchError] = ConfigError,
                     unique: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read ``path`` with the columns in ``spec`` (``unique``: columns whose values must not
    repeat); raise ``error`` (exit 2) naming the file and, for malformed values, every bad line:
    ``FILE:LINE: column X: 'v' is not an integer``."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {what} is missing")
    try:
        with open(path, newline="") as fh:
            first = fh.readline()
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from exc
    header = [h.strip() for h in first.strip().split(",")] if first.strip() else []
    missing = [c for c in spec if c not in header]
    if missing:
        raise error(f"{path}:1: header lacks {', '.join(missing)}, expected "
                            f"{','.join(spec)} (got '{first.strip()}')")
    try:
        df = pd.read_csv(path, dtype=_pandas_dtypes(spec), usecols=list(spec), engine="c",
                         skip_blank_lines=True)
    except (ValueError, TypeError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise _failed(error, find_problems(path, spec, unique)) from exc
    if _values_break_rules(df, spec, unique):
        raise _failed(error, find_problems(path, spec, unique))
    return df


def read_optional_csv(path: Path) -> pd.DataFrame | None:
    """A CSV file that may be absent (optional monitor data, series): None when it is missing,
    unreadable or has no rows."""
    if not Path(path).is_file():
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return None
    return df if len(df) else None
