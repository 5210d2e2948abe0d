"""Read a run directory (docs/CONTRACTS.md §1-§4) into pandas DataFrames.

All readers validate the header, parse with explicit dtypes (fast C parser) and, when the fast
parse fails, rescan the file line by line to name the first bad line: ``FILE:LINE: problem``.
Missing or malformed required files raise :class:`AnalysisError` (exit code 2).
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import AnalysisError

OUTCOMES = ("ok", "error", "timeout", "reset", "unsent")
METHODS = ("GET", "PUT", "POST", "DELETE")

# column kinds: "int" (required integer), "int?" (integer or empty), "str", "str?", or a tuple of
# allowed values.
REQUESTS_COLUMNS = {
    "index": "int", "device": "int", "method": "str", "path": "str?",
    "scheduled_ns": "int", "sent_ns": "int?", "received_ns": "int?", "code": "str?",
    "outcome": OUTCOMES, "retransmissions": "int?",
}
DEVICE_LOG_COLUMNS = {
    "arrival_ns": "int", "start_ns": "int", "end_ns": "int", "path": "str?", "method": "str?",
    "code": "str?",
}
RESOURCE_COLUMNS = {
    "path": "str", "service_time_us": "int", "mode": ("sleep", "busy"), "payload_bytes": "int",
}


def _pandas_dtypes(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col, kind in spec.items():
        if kind == "int":
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
    if kind in ("int", "int?"):
        if value == "" and kind == "int?":
            return None
        try:
            int(value)
        except ValueError:
            return f"'{value}' is not an integer"
        return None
    if kind == "str" and value == "":
        return "empty value"
    return None


def _locate_problem(path: Path, spec: dict[str, Any]) -> str:
    """Slow path: find the first malformed line of a CSV file."""
    cols = list(spec)
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        for lineno, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header or []):
                return (f"{path}:{lineno}: {len(row)} fields, expected {len(header or [])} "
                        f"({','.join(header or [])})")
            rec = dict(zip(header or [], row))
            for col in cols:
                problem = _check_value(spec[col], rec.get(col, ""))
                if problem:
                    return f"{path}:{lineno}: column {col}: {problem}, expected {_describe(spec[col])}"
    return f"{path}: could not be parsed as CSV with header {','.join(cols)}"


def _describe(kind: Any) -> str:
    if isinstance(kind, tuple):
        return "|".join(kind)
    return {"int": "an integer", "int?": "an integer or empty", "str": "a non-empty value",
            "str?": "a value"}[kind]


def read_csv_checked(path: Path, spec: dict[str, Any], what: str) -> pd.DataFrame:
    """Read ``path`` with the columns in ``spec``; raise AnalysisError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"{path}: {what} is missing")
    try:
        with open(path, newline="") as fh:
            first = fh.readline()
    except OSError as exc:
        raise AnalysisError(f"{path}: cannot read {what}: {exc}") from exc
    header = [h.strip() for h in first.strip().split(",")] if first.strip() else []
    missing = [c for c in spec if c not in header]
    if missing:
        raise AnalysisError(f"{path}:1: header lacks {', '.join(missing)}, expected "
                            f"{','.join(spec)} (got '{first.strip()}')")
    try:
        df = pd.read_csv(path, dtype=_pandas_dtypes(spec), usecols=list(spec), engine="c",
                         skip_blank_lines=True)
    except (ValueError, TypeError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise AnalysisError(_locate_problem(path, spec)) from exc
    for col, kind in spec.items():
        if kind == "str" and df[col].isna().any():
            raise AnalysisError(_locate_problem(path, spec))
        if isinstance(kind, tuple):
            bad = ~df[col].isin(kind)
            if bad.any():
                raise AnalysisError(_locate_problem(path, spec))
    return df


def read_json(path: Path, what: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"{path}: {what} is missing")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AnalysisError(f"{path}: {what} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise AnalysisError(f"{path}: {what} must be a JSON object")
    return data


def _normalise_path_col(df: pd.DataFrame) -> None:
    """Paths are compared without a leading slash (resource files have none)."""
    col = df["path"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [str(c).lstrip("/") for c in col.cat.categories]
        if len(set(cats)) == len(cats):
            df["path"] = col.cat.rename_categories(cats)
            return
    df["path"] = col.astype(object).where(col.notna(), "").astype(str).str.lstrip("/").astype("category")


def read_requests(path: Path) -> pd.DataFrame:
    df = read_csv_checked(path, REQUESTS_COLUMNS, "GE requests.csv")
    if df["path"].isna().any():
        df["path"] = df["path"].cat.add_categories([""]).fillna("") if "" not in df["path"].cat.categories else df["path"].fillna("")
    _normalise_path_col(df)
    df["outcome"] = df["outcome"].astype(pd.CategoricalDtype(list(OUTCOMES)))
    return df


def read_device_log(path: Path) -> pd.DataFrame:
    df = read_csv_checked(path, DEVICE_LOG_COLUMNS, "device-log.csv")
    if df["path"].isna().any():
        df["path"] = df["path"].astype(object).fillna("").astype("category")
    _normalise_path_col(df)
    return df


def read_resources(path: Path) -> pd.DataFrame:
    df = read_csv_checked(path, RESOURCE_COLUMNS, "resource file")
    df["path"] = df["path"].astype(str).str.lstrip("/")
    if (df["service_time_us"] < 0).any():
        raise AnalysisError(f"{path}: service_time_us must be >= 0")
    return df


@dataclass
class GeData:
    ge_id: str
    dir: Path
    requests: pd.DataFrame
    summary: dict[str, Any]
    start_mono_ns: int


@dataclass
class DeviceInfo:
    name: str
    id: int | None
    group: str | None = None
    resources: pd.DataFrame | None = None   # path, service_time_us, mode, payload_bytes
    log: pd.DataFrame | None = None
    log_summary: dict[str, Any] | None = None


@dataclass
class RunData:
    run_dir: Path
    run: dict[str, Any]
    ges: list[GeData]
    cd_ge: GeData | None
    devices: dict[str, DeviceInfo]          # main devices by name
    cd: DeviceInfo | None
    test_start_ns: int
    duration_s: float
    warnings: list[str] = field(default_factory=list)


def _load_ge(run_dir: Path, ge_id: str, rel_dir: str) -> GeData:
    d = run_dir / rel_dir
    summary = read_json(d / "summary.json", f"summary.json of {ge_id}")
    requests = read_requests(d / "requests.csv")
    start = summary.get("start_mono_ns")
    if not isinstance(start, int):
        raise AnalysisError(f"{d / 'summary.json'}: start_mono_ns missing or not an integer")
    return GeData(ge_id=ge_id, dir=d, requests=requests, summary=summary, start_mono_ns=start)


def _load_device_files(run_dir: Path, dev: DeviceInfo, res_rel: str | None,
                       warnings: list[str], fallback_service_us: int | None = None) -> None:
    res_path = run_dir / res_rel if res_rel else run_dir / "trace" / "resources" / f"{dev.name}.csv"
    if res_path.is_file():
        dev.resources = read_resources(res_path)
    elif fallback_service_us is not None:
        # one pseudo-resource matching every path (see rd.service_times)
        dev.resources = pd.DataFrame({"path": ["*"], "service_time_us": [int(fallback_service_us)],
                                      "mode": ["busy"], "payload_bytes": [0]})
        warnings.append(f"{res_path}: missing; using run.json cd.service_time_us="
                        f"{fallback_service_us} as S for every {dev.name} request")
    else:
        warnings.append(f"{res_path}: resource file missing; R_d not computed for {dev.name}")
    log_dir = run_dir / "devices" / dev.name
    log_path = log_dir / "device-log.csv"
    if log_path.is_file():
        dev.log = read_device_log(log_path)
    else:
        warnings.append(f"{log_path}: device log missing; no response-time decomposition "
                        f"for {dev.name}")
    sum_path = log_dir / "device-summary.json"
    if sum_path.is_file():
        dev.log_summary = read_json(sum_path, "device-summary.json")
        dropped = dev.log_summary.get("log_dropped") or 0
        if dropped:
            warnings.append(f"{sum_path}: {dropped} device-log entries were dropped "
                            f"(log capacity); decomposition is partial for {dev.name}")


def load_run(run_dir: str | Path) -> RunData:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AnalysisError(f"{run_dir}: run directory does not exist")
    run = read_json(run_dir / "run.json", "run.json")
    warnings: list[str] = []

    ges_spec = run.get("ges")
    if ges_spec is None:
        ges_spec = [{"id": p.name, "dir": f"ge/{p.name}"}
                    for p in sorted((run_dir / "ge").glob("*")) if p.is_dir()]
    if not isinstance(ges_spec, list):
        raise AnalysisError(f"{run_dir / 'run.json'}: 'ges' must be a list")
    ges = []
    for g in ges_spec:
        gid = str(g.get("id", "ge"))
        ges.append(_load_ge(run_dir, gid, str(g.get("dir", f"ge/{gid}"))))

    cd_ge = None
    cd_spec = run.get("cd") or None
    cd_ge_dir = (run.get("cd_ge") or {}).get("dir", "cd-ge")
    if cd_spec is not None or (run_dir / cd_ge_dir).is_dir():
        if (run_dir / cd_ge_dir / "requests.csv").is_file():
            cd_ge = _load_ge(run_dir, "cd-ge", cd_ge_dir)
        else:
            warnings.append(f"{run_dir / cd_ge_dir / 'requests.csv'}: contention-detector GE "
                            "log missing; contention cannot be assessed")

    devices: dict[str, DeviceInfo] = {}
    for d in run.get("devices") or []:
        name = str(d.get("name"))
        dev = DeviceInfo(name=name, id=d.get("id"), group=d.get("group"))
        _load_device_files(run_dir, dev, d.get("resources"), warnings)
        devices[name] = dev

    cd = None
    if cd_spec is not None:
        cd = DeviceInfo(name=str(cd_spec.get("device", "cd-node")), id=None, group="cd")
        fallback = cd_spec.get("service_time_us")
        _load_device_files(run_dir, cd, cd_spec.get("resources"), warnings,
                           int(fallback) if isinstance(fallback, (int, float)) else None)

    test = run.get("test") or {}
    test_start = test.get("start_mono_ns")
    if not isinstance(test_start, int) or test_start <= 0:
        test_start = min((g.start_mono_ns for g in ges), default=0)
    duration = test.get("duration_s")
    if not isinstance(duration, (int, float)) or duration <= 0 or math.isnan(duration):
        duration = max((float(g.summary.get("duration_s") or 0) for g in ges), default=0.0)
    if not duration:
        spans = [g.requests["scheduled_ns"].max() / 1e9 for g in ges if len(g.requests)]
        duration = float(max(spans, default=0.0)) or 1.0
    return RunData(run_dir=run_dir, run=run, ges=ges, cd_ge=cd_ge, devices=devices, cd=cd,
                   test_start_ns=int(test_start), duration_s=float(duration), warnings=warnings)
