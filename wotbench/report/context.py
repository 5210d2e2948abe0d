"""Gathers everything the report shows from a run directory (docs/CONTRACTS.md §4, §6, §7).

`build_context(run_dir)` returns a plain dict for the Jinja2 template plus, under "data", the
pandas frames the figures are drawn from. Only summary.json is required; every other input is
optional and, when absent, leaves a "not available because ..." note instead of a section.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wotbench.errors import WotbenchError


class ReportError(WotbenchError):
    """The run directory cannot be reported on (exit code 2); the message names the file."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message, exit_code)


# --------------------------------------------------------------------------- small helpers

def pick(obj: Any, *paths: str, default: Any = None) -> Any:
    """First non-None value among dotted `paths` in nested dicts (tolerates renamed keys)."""
    for path in paths:
        cur = obj
        for part in path.split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                cur = None
                break
        if cur is not None:
            return cur
    return default


def num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(v) else v


def pstat(stats: Any, name: str) -> float | None:
    """A statistic from a stats dict that may spell it `p50`, `p50_ms` or `median`."""
    if not isinstance(stats, dict):
        return None
    alias = {"p50": ("p50", "p50_ms", "median", "median_ms"), "mean": ("mean", "mean_ms", "avg")}
    for k in alias.get(name, (name, f"{name}_ms")):
        if stats.get(k) is not None:
            return num(stats[k])
    return None


def _load_json(path: Path) -> tuple[Any, str | None]:
    if not path.is_file():
        return None, f"{path.name} is missing"
    try:
        return json.loads(path.read_text()), None
    except (OSError, ValueError) as e:
        return None, f"{path.name} cannot be read ({e})"


def _read_csv(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        df = pd.read_csv(path, comment=None)
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return None
    return df if len(df) else None


def _first_col(df: pd.DataFrame, *names: str) -> str | None:
    low = {c.lower(): c for c in df.columns}
    for n in names:
        if n.lower() in low:
            return low[n.lower()]
    return None


def _series(run_dir: Path, *names: str) -> pd.DataFrame | None:
    for n in names:
        df = _read_csv(run_dir / "series" / n)
        if df is not None:
            return df
    return None


# --------------------------------------------------------------------------- sections

VERDICTS = {
    "trustworthy": ("ok", "Results trustworthy",
                    "The load was sent on schedule and no host contention was detected: "
                    "these response times describe the system under test."),
    "ge_bottleneck": ("bad", "GE bottleneck",
                      "The gateway emulator could not send requests on schedule, so the offered load "
                      "was not the configured one. Do not use these numbers for capacity planning."),
    "contention": ("warn", "Contention detected",
                   "The host itself slowed the emulated devices during the windows below; response "
                   "times inside them are inflated by the testbed, not by the system under test."),
    "invalid": ("bad", "Run invalid",
                "The run did not produce usable results."),
}


def _verdict(summary: dict, contention: dict) -> dict:
    v = summary.get("verdict") or {}
    status = str(v.get("status") or "unknown")
    cls, headline, explain = VERDICTS.get(status, ("unknown", "Verdict unknown",
                                                  "The analysis did not state whether the results can be trusted."))
    reasons = [str(r) for r in (v.get("reasons") or [])]
    detail = None
    if status == "contention" and contention.get("windows"):
        detail = (f"{len(contention['windows'])} window(s), {contention['contended_s']:.1f} s in total"
                  + (f" ({contention['contended_share']:.0%} of the test)" if contention.get("contended_share") is not None else "")
                  + (f"; R_d up to {contention['peak_ratio']:.1f}× the calibration baseline" if contention.get("peak_ratio") else "")
                  + ": " + ", ".join(w["label"] for w in contention["windows"]))
    return {"status": status, "cls": cls, "headline": headline, "explain": explain, "reasons": reasons,
            "detail": detail, "exit_code": v.get("exit_code")}


def _contention(summary: dict) -> dict:
    c = summary.get("contention")
    if not isinstance(c, dict):
        return {"available": False, "windows": [], "detected": False,
                "reason": "the contention detector was not run (no 'contention' section in summary.json)"}
    wins = []
    for w in c.get("windows") or []:
        a, b = num(pick(w, "start_s", "start")), num(pick(w, "end_s", "end"))
        if a is None or b is None:
            continue
        peak = num(pick(w, "peak_rd_ms", "max_rd_ms", "peak_ms"))
        ratio = num(pick(w, "peak_ratio", "ratio", "max_ratio"))
        wins.append({"start_s": a, "end_s": b, "duration_s": b - a, "peak_rd_ms": peak, "peak_ratio": ratio,
                     "label": f"{a:.0f}–{b:.0f} s"})
    total = num(pick(c, "contended_s", "total_s", "duration_s"))
    if total is None:
        total = sum(w["duration_s"] for w in wins)
    ratios = [w["peak_ratio"] for w in wins if w["peak_ratio"]]
    return {"available": True, "detected": bool(pick(c, "detected", default=bool(wins))), "windows": wins,
            "contended_s": total, "contended_share": num(pick(c, "contended_share", "share")),
            "peak_ratio": max(ratios) if ratios else None, "reason": None}


def _host(run: dict) -> list[tuple[str, str]]:
    h = run.get("host") or {}
    rows = [("Host", pick(h, "hostname", "name")), ("CPU", pick(h, "cpu_model", "cpu")),
            ("Cores", pick(h, "cores", "ncpu", "cpus")), ("Kernel", pick(h, "kernel", "kernel_release")),
            ("Docker", pick(h, "docker_version", "docker", "docker_server_version"))]
    return [(k, str(v)) for k, v in rows if v is not None]


def _placement(plan: dict | None, plan_err: str | None, run: dict) -> dict:
    if not isinstance(plan, dict):
        return {"available": False, "reason": plan_err or "plan.json is missing"}
    roles: dict[str, list[str]] = {}

    def add(cores: Any, what: str) -> None:
        for c in _cores(cores):
            roles.setdefault(c, [])
            if what not in roles[c]:
                roles[c].append(what)

    for c in plan.get("os_cores") or []:
        add(c, "OS + harness")
    for ge, c in (plan.get("ge_cores") or {}).items():
        add(c, ge)
    if plan.get("cd_ge_core") is not None:
        add(plan["cd_ge_core"], "cd-ge")
    if plan.get("cd_node_cpuset") is not None:
        add(plan["cd_node_cpuset"], "cd-node")
    by_core: dict[str, list[str]] = {}
    for dev, cs in (plan.get("devices") or {}).items():
        for c in _cores(cs):
            by_core.setdefault(c, []).append(dev)
    for c, devs in by_core.items():
        add(c, _compress(devs))
    usable = set(str(c) for c in plan.get("usable_cores") or [])
    allc = sorted(set(roles) | usable, key=lambda s: (len(s), s))
    rows = [{"core": c, "components": roles.get(c, []) or ["(idle)"]} for c in allc]
    return {"available": True, "rows": rows, "faithful": plan.get("faithful", True),
            "warnings": [str(w) for w in plan.get("warnings") or []],
            "ge_wait": plan.get("ge_wait"), "affinity": plan.get("affinity"),
            "cores_total": plan.get("cores_total")}


def _cores(spec: Any) -> list[str]:
    """'1', 1, '0-2', '1,3', [1, 2] -> ['1'] ... (cpuset syntax)."""
    if spec is None:
        return []
    if isinstance(spec, (list, tuple)):
        return [c for s in spec for c in _cores(s)]
    out = []
    for part in str(spec).split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit():
                out += [str(i) for i in range(int(a), int(b) + 1)]
        elif part:
            out.append(part)
    return out


def _compress(names: list[str]) -> str:
    """['cpu-0', 'cpu-1', 'cpu-2', 'io-0'] -> 'cpu-0…2, io-0'."""
    groups: dict[str, list[int]] = {}
    other = []
    for n in names:
        base, _, idx = n.rpartition("-")
        if base and idx.isdigit():
            groups.setdefault(base, []).append(int(idx))
        else:
            other.append(n)
    parts = []
    for base, idx in groups.items():
        idx.sort()
        parts.append(f"{base}-{idx[0]}" if len(idx) == 1 else f"{base}-{idx[0]}…{idx[-1]} ({len(idx)} devices)")
    return ", ".join(parts + other)


def _overall(summary: dict) -> dict:
    o = summary.get("overall") or {}
    outcomes = pick(o, "outcomes", default={}) or {}
    requests = num(pick(o, "requests", "total")) or float(sum(v for v in outcomes.values() if isinstance(v, (int, float))))
    rt = pick(o, "response_ms", "response_time_ms", "latency_ms", default={}) or {}
    duration = num(pick(summary, "run.duration_s", "overall.duration_s"))
    ok = num(outcomes.get("ok"))
    achieved = num(pick(o, "achieved_rate", "throughput_rps", "ok_rate"))
    if achieved is None and ok is not None and duration:
        achieved = ok / duration
    return {"requests": requests, "outcomes": outcomes, "rt": rt, "achieved_rate": achieved,
            "offered_rate": num(pick(o, "offered_rate", "offered_rps")),
            "success_share": (ok / requests) if ok is not None and requests else None,
            "codes": pick(o, "codes", "response_codes", default={}) or {}, "duration_s": duration}


def _outcome_rows(outcomes: dict, requests: float | None) -> list[dict]:
    order = ["ok", "error", "timeout", "reset", "unsent"]
    keys = order + [k for k in outcomes if k not in order]
    meaning = {"ok": "2.xx response", "error": "4.xx/5.xx response or local send failure",
               "timeout": "no answer within the timeout", "reset": "RST received",
               "unsent": "not sent (run interrupted first)"}
    rows = []
    for k in keys:
        v = num(outcomes.get(k))
        if v is None:
            continue
        rows.append({"outcome": k, "count": int(v), "share": v / requests if requests else None,
                     "meaning": meaning.get(k, "")})
    return rows


def _per_device(summary: dict) -> list[dict]:
    pdv = summary.get("per_device") or []
    if isinstance(pdv, dict):
        pdv = [dict(v, device=v.get("device", k)) if isinstance(v, dict) else {"device": k} for k, v in pdv.items()]
    rows = []
    for d in pdv:
        if not isinstance(d, dict):
            continue
        rt = pick(d, "response_ms", "response_time_ms", "latency_ms", default=d) or {}
        oc = d.get("outcomes") or {}
        req = num(pick(d, "requests", "total"))
        ok = num(pick(oc, "ok", default=d.get("ok")))
        rows.append({"device": str(pick(d, "device", "name", default="?")), "group": d.get("group"),
                     "requests": req, "ok": ok,
                     "failed": (req - ok) if req is not None and ok is not None else None,
                     "mean": pstat(rt, "mean"), "p50": pstat(rt, "p50"), "p95": pstat(rt, "p95"),
                     "p99": pstat(rt, "p99"), "max": pstat(rt, "max")})
    return rows


def _ge(summary: dict) -> dict:
    g = summary.get("ge_integrity")
    if not isinstance(g, dict):
        return {"available": False, "reason": "summary.json has no 'ge_integrity' section"}
    e = pick(g, "expected_rit_ms", "expected", "rit.expected", default={})
    s = pick(g, "submitted_rit_ms", "submitted", "rit.submitted", default={})
    table = [{"stat": name, "expected": pstat(e, key), "submitted": pstat(s, key)}
             for name, key in (("mean", "mean"), ("p5", "p5"), ("p50", "p50"))]
    ks = pick(g, "ks", "ks_statistic")
    ks_p = None
    if isinstance(ks, dict):
        ks, ks_p = pick(ks, "statistic", "d", "value"), pick(ks, "pvalue", "p_value")
    return {"available": True, "table": table, "ks": num(ks), "ks_p": num(ks_p),
            "late_share": num(pick(g, "late_share", "late_fraction")),
            "late_threshold_ms": num(pick(g, "late_threshold_ms", "late_ms")),
            "send_lag_us": pick(g, "send_lag_us", default={}) or {},
            "ok": pick(g, "ok", "passed")}


def _rd(summary: dict) -> dict:
    r = summary.get("rd")
    if not isinstance(r, dict):
        return {"available": False}
    return {"available": True, "baseline_ms": num(pick(r, "baseline_ms", "baseline.mean_ms", "baseline.mean")),
            "threshold_ms": num(pick(r, "threshold_ms", "threshold")),
            "cd": pick(r, "cd_ms", "cd", default={}), "devices": pick(r, "devices_ms", "devices", default={})}


def _network(run: dict) -> dict:
    net = run.get("network")
    if not net:
        return {"applied": False, "rows": []}
    rows = []
    if isinstance(net, dict):
        items = net.get("impairments", net)
        if isinstance(items, dict):
            for target, spec in items.items():
                rows.append({"target": str(target), "spec": _fmt_spec(spec)})
        else:
            net = items
    if isinstance(net, list):
        for it in net:
            if isinstance(it, dict):
                target = pick(it, "target", "device", "group", "component", default="?")
                spec = {k: v for k, v in it.items() if k not in ("target", "device", "group", "component")}
                rows.append({"target": str(target), "spec": _fmt_spec(spec)})
            else:
                rows.append({"target": "", "spec": str(it)})
    return {"applied": bool(rows), "rows": rows}


def _fmt_spec(spec: Any) -> str:
    if isinstance(spec, dict):
        return ", ".join(f"{k}={v}" for k, v in spec.items() if v is not None) or "none"
    return str(spec)


# --------------------------------------------------------------------------- time series

def _t_seconds(df: pd.DataFrame, start_ns: float | None) -> pd.Series | None:
    c = _first_col(df, "t_s", "time_s", "elapsed_s", "second", "sec", "t")
    if c is not None:
        return pd.to_numeric(df[c], errors="coerce")
    c = _first_col(df, "mono_ns", "t_ns", "time_ns", "timestamp_ns", "ts_ns")
    if c is not None:
        t = pd.to_numeric(df[c], errors="coerce").astype(float)
        ref = start_ns if start_ns is not None and t.min() >= start_ns - 3600e9 else t.min()
        return (t - ref) / 1e9
    return None


def load_cgroups(path: Path, start_ns: float | None) -> tuple[pd.DataFrame | None, str | None]:
    """monitor/cgroups.csv -> long frame (t_s, container, cpu_pct). Accepts a percentage column or
    cumulative usage counters (usec or ns) which are differentiated."""
    df = _read_csv(path)
    if df is None:
        return None, "monitor/cgroups.csv is missing or empty (monitoring was off or the runner did not write it)"
    t = _t_seconds(df, start_ns)
    name = _first_col(df, "container", "name", "component", "cgroup", "id")
    if t is None or name is None:
        return None, f"monitor/cgroups.csv has no recognised time/container columns ({', '.join(df.columns)})"
    out = pd.DataFrame({"t_s": t, "container": df[name].astype(str)})
    pct = _first_col(df, "cpu_pct", "cpu_percent", "cpu_%", "cpu")
    cum, scale = _first_col(df, "cpu_usage_usec", "usage_usec", "cpu_usec"), 1e-6
    if cum is None:
        cum, scale = _first_col(df, "cpu_usage_ns", "cpu_ns", "usage_ns", "cpuacct_usage"), 1e-9
    if pct is not None:
        out["cpu_pct"] = pd.to_numeric(df[pct], errors="coerce")
    elif cum is not None:
        out["cum_s"] = pd.to_numeric(df[cum], errors="coerce") * scale
        out = out.sort_values(["container", "t_s"])
        dt = out.groupby("container")["t_s"].diff()
        dc = out.groupby("container")["cum_s"].diff()
        out["cpu_pct"] = (dc / dt * 100).where(dt > 0)
        out = out.dropna(subset=["cpu_pct"]).drop(columns="cum_s")
    else:
        return None, "monitor/cgroups.csv has no CPU column (expected cpu_pct or cpu_usage_usec)"
    out = out.dropna()
    return (out, None) if len(out) else (None, "monitor/cgroups.csv has no usable samples")


def load_collectl(mon: Path, start_ns: float | None) -> pd.DataFrame | None:
    """Fallback when the analysis wrote no per-core series: collectl plot files (-P) with
    `[CPU:N]Totl%` or `[CPU:N]Idle%` columns, time relative to the first sample."""
    d = mon / "collectl"
    if not d.is_dir():
        return None
    for f in sorted(p for p in d.rglob("*") if p.is_file() and not p.name.endswith((".gz", ".raw"))):
        try:
            lines = [ln for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        hdr = next((ln for ln in lines if ln.startswith("#Date") or ln.startswith("#UTC")), None)
        if hdr is None or "[CPU:" not in hdr:
            continue
        cols = hdr.lstrip("#").split()
        rows = [ln.split() for ln in lines if not ln.startswith("#")]
        rows = [r for r in rows if len(r) == len(cols)]
        if not rows:
            continue
        df = pd.DataFrame(rows, columns=cols)
        if "Date" in df and "Time" in df:
            ts = pd.to_datetime(df["Date"] + " " + df["Time"], errors="coerce", format="%Y%m%d %H:%M:%S.%f")
            if ts.isna().all():
                ts = pd.to_datetime(df["Date"] + " " + df["Time"], errors="coerce", format="%Y%m%d %H:%M:%S")
            t = (ts - ts.min()).dt.total_seconds()
        else:
            t = pd.to_numeric(df[cols[0]], errors="coerce")
            t = t - t.min()
        out = []
        for c in cols:
            if c.startswith("[CPU:") and c.endswith("]Totl%"):
                core, busy = c[5:c.index("]")], pd.to_numeric(df[c], errors="coerce")
            elif c.startswith("[CPU:") and c.endswith("]Idle%"):
                core = c[5:c.index("]")]
                if f"[CPU:{core}]Totl%" in cols:
                    continue
                busy = 100 - pd.to_numeric(df[c], errors="coerce")
            else:
                continue
            out.append(pd.DataFrame({"t_s": t, "core": core, "busy_pct": busy}))
        if out:
            return pd.concat(out, ignore_index=True).dropna()
    return None


def _cpu_cores(run_dir: Path, start_ns: float | None) -> tuple[pd.DataFrame | None, str | None]:
    df = _series(run_dir, "cpu_cores.csv", "cpu_per_core.csv", "cpu.csv")
    if df is not None:
        t = _t_seconds(df, start_ns)
        core = _first_col(df, "core", "cpu")
        busy = _first_col(df, "busy_pct", "total_pct", "cpu_pct", "busy")
        if t is not None and core is not None and busy is not None:
            return pd.DataFrame({"t_s": t, "core": df[core].astype(str), "busy_pct": df[busy]}), None
        if t is not None:  # wide form: t_s, cpu0, cpu1 ...
            wide = [c for c in df.columns if c.lower().startswith(("cpu", "core"))]
            if wide:
                long = df.assign(t_s=t).melt(id_vars="t_s", value_vars=wide, var_name="core", value_name="busy_pct")
                long["core"] = long["core"].str.extract(r"(\d+)", expand=False).fillna(long["core"])
                return long, None
    df = load_collectl(run_dir / "monitor", start_ns)
    if df is not None:
        return df, None
    if not (run_dir / "monitor").is_dir():
        return None, "the run has no monitor/ directory (monitoring was disabled or the run stopped before it started)"
    return None, "no per-core CPU data: neither series/cpu_cores.csv nor a readable collectl plot file was found"


def _load_series(run_dir: Path, summary: dict, run: dict) -> tuple[dict, dict]:
    start_ns = num(pick(run, "test.start_mono_ns"))
    data: dict[str, Any] = {}
    missing: dict[str, str] = {}

    df = _series(run_dir, "response_times.csv", "response_time.csv", "latency.csv")
    if df is not None and _t_seconds(df, start_ns) is not None:
        df = df.assign(t_s=_t_seconds(df, start_ns))
        data["rt_time"] = df
    else:
        missing["rt_time"] = "series/response_times.csv is missing (no request was answered, or the analysis did not run)"

    df = _series(run_dir, "response_cdf.csv", "response_times_cdf.csv")
    if df is not None:
        x = _first_col(df, "response_ms", "rt_ms", "ms", "value")
        if x is not None:
            y = _first_col(df, "cdf", "p", "quantile")
            data["rt_cdf"] = (df[x].to_numpy(float), df[y].to_numpy(float) if y else None)
    if "rt_cdf" not in data:
        missing["rt_cdf"] = "series/response_cdf.csv is missing (no successful response to plot)"

    df = _series(run_dir, "rit.csv", "rit_samples.csv", "rit_cdf.csv")
    if df is not None:
        kind, val = _first_col(df, "kind", "series", "which"), _first_col(df, "rit_ms", "ms", "value")
        if kind and val:
            data["rit"] = {str(k): g[val].to_numpy(float) for k, g in df.groupby(kind)}
        else:
            ec, sc = _first_col(df, "expected_ms", "expected"), _first_col(df, "submitted_ms", "submitted")
            if ec and sc:
                data["rit"] = {"expected": df[ec].dropna().to_numpy(float), "submitted": df[sc].dropna().to_numpy(float)}
    if "rit" not in data:
        missing["rit"] = "series/rit.csv is missing (the GE wrote no requests.csv)"

    df = _series(run_dir, "rd.csv", "rd_series.csv")
    if df is not None and _t_seconds(df, start_ns) is not None:
        data["rd"] = df.assign(t_s=_t_seconds(df, start_ns))
    else:
        missing["rd"] = ("the contention detector was not enabled for this run (no cd-node)"
                         if not run.get("cd") and summary.get("rd") is None
                         else "series/rd.csv is missing (no device log could be read)")

    df, why = _cpu_cores(run_dir, start_ns)
    if df is not None:
        data["cpu_cores"] = df
    else:
        missing["cpu_cores"] = why
    df, why = load_cgroups(run_dir / "monitor" / "cgroups.csv", start_ns)
    if df is not None:
        data["cpu_containers"] = df
    else:
        missing["cpu_containers"] = why
    return data, missing


# --------------------------------------------------------------------------- entry point

def build_context(run_dir: Path | str) -> dict:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a run directory (it does not exist)")
    summary, err = _load_json(run_dir / "summary.json")
    if not isinstance(summary, dict):
        raise ReportError(f"{run_dir / 'summary.json'}: {err or 'not a JSON object'}; "
                          f"run `wotbench analyze {run_dir}` first")
    run, run_err = _load_json(run_dir / "run.json")
    run = run if isinstance(run, dict) else {}
    plan, plan_err = _load_json(run_dir / "plan.json")
    cfg_path = run_dir / "config.resolved.yaml"
    config_text = cfg_path.read_text(errors="replace") if cfg_path.is_file() else None

    contention = _contention(summary)
    overall = _overall(summary)
    data, missing = _load_series(run_dir, summary, run)
    interrupted = bool(pick(run, "interrupted", default=False) or pick(summary, "run.interrupted", default=False))
    name = pick(run, "name", default=None) or pick(summary, "run.name", default=run_dir.name)
    return {
        "run_dir": str(run_dir),
        "name": name,
        "run_id": pick(run, "run_id", default=None) or pick(summary, "run.run_id", default=run_dir.name),
        "backend": pick(run, "backend", default=None) or pick(summary, "run.backend", default="unknown"),
        "duration_s": overall["duration_s"] or num(pick(run, "test.duration_s")),
        "planned_duration_s": num(pick(run, "test.duration_s")),
        "n_devices": len(run.get("devices") or []) or pick(summary, "run.devices"),
        "device_groups": {str(d.get("name")): str(d.get("group") or str(d.get("name")).rpartition("-")[0])
                          for d in run.get("devices") or [] if isinstance(d, dict) and d.get("name")},
        "n_ges": len(run.get("ges") or []) or pick(summary, "run.ges"),
        "interrupted": interrupted,
        "failures": [f if isinstance(f, dict) else {"component": "", "what": str(f)} for f in run.get("failures") or []],
        "run_json_note": run_err,
        "host": _host(run),
        "placement": _placement(plan, plan_err, run),
        "verdict": _verdict(summary, contention),
        "contention": contention,
        "overall": overall,
        "outcome_rows": _outcome_rows(overall["outcomes"], overall["requests"]),
        "per_device": _per_device(summary),
        "ge": _ge(summary),
        "rd": _rd(summary),
        "cd_enabled": bool(run.get("cd")) or isinstance(summary.get("rd"), dict),
        "network": _network(run),
        "config_text": config_text,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "data": data,
        "missing": missing,
    }
