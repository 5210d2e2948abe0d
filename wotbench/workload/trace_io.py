"""Reading the input files of a run (contract section 1): trace files (``read_trace``; summaries
for ``wotbench trace --stats TRACE``) and resource files (``read_resources``)."""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.config.schema import MAX_PAYLOAD_BYTES
from wotbench.config.schema import METHODS as _METHODS
from wotbench.csvcheck import MAX_LISTED, IntRange, Text, read_csv_checked
from wotbench.errors import ConfigError, WotbenchError
from wotbench.workload.formats import BODY_METHODS, TRACE_BODY_COLUMN

MAX_SERVICE_US = 3_600_000_000          # wot-device's RES_MAX_SERVICE_US (one hour)


def resource_path_problem(path: str) -> str | None:
    """What is wrong with a resource path, as wot-device (resources.c bad_path) judges it."""
    if path == "":
        return "empty path"
    if path.startswith("/"):
        return f"path {path!r} starts with '/'"
    if path.endswith("/"):
        return f"path {path!r} ends with '/'"
    if "//" in path:
        return f"path {path!r} has an empty segment"
    if path == ".well-known/core":
        return "path '.well-known/core' is reserved"
    if any(c <= " " or c >= "\x7f" or c in '?#"' for c in path):
        return f"path {path!r} has an invalid character"
    return None


RESOURCE_COLUMNS = {
    "path": Text(resource_path_problem, "a path without leading '/' made of printable characters, "
                                        "e.g. r0 or a/b"),
    "service_time_us": IntRange(0, MAX_SERVICE_US), "mode": ("sleep", "busy"),
    "payload_bytes": IntRange(0, MAX_PAYLOAD_BYTES),
}
# optional Observe columns (wot-device resources.c parse_observe); notify_dist none = plain
RESOURCE_OBSERVE_COLUMNS = {
    "notify_dist": ("none", "deterministic", "uniform", "exponential", "normal"),
    "notify_mean_us": IntRange(0, MAX_SERVICE_US), "notify_jitter_us": IntRange(0, MAX_SERVICE_US),
    "notify_service_us": IntRange(0, MAX_SERVICE_US), "notify_type": ("con", "non"),
    "max_age_s": IntRange(0, 2**32 - 1),
}
TRACE_METHODS = tuple(_METHODS) + ("OBSERVE", "CANCEL", "PATCH")   # PATCH: http:// only
_URI_RE = r"^(coaps?|http)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(:\d{1,5})?/[^\s,#]*$"


DEVICE_MARK = ">"      # before the method: the device sends this line itself (devices[].push)


def trace_lines(path: Path, header: Optional[list[str]] = None) -> tuple[list[str], list[int]]:
    """The data lines of a trace (no blank, comment or header line) and their line numbers;
    ``header``: a list that receives the header line, when the trace has one."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"{path}: cannot read: {getattr(e, 'strerror', None) or e}"]) from None
    keep, numbers, header_seen = [], [], False
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if not header_seen and not keep and s.startswith("device_id"):
            header_seen = True
            if header is not None:
                header.append(s)
            continue
        keep.append(s)
        numbers.append(no)
    return keep, numbers


def is_device_line(s: str) -> bool:
    """A device-originated line: ``>`` before its method (docs/CONTRACTS.md §1)."""
    f = s.split(",", 3)
    return len(f) > 2 and f[2].startswith(DEVICE_MARK)


def read_trace(path: str | Path) -> pd.DataFrame:
    """Parse a trace CSV into a DataFrame (device_id, send_time_us, method, uri[, payload_bytes]
    [, client][, body], line): the gateway emulators' requests (``body``: the header names the
    column; each request's body as written, percent-encoded, "" for filler); device-originated
    lines (``>METHOD``) are :func:`wotbench.workload.trace_push.read_device_lines`'s. Malformed
    input -> ConfigError ``FILE:LINE: <what>, expected <what>``."""
    path = Path(path)
    header: list[str] = []
    lines, numbers = trace_lines(path, header)
    ge = [i for i, s in enumerate(lines) if not is_device_line(s)]
    keep, numbers = [lines[i] for i in ge], [numbers[i] for i in ge]
    if not keep:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in _TRACE_COLUMNS[:4] + ["line"]})
    bodies = None
    if header and header[0].endswith(TRACE_BODY_COLUMN):   # the last field of every line
        split = [s.rsplit(",", 1) for s in keep]
        keep = [x[0] for x in split]
        bodies = [x[1].strip() if len(x) == 2 else "" for x in split]
    df, problems = _parse_trace(keep)
    if bodies is not None:
        df["body"] = pd.Series(bodies, dtype=object).iloc[df.index].to_numpy() if len(df) else []
        for i, why in _body_problems(df).items():
            problems.setdefault(i, why)
    if problems:
        bad = sorted(problems)
        listed = [f"{path}:{numbers[i]}: {problems[i]}" for i in bad[:MAX_LISTED]]
        if len(bad) > MAX_LISTED:
            listed.append(f"{path}: {len(bad) - MAX_LISTED} more bad line(s) not listed")
        raise ConfigError(listed)
    df = df.reset_index(drop=True)
    df["line"] = numbers
    if (df.client != "").any():
        df["client"] = df.client.astype(np.int64)
    else:
        df = df.drop(columns="client")
    has_pl = (df.payload_bytes != "").to_numpy()
    df["device_id"] = df.device_id.astype(np.int64)
    df["send_time_us"] = df.send_time_us.astype(np.int64)
    if has_pl.any():
        df["payload_bytes"] = pd.to_numeric(df.payload_bytes.where(has_pl, "0")).astype(np.int64)
    else:
        df = df.drop(columns="payload_bytes")
    return df


_TRACE_COLUMNS = ["device_id", "send_time_us", "method", "uri", "payload_bytes", "client"]
_BAD_ESCAPE = r"%(?![0-9A-Fa-f]{2})"
_TRACE_FIELDS = "device_id,send_time_us,method,uri[,payload_bytes[,client]]"
MAX_TRACE_CLIENT = 59999   # the GE's limit (a socket per client)
_UINT = r"\d{1,18}"                  # fits an int64


def _parse_trace(lines: list[str]) -> tuple[pd.DataFrame, dict[int, str]]:
    """The trace lines as text columns, and the first problem of every malformed line:
    {index in ``lines``: what is wrong} (empty when the trace is good)."""
    ncols = np.array([s.count(",") + 1 for s in lines])
    problems = {int(i): f"{ncols[i]} field(s), expected {_TRACE_FIELDS}"
                for i in np.flatnonzero((ncols < 4) | (ncols > 6))}
    shaped = np.flatnonzero((ncols >= 4) & (ncols <= 6))
    if len(shaped) and len(set((ncols[shaped] == 6).tolist())) > 1:   # all lines or none
        with_client = bool(ncols[shaped[0]] == 6)
        for i in shaped[(ncols[shaped] == 6) != with_client]:
            problems[int(i)] = (f"{ncols[i]} field(s), expected "
                                + ("6 (with a client column)" if with_client else "4 or 5 (no client column)")
                                + " like the trace's first request")
    if not len(shaped):
        return pd.DataFrame(columns=_TRACE_COLUMNS), problems
    df = pd.read_csv(io.StringIO("\n".join(lines[i] for i in shaped)), header=None,
                     names=_TRACE_COLUMNS, dtype=str, keep_default_na=False)
    df.index = shaped

    def check(bad: pd.Series, col: str, expected: str) -> None:
        for i in df.index[bad.to_numpy()]:
            problems.setdefault(int(i), f"{col} {df.at[i, col]!r}, expected {expected}")

    check(~df.device_id.str.fullmatch(_UINT), "device_id", "an integer >= 0")
    timed = df.send_time_us.str.fullmatch(_UINT)
    check(~timed, "send_time_us", "an integer >= 0 (µs)")
    check(~df.method.isin(TRACE_METHODS), "method",
          "GET, PUT, POST, DELETE, OBSERVE or CANCEL (coap://) or PATCH (http://)")
    uri_ok = df.uri.str.match(_URI_RE)
    check(~uri_ok, "uri", "coap://host[:port]/path, coaps://host[:port]/path or "
                          "http://host[:port]/path")
    scheme = df.uri.str.extract(r"^([a-z]+)://", expand=False).where(uri_ok)
    if scheme.nunique() > 1:   # one scheme per trace (the GE picks its transport by it)
        first = scheme[uri_ok].iloc[0]
        check(uri_ok & (scheme != first), "uri",
              f"{first}:// like the trace's first request (a trace may not mix coap://, "
              "coaps:// and http://)")
    http = scheme == "http"
    check(http & df.method.isin(("OBSERVE", "CANCEL")), "method",
          "GET, PUT, POST, DELETE or PATCH with an http:// uri (Observe is CoAP only)")
    check(~http & uri_ok & (df.method == "PATCH"), "method",
          "GET, PUT, POST, DELETE, OBSERVE or CANCEL with a coap:// uri (PATCH: http:// only)")
    pl = df.payload_bytes
    pl_ok = pl.str.fullmatch(_UINT) & (pl.str.len() <= 7)
    pl_ok &= pd.to_numeric(pl.where(pl_ok, "0")) <= MAX_PAYLOAD_BYTES
    check((pl != "") & ~pl_ok, "payload_bytes", f"an integer 0..{MAX_PAYLOAD_BYTES}")
    check(df.method.isin(("OBSERVE", "CANCEL")) & (pl != "") & (pl != "0"), "payload_bytes",
          "none with OBSERVE or CANCEL (they are GETs)")
    cl = df.client
    cl_ok = cl.str.fullmatch(r"\d{1,5}") & (pd.to_numeric(cl.where(cl.str.fullmatch(r"\d{1,5}"), "0"))
                                            <= MAX_TRACE_CLIENT)
    check((cl != "") & ~cl_ok, "client", f"an integer 0..{MAX_TRACE_CLIENT} (the source endpoint)")
    t = df.send_time_us[timed].astype(np.int64)      # order among the lines with a time
    tv = t.to_numpy()
    for k in np.flatnonzero(np.diff(tv) < 0) + 1:
        problems.setdefault(int(t.index[k]), f"send_time_us {tv[k]} is before the previous "
                                             f"line's {tv[k - 1]}, expected non-decreasing times")
    return df, problems


def _body_problems(df: pd.DataFrame) -> dict[int, str]:
    """What is wrong with each line's body (as the GE judges it, gateway-emulator trace.c)."""
    out = {}
    for i, body, method, pl in zip(df.index, df.body, df.method, df.payload_bytes):
        if not body:
            continue
        if method not in BODY_METHODS:
            out[int(i)] = f"a body with {method}, expected a body only with PUT, POST or PATCH"
        elif re.search(_BAD_ESCAPE, body):
            out[int(i)] = "bad %-escape in body, expected %XX with two hex digits"
        else:
            n = len(body.encode()) - 2 * body.count("%")   # bytes, as the GE counts
            if not pl.isdigit() or int(pl) != n:
                out[int(i)] = (f"body of {n} bytes with payload_bytes {pl or '(none)'}, expected a "
                               "body of exactly payload_bytes bytes (decoded)")
    return out


def trace_stats(path: str | Path) -> dict:
    """Per-device and overall request counts, rates and RIT percentiles (ms) of a trace."""
    df = read_trace(path)
    if df.empty:
        return {"trace": str(path), "requests": 0, "duration_s": 0.0, "devices": {}, "overall": {}}
    t = df.send_time_us.to_numpy()
    span_s = max(t.max() / 1e6, 1e-9)
    per = {}
    all_rit = []
    for dev, g in df.groupby("device_id", sort=True):
        tt = np.sort(g.send_time_us.to_numpy())
        rit = np.diff(tt) / 1000.0
        all_rit.append(rit)
        per[int(dev)] = {"requests": int(len(tt)), "rate": len(tt) / span_s, **_pcts(rit),
                         "methods": g.method.value_counts().to_dict()}
    rit = np.concatenate(all_rit) if all_rit else np.zeros(0)
    return {"trace": str(path), "requests": int(len(df)), "duration_s": span_s, "devices": per,
            "overall": {"rate": len(df) / span_s, "rate_per_device": len(df) / span_s / len(per), **_pcts(rit)}}


def _pcts(rit: np.ndarray) -> dict:
    if len(rit) == 0:
        return {"rit_mean_ms": None, "rit_p50_ms": None, "rit_p90_ms": None, "rit_p99_ms": None, "rit_max_ms": None}
    p = np.percentile(rit, [50, 90, 99])
    return {"rit_mean_ms": float(rit.mean()), "rit_p50_ms": float(p[0]), "rit_p90_ms": float(p[1]),
            "rit_p99_ms": float(p[2]), "rit_max_ms": float(rit.max())}


def print_stats(stats: dict, console=None, max_rows: int = 30) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    t = Table(title=f"{stats['trace']}: {stats['requests']} requests over {stats['duration_s']:.3f} s, "
                    f"{len(stats['devices'])} device(s)")
    for c in ("device", "requests", "req/s", "RIT mean ms", "p50", "p90", "p99", "max"):
        t.add_column(c, justify="right")

    def fmt(v):
        return "-" if v is None else f"{v:.2f}"

    def row(name, d, rate):
        t.add_row(name, str(d.get("requests", "")), f"{rate:.2f}", fmt(d["rit_mean_ms"]), fmt(d["rit_p50_ms"]),
                  fmt(d["rit_p90_ms"]), fmt(d["rit_p99_ms"]), fmt(d["rit_max_ms"]))

    items = list(stats["devices"].items())
    for dev, d in items[:max_rows]:
        row(str(dev), d, d["rate"])
    if len(items) > max_rows:
        t.add_row(f"... {len(items) - max_rows} more", "", "", "", "", "", "", "")
    if stats["overall"]:
        o = dict(stats["overall"], requests=stats["requests"])
        row("all (per device)", o, o["rate_per_device"])
    console.print(t)


def read_resources(path: str | Path, error: type[WotbenchError] = ConfigError) -> pd.DataFrame:
    """A resource file (``path,service_time_us,mode,payload_bytes``) checked as wot-device
    reads it: every bad line (a malformed value, a path the device refuses, a repeated path)
    raises ``error`` (exit 2) naming ``FILE:LINE``."""
    path = Path(path)
    spec = RESOURCE_COLUMNS
    try:
        with open(path) as f:
            if "notify_dist" in f.readline().split(","):
                spec = {**RESOURCE_COLUMNS, **RESOURCE_OBSERVE_COLUMNS}
    except OSError:
        pass   # read_csv_checked names the problem
    df = read_csv_checked(path, spec, "resource file", error, unique=("path",))
    df["path"] = df["path"].astype(str)
    if "notify_dist" in df.columns:
        df["notify_dist"] = df["notify_dist"].astype(str)
        df["notify_type"] = df["notify_type"].astype(str)
    return df


def observe_problems(trace: pd.DataFrame, trace_file: str | Path,
                     resources: dict[int, tuple[str | Path, pd.DataFrame]]) -> list[str]:
    """OBSERVE lines on resources that are not observable (or unknown), and CANCEL lines with no
    open OBSERVE of the same device and URI: ``FILE:LINE: what, expected what``.
    ``resources``: device id -> (its resource file, read_resources of it)."""
    out: list[str] = []
    sub = trace[trace.method.isin(("OBSERVE", "CANCEL"))]
    open_: dict[tuple[int, str], int] = {}
    for dev, method, uri, line in zip(sub.device_id.tolist(), sub.method.tolist(), sub.uri.tolist(),
                                      sub.line.tolist()):
        key = (dev, uri)
        if method == "CANCEL":
            if open_.get(key, 0) <= 0:
                out.append(f"{trace_file}:{line}: CANCEL without an open OBSERVE of device {dev} "
                           f"and {uri}, expected an earlier OBSERVE line with the identical uri")
            else:
                open_[key] -= 1
            continue
        open_[key] = open_.get(key, 0) + 1
        if dev not in resources:
            continue
        rfile, res = resources[dev]
        path = uri.split("/", 3)[3].split("?")[0] if uri.count("/") >= 3 else ""
        hit = res[res["path"] == path]
        if hit.empty:
            out.append(f"{trace_file}:{line}: OBSERVE on '{path}', which {rfile} does not have, "
                       f"expected an observable resource of device {dev}")
        elif "notify_dist" not in res.columns or hit["notify_dist"].iloc[0] == "none":
            out.append(f"{trace_file}:{line}: OBSERVE on '{path}', which is not observable in "
                       f"{rfile} (notify_dist none or no notification columns), expected an "
                       f"observable resource")
        if len(out) >= MAX_LISTED:
            break
    return out
