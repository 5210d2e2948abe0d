"""Gathers everything the report shows from a run directory (docs/CONTRACTS.md §4, §6, §7).

`build_context(run_dir)` returns a plain dict for the Jinja2 template plus, under "data", the
pandas frames the figures are drawn from. Only summary.json is required; every other input is
optional and, when absent, leaves a "not available because ..." note instead of a section.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import shlex
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
    if contention.get("windows"):
        detail = (f"from {contention['onset_s']:g} s, " if contention.get("onset_s") is not None else "") + \
            f"{len(contention['windows'])} window(s), {contention['contended_s']:.0f} s in total"
        if contention.get("contended_share") is not None:
            detail += f" ({contention['contended_share']:.0%} of the test)"
        if contention.get("peak_ratio"):
            detail += f"; CD node response time up to {contention['peak_ratio']:.2f}× its calibration baseline"
        detail += ": " + ", ".join(w["label"] for w in contention["windows"])
    checks = v.get("checks") if isinstance(v.get("checks"), dict) else {}
    return {"status": status, "cls": cls, "headline": headline, "explain": explain, "reasons": reasons,
            "detail": detail, "exit_code": v.get("exit_code"), "checks": checks}


CONTENTION_STATUS = {"detected": ("warn", "contention detected"), "none": ("ok", "no contention"),
                     "inconclusive": ("unknown", "inconclusive"), "not_checked": ("unknown", "not checked")}


def _contention(summary: dict, duration_s: float | None) -> dict:
    c = summary.get("contention")
    if not isinstance(c, dict):
        c = {"status": "not_checked", "reason": "summary.json has no 'contention' section"}
    status = str(c.get("status") or ("detected" if c.get("flagged_windows") else "not_checked"))
    wins = []
    for w in c.get("flagged_windows") or c.get("windows") or []:
        a, b = num(pick(w, "start_s", "start")), num(pick(w, "end_s", "end"))
        if a is None or b is None:
            continue
        wins.append({"start_s": a, "end_s": b, "duration_s": b - a, "shift": num(w.get("shift")),
                     "ratio": num(pick(w, "ratio", "peak_ratio")), "p_value": num(w.get("p_value")),
                     "label": f"{a:g}–{b:g} s"})
    total = sum(w["duration_s"] for w in wins)
    base = c.get("baseline") if isinstance(c.get("baseline"), dict) else {}
    b_med, thr = num(base.get("median_rd")), num(base.get("threshold_shift"))
    ratios = [w["ratio"] for w in wins if w["ratio"]]
    pill_cls, pill = CONTENTION_STATUS.get(status, ("unknown", status))
    return {"status": status, "available": status in ("detected", "none"), "detected": status == "detected",
            "pill": pill, "pill_cls": pill_cls, "reason": c.get("reason"), "windows": wins,
            "contended_s": total, "contended_share": total / duration_s if duration_s else None,
            "peak_ratio": num(c.get("max_ratio")) or (max(ratios) if ratios else None),
            "onset_s": num(c.get("onset_s")), "windows_tested": c.get("windows_tested"),
            "baseline_rd": b_med, "threshold_rd": (b_med + thr) if b_med is not None and thr is not None else None,
            "threshold_shift": thr, "baseline_samples": base.get("samples")}


def _host(run: dict) -> list[tuple[str, str]]:
    h = run.get("host") or {}
    rows = [("Host", pick(h, "hostname", "name")), ("CPU", pick(h, "cpu_model", "cpu")),
            ("Cores", pick(h, "cores", "ncpu", "cpus")), ("Kernel", pick(h, "kernel", "kernel_release")),
            ("Docker", pick(h, "docker_version", "docker", "docker_server_version"))]
    return [(k, str(v)) for k, v in rows if v is not None]


def _placement(plan: dict | None, plan_err: str | None) -> dict:
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


def _rt_stats(block: dict) -> dict:
    """The response-time stats of an overall/per-device block: `response_time_ms.from_sent`
    (analysis) with p50_ms... keys, normalised to {count, mean, p50, p90, p95, p99, p999, max}."""
    rt = pick(block, "response_time_ms.from_sent", "response_time_ms", "response_ms", default={}) or {}
    return {k: pstat(rt, k) for k in ("mean", "p50", "p90", "p95", "p99", "p999", "max")} | \
        {"count": rt.get("count")}


def _overall(summary: dict) -> dict:
    o = summary.get("overall") or {}
    outcomes = o.get("outcomes") or {}
    rates = o.get("rates") or {}
    requests = num(o.get("requests"))
    if requests is None:
        requests = float(sum(v for v in outcomes.values() if isinstance(v, (int, float))))
    duration = num(pick(o, "duration_s")) or num(pick(summary, "run.duration_s"))
    ok = num(outcomes.get("ok"))
    achieved = num(pick(o, "throughput_rps", "achieved_rate"))
    if achieved is None and ok is not None and duration:
        achieved = ok / duration
    return {"requests": requests, "sent": num(o.get("sent")), "outcomes": outcomes, "rt": _rt_stats(o),
            "achieved_rate": achieved, "offered_rate": num(pick(o, "offered_rps", "offered_rate")),
            "success_share": _share(rates, "ok", ok, requests),
            "loss_rate_of_sent": num(o.get("loss_rate_of_sent")), "duration_s": duration}


def _share(rates: dict, outcome: str, count: float | None, requests: float | None) -> float | None:
    """Share of all requests with ``outcome``: the analysis's ``overall.rates`` value, computed
    from the counts only for a summary without it."""
    if outcome in rates:
        return num(rates[outcome])
    return count / requests if count is not None and requests else None


def _outcome_rows(outcomes: dict, requests: float | None, rates: dict) -> list[dict]:
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
        rows.append({"outcome": k, "count": int(v), "share": _share(rates, k, v, requests),
                     "meaning": meaning.get(k, "")})
    return rows


def _per_device(summary: dict) -> list[dict]:
    pdv = summary.get("per_device") or {}
    if isinstance(pdv, list):
        pdv = {str(pick(d, "device", "name", default=i)): d for i, d in enumerate(pdv) if isinstance(d, dict)}
    rows = []
    for name, d in pdv.items():
        if not isinstance(d, dict):
            continue
        oc = d.get("outcomes") or {}
        req = num(d.get("requests"))
        ok = num(oc.get("ok"))
        rows.append({"device": str(name), "ge": d.get("ge"), "requests": req, "ok": ok,
                     "failed": (req - ok - (num(oc.get("unsent")) or 0)) if req is not None and ok is not None else None,
                     "throughput": num(d.get("throughput_rps")), **_rt_stats(d)})
    return rows


def _ge_row(gid: str, g: dict) -> dict:
    e, s = g.get("expected_rit") or {}, g.get("submitted_rit") or {}
    lag = g.get("lag_ms") or {}
    return {"ge": gid, "kept_up": g.get("kept_up"), "problems": [str(p) for p in g.get("problems") or []],
            "expected": {k: pstat(e, k) for k in ("mean", "p5", "p50")},
            "submitted": {k: pstat(s, k) for k in ("mean", "p5", "p50")},
            "ks": num(g.get("ks")), "ks_tol": num(g.get("ks_tol")), "late_share": num(g.get("late_share")),
            "early_share": num(g.get("early_share")), "lag_p50": num(lag.get("p50")),
            "lag_p99": num(lag.get("p99")), "lag_max": num(lag.get("max")), "sent": g.get("sent"),
            "not_kept_up": g.get("devices_not_kept_up") or []}


def _ge(summary: dict) -> dict:
    g = summary.get("ge_integrity")
    if not isinstance(g, dict) or not isinstance(g.get("per_ge"), dict):
        return {"available": False, "reason": "summary.json has no 'ge_integrity.per_ge' section"}
    rows = [_ge_row(gid, b) for gid, b in g["per_ge"].items() if isinstance(b, dict)]
    if isinstance(g.get("cd_ge"), dict):
        rows.append(_ge_row("cd-ge", g["cd_ge"]) | {"is_cd": True})
    rule = g.get("rule") or {}
    return {"available": True, "rows": rows, "ok": g.get("kept_up"),
            "late_threshold_ms": num(rule.get("late_threshold_ms")),
            "max_late_share": num(rule.get("max_late_share")), "max_ks": num(rule.get("max_ks"))}


def _rd(summary: dict) -> dict:
    r = summary.get("rd")
    if not isinstance(r, dict):
        return {"available": False}
    cd = r.get("cd") if isinstance(r.get("cd"), dict) else None
    return {"available": True, "definition": r.get("definition"),
            "devices": pick(r, "overall.rd", default={}) or {},
            "cd_calibration": (cd or {}).get("calibration") or {}, "cd_test": (cd or {}).get("test") or {},
            "cd_device": (cd or {}).get("device")}


# device-summary.json "impair" counts shown per impairment (CONTRACTS §3)
IMPAIR_COUNTERS = ("dropped_in", "dropped_out", "duplicated", "corrupted")


def _network(run: dict) -> dict:
    """run.json `network` as written by wotbench.netimpair ({backend, devices: {name: {describe,
    impairment, applied}}, ...}, plus the runner's requested/reasons and app counters); devices
    with the same impairment are listed together, with what was applied to each."""
    net = run.get("network")
    if not isinstance(net, dict) or not net.get("devices"):
        return {"applied": False, "rows": [], "backend": (net or {}).get("backend") if isinstance(net, dict) else None}
    by_spec: dict[str, list[str]] = {}
    applied: dict[str, list[tuple[str, str]]] = {}
    counters: dict[str, dict[str, int]] = {}
    for dev, d in net["devices"].items():
        spec = (d.get("describe") or _fmt_spec(d.get("impairment"))) if isinstance(d, dict) else _fmt_spec(d)
        by_spec.setdefault(str(spec), []).append(str(dev))
        if isinstance(d, dict):
            applied.setdefault(str(spec), []).append((str(dev), _applied_text(d.get("applied"))))
            for k, v in (d.get("counters") or {}).items():
                if k in IMPAIR_COUNTERS and isinstance(v, (int, float)):
                    counters.setdefault(str(spec), {}).setdefault(k, 0)
                    counters[str(spec)][k] += v
    rows = [{"target": _compress(devs), "spec": spec, "applied": applied.get(spec, []),
             "counters": counters.get(spec)} for spec, devs in by_spec.items()]
    reasons = net.get("reasons") if isinstance(net.get("reasons"), list) else []
    return {"applied": bool(rows), "rows": rows, "backend": net.get("backend"),
            "requested": net.get("requested"), "reasons": [str(r) for r in reasons],
            "removed": net.get("removed")}


def _applied_text(a: Any) -> str:
    """netem/pumba: a list of command lines (one per line); app: the wot-device arguments."""
    if not isinstance(a, list):
        return str(a or "")
    items = [str(x) for x in a]
    if items and all(" " in x for x in items):
        return "\n".join(items)
    return shlex.join(items)


def _injected(run: dict) -> list[dict]:
    """run.json `contention`: the contention episodes injected on purpose (wotbench.contention_inject)."""
    eps = run.get("contention")
    return [{"name": e.get("name"), "kind": e.get("kind"), "cores": e.get("cores"),
             "start_s": num(e.get("start_s")), "end_s": num(e.get("end_s"))}
            for e in (eps if isinstance(eps, list) else []) if isinstance(e, dict)]


def _fmt_spec(spec: Any) -> str:
    if isinstance(spec, dict):
        return ", ".join(f"{k}={v}" for k, v in spec.items() if v is not None) or "none"
    return str(spec)


# --------------------------------------------------------------------------- time series

def _t_seconds(df: pd.DataFrame, start_ns: float | None) -> pd.Series | None:
    """Seconds since the test start from a `second`/`t_s` column or a CLOCK_MONOTONIC `mono_ns`."""
    c = _first_col(df, "t_s", "second", "time_s", "start_s")
    if c is not None:
        return pd.to_numeric(df[c], errors="coerce")
    c = _first_col(df, "mono_ns", "t_ns")
    if c is not None:
        t = pd.to_numeric(df[c], errors="coerce").astype(float)
        return (t - (start_ns if start_ns is not None else t.min())) / 1e9
    return None


def load_cgroups(path: Path, start_ns: float | None) -> tuple[pd.DataFrame | None, str | None]:
    """monitor/cgroups.csv (cumulative `cpu_ns`, `runqueue_ns` per component) -> long frame
    t_s, component, cpu_pct (% of one core), runq_ms_per_s (run-queue wait per second)."""
    df = _read_csv(path)
    if df is None:
        return None, "monitor/cgroups.csv is missing or empty (monitoring was off or stopped early)"
    t = _t_seconds(df, start_ns)
    name = _first_col(df, "component", "container", "name")
    cpu = _first_col(df, "cpu_ns", "cpu_usage_ns")
    if t is None or name is None or cpu is None:
        return None, f"monitor/cgroups.csv lacks mono_ns/component/cpu_ns columns (has {', '.join(map(str, df.columns))})"
    out = pd.DataFrame({"t_s": t, "component": df[name].astype(str),
                        "cpu": pd.to_numeric(df[cpu], errors="coerce")})
    rq = _first_col(df, "runqueue_ns")
    out["rq"] = pd.to_numeric(df[rq], errors="coerce") if rq else np.nan
    out = out.sort_values(["component", "t_s"])
    g = out.groupby("component")
    dt = g["t_s"].diff()
    out["cpu_pct"] = (g["cpu"].diff() / 1e9 / dt * 100).where(dt > 0)
    out["runq_ms_per_s"] = (g["rq"].diff() / 1e6 / dt).where(dt > 0)
    out = out.dropna(subset=["cpu_pct"])[["t_s", "component", "cpu_pct", "runq_ms_per_s"]]
    return (out, None) if len(out) else (None, "monitor/cgroups.csv has fewer than two samples per component")


def _cpu_wide(df: pd.DataFrame, t: pd.Series) -> pd.DataFrame | None:
    """collectl per-core columns ([CPU:n]Totl%, else 100 - [CPU:n]Idle%) -> t_s, core, busy_pct."""
    out = []
    for c in df.columns:
        m = re.fullmatch(r"\[CPU:(\d+)\](Totl|Idle)%", str(c))
        if not m:
            continue
        core, kind = m.groups()
        if kind == "Idle" and f"[CPU:{core}]Totl%" in df.columns:
            continue
        v = pd.to_numeric(df[c], errors="coerce")
        out.append(pd.DataFrame({"t_s": t, "core": core, "busy_pct": v if kind == "Totl" else 100 - v}))
    return pd.concat(out, ignore_index=True).dropna() if out else None


def load_collectl_files(mon: Path) -> pd.DataFrame | None:
    """Raw collectl plot files (monitor/collectl/*.cpu, `#UTC` header, -oUzm) when the runner did
    not leave monitor/cpu.csv; time is relative to the first sample."""
    for f in sorted((mon / "collectl").glob("*.cpu")) if (mon / "collectl").is_dir() else []:
        try:
            lines = f.read_text(errors="replace").splitlines()
        except OSError:
            continue
        hdr = next((ln for ln in lines if ln.startswith("#UTC")), None)
        if hdr is None:
            continue
        cols = ["utc_s"] + hdr.split()[1:]
        rows = [r for r in (ln.split() for ln in lines if ln and not ln.startswith("#")) if len(r) == len(cols)]
        if rows:
            df = pd.DataFrame(rows, columns=cols)
            t = pd.to_numeric(df["utc_s"], errors="coerce")
            return _cpu_wide(df, t - t.min())
    return None


def _cpu_cores(run_dir: Path, start_ns: float | None) -> tuple[pd.DataFrame | None, str | None]:
    mon = run_dir / "monitor"
    if not mon.is_dir():
        return None, "the run has no monitor/ directory (monitoring was disabled or the run stopped before it started)"
    df = _read_csv(mon / "cpu.csv")
    t = _t_seconds(df, start_ns) if df is not None else None
    if t is not None:
        out = _cpu_wide(df, t)
        if out is not None:
            return out, None
    out = load_collectl_files(mon)
    if out is not None:
        return out, None
    return None, ("no per-core CPU data: neither monitor/cpu.csv nor a collectl *.cpu file was found "
                  "(is collectl installed on the host?)")


def _requests(run_dir: Path, run: dict) -> pd.DataFrame | None:
    """ok/code/response time of every main-GE request (for the CDF and the code table)."""
    frames = []
    ges = run.get("ges") or [{"id": p.name, "dir": f"ge/{p.name}"} for p in sorted((run_dir / "ge").glob("*"))]
    for g in ges:
        path = run_dir / str(g.get("dir", f"ge/{g.get('id')}")) / "requests.csv"
        if not path.is_file():
            continue
        try:
            df = pd.read_csv(path, usecols=["sent_ns", "received_ns", "code", "outcome"],
                             dtype={"code": str, "outcome": str})
        except (OSError, ValueError):
            continue
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else None


def _load_series(run_dir: Path, summary: dict, run: dict) -> tuple[dict, dict]:
    start_ns = num(pick(run, "test.start_mono_ns")) or num(pick(summary, "run.test_start_mono_ns"))
    data: dict[str, Any] = {}
    missing: dict[str, str] = {}

    df = _series(run_dir, "response_times.csv")
    if df is not None and "device" in df:
        df = df[df["device"].astype(str) == "all"]
    t = _t_seconds(df, start_ns) if df is not None and len(df) else None
    if t is not None:
        df = df.assign(t_s=t)
        oc = _series(run_dir, "outcomes_over_time.csv")
        t_oc = _t_seconds(oc, start_ns) if oc is not None else None
        if t_oc is not None:
            cols = [c for c in oc.columns if c in ("ok", "error", "timeout", "reset")]
            sent = pd.DataFrame({"t_s": t_oc, "sent": oc[cols].sum(axis=1)})
            df = df.merge(sent, on="t_s", how="outer").sort_values("t_s")
        data["rt_time"] = df
    else:
        missing["rt_time"] = "series/response_times.csv is missing or empty (no request was answered, or the analysis did not run)"

    req = _requests(run_dir, run)
    if req is not None:
        ok = req[req["outcome"] == "ok"]
        rt = ((ok["received_ns"] - ok["sent_ns"]) / 1e6).dropna().to_numpy(float)
        if len(rt):
            data["rt_cdf"] = (np.sort(rt), None)
        codes = req["code"].fillna("").astype(str)
        data["codes"] = {c: int(n) for c, n in codes[codes != ""].value_counts().sort_index().items()}
    if "rt_cdf" not in data:
        missing["rt_cdf"] = ("no successful response in ge/*/requests.csv" if req is not None
                             else "no ge/*/requests.csv was found in the run directory")

    df = _series(run_dir, "rit_cdf.csv")
    if df is not None and {"cdf", "expected_rit_ms", "submitted_rit_ms"} <= set(df.columns):
        gcol = df["ge"].astype(str) if "ge" in df else pd.Series("ge", index=df.index)
        data["rit"] = {ge: (g["cdf"].to_numpy(float), g["expected_rit_ms"].to_numpy(float),
                            g["submitted_rit_ms"].to_numpy(float))
                       for ge, g in df.groupby(gcol) if ge != "cd-ge"}
    if not data.get("rit"):
        data.pop("rit", None)
        missing["rit"] = "series/rit_cdf.csv is missing (the GE sent fewer than two requests per device, or the analysis did not run)"

    rd = _series(run_dir, "rd_over_time.csv")
    cd = _series(run_dir, "cd_samples.csv")
    if (rd is not None and "device" in rd) or (cd is not None and {"t_s", "rd"} <= set(cd.columns)):
        data["rd"] = {"windows": rd if rd is not None and "device" in rd else None,
                      "cd": cd if cd is not None and {"t_s", "rd"} <= set(cd.columns) else None}
    else:
        missing["rd"] = ("the contention detector was not enabled for this run (no CD node)"
                         if not run.get("cd") and not pick(summary, "rd.cd")
                         else "series/rd_over_time.csv and series/cd_samples.csv are missing (no R_d could be computed)")

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

    overall = _overall(summary)
    contention = _contention(summary, overall["duration_s"] or num(pick(run, "test.duration_s")))
    data, missing = _load_series(run_dir, summary, run)
    overall["codes"] = data.pop("codes", {})
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
        "placement": _placement(plan, plan_err),
        "verdict": _verdict(summary, contention),
        "contention": contention,
        "overall": overall,
        "outcome_rows": _outcome_rows(overall["outcomes"], overall["requests"],
                                      pick(summary, "overall.rates", default=None) or {}),
        "per_device": _per_device(summary),
        "ge": _ge(summary),
        "rd": _rd(summary),
        "cd_enabled": bool(run.get("cd")) or isinstance(summary.get("rd"), dict),
        "network": _network(run),
        "injected": _injected(run),
        "config_text": config_text,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "data": data,
        "missing": missing,
    }
