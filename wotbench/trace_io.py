"""Reading and summarising trace files (contract section 1): ``wotbench trace --stats TRACE``."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from .config import METHODS as _METHODS
from .errors import ConfigError
_URI_RE = r"^coap://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(:\d{1,5})?/[^\s,]*$"


def read_trace(path: str | Path) -> pd.DataFrame:
    """Parse a trace CSV into a DataFrame (device_id, send_time_us, method, uri[, payload_bytes],
    line). Malformed input -> ConfigError ``FILE:LINE: <what>, expected <what>``."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"{path}: cannot read: {getattr(e, 'strerror', None) or e}"]) from None
    lines = text.splitlines()
    keep, numbers, header_seen = [], [], False
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if not header_seen and not keep and s.startswith("device_id"):
            header_seen = True
            continue
        keep.append(s)
        numbers.append(no)
    cols = ["device_id", "send_time_us", "method", "uri", "payload_bytes"]
    if not keep:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols[:4] + ["line"]})
    ncols = np.array([s.count(",") + 1 for s in keep])
    bad = np.flatnonzero((ncols < 4) | (ncols > 5))
    if len(bad):
        i = bad[0]
        raise ConfigError([f"{path}:{numbers[i]}: {ncols[i]} field(s), expected "
                           f"device_id,send_time_us,method,uri[,payload_bytes]"])
    df = pd.read_csv(io.StringIO("\n".join(keep)), header=None, names=cols, dtype=str,
                     keep_default_na=False)
    df["line"] = numbers

    def fail(mask: np.ndarray, what: str, expected: str):
        idx = np.flatnonzero(mask)
        if len(idx):
            i = idx[0]
            raise ConfigError([f"{path}:{numbers[i]}: {what} {df.iloc[i][what.split()[0]]!r}, expected {expected}"])

    fail(~df.device_id.str.fullmatch(r"\d+").to_numpy(), "device_id", "an integer >= 0")
    fail(~df.send_time_us.str.fullmatch(r"\d+").to_numpy(), "send_time_us", "an integer >= 0 (µs)")
    fail(~df.method.isin(_METHODS).to_numpy(), "method", "GET, PUT, POST or DELETE")
    fail(~df.uri.str.match(_URI_RE).to_numpy(), "uri", "coap://host[:port]/path")
    has_pl = (df.payload_bytes != "").to_numpy()
    fail(has_pl & ~df.payload_bytes.str.fullmatch(r"\d+").to_numpy(), "payload_bytes", "an integer >= 0")
    df["device_id"] = df.device_id.astype(np.int64)
    df["send_time_us"] = df.send_time_us.astype(np.int64)
    t = df.send_time_us.to_numpy()
    dec = np.flatnonzero(np.diff(t) < 0)
    if len(dec):
        i = dec[0] + 1
        raise ConfigError([f"{path}:{numbers[i]}: send_time_us {t[i]} is before the previous line's "
                           f"{t[i - 1]}, expected non-decreasing times"])
    if has_pl.any():
        df["payload_bytes"] = pd.to_numeric(df.payload_bytes.where(has_pl, "0")).astype(np.int64)
    else:
        df = df.drop(columns="payload_bytes")
    return df


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
