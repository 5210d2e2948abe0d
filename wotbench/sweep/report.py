"""The sweep report: one row of facts per point (read from each run's summary.json and series),
figures (:mod:`wotbench.sweep.figures`) and one self-contained HTML page.

The summary.json keys read are listed in ``CANDIDATES`` (first present wins; both the analysis
layout and older fixtures are accepted); wotbench/sweep/README.md documents them.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import yaml

from .core import Sweep
from .paths import get_path

# fact -> summary.json dotted paths, first present wins
CANDIDATES: dict[str, tuple[str, ...]] = {
    "devices": ("overall.devices", "run.devices"),
    "throughput_rps": ("overall.throughput_rps", "overall.achieved_rate"),
    "offered_rps": ("overall.offered_rps", "overall.offered_rate"),
    "rt_p50_ms": ("overall.response_time_ms.from_sent.p50", "overall.response_ms.p50"),
    "rt_mean_ms": ("overall.response_time_ms.from_sent.mean", "overall.response_ms.mean"),
    "rt_p95_ms": ("overall.response_time_ms.from_sent.p95", "overall.response_ms.p95"),
    "rd_devices": ("rd.overall.rd.p50", "rd.devices_ms.p50", "rd.devices.p50"),
    "rd_cd": ("rd.cd.test.p50", "rd.cd_ms.p50"),
    "rd_cd_baseline": ("rd.cd.calibration.p50", "rd.baseline_ms"),
    "cd_rt_ms": ("rd.cd.test.rt_p50_ms", "cd.response_ms.p50"),
    "ge_kept_up": ("ge_integrity.kept_up", "ge_integrity.ok"),
    "late_share": ("ge_integrity.late_share",),
    "ks": ("ge_integrity.ks",),
    "lag_p99_us": ("ge_integrity.send_lag_us.p99",),
    "cpu_total_pct": ("overall.cpu_busy_pct", "monitor.cpu_busy_pct"),
}


def _pick(summary: dict, fact: str) -> Any:
    for path in CANDIDATES[fact]:
        v = get_path(summary, path)
        if v is not None and not isinstance(v, (dict, list)):
            return v
        if fact == "devices" and isinstance(v, list):
            return len(v)
    return None


def _ge_facts(summary: dict) -> dict[str, Any]:
    """GE integrity: the analysis keeps it per GE; take the worst GE."""
    out = {k: _pick(summary, k) for k in ("ge_kept_up", "late_share", "ks", "lag_p99_us")}
    per_ge = get_path(summary, "ge_integrity.per_ge")
    if isinstance(per_ge, dict) and per_ge:
        def worst(*paths: str) -> Optional[float]:
            vals = []
            for b in per_ge.values():
                v = next((get_path(b, p) for p in paths if get_path(b, p) is not None), None)
                if isinstance(v, (int, float)):
                    vals.append(float(v))
            return max(vals) if vals else None
        out["late_share"] = out["late_share"] if out["late_share"] is not None else worst("late_share")
        out["ks"] = out["ks"] if out["ks"] is not None else worst("ks_tol", "ks")
        out["lag_p99_us"] = out["lag_p99_us"] if out["lag_p99_us"] is not None else \
            worst("send_lag_us.p99", "lag_us.p99")
    return out


def _cpu_total(run_dir: Path) -> Optional[float]:
    """Mean host CPU busy % (average over cores) from series/cpu_cores.csv, if present."""
    f = run_dir / "series" / "cpu_cores.csv"
    try:
        df = pd.read_csv(f)
    except (OSError, ValueError):
        return None
    col = next((c for c in ("busy_pct", "total_pct", "cpu_pct") if c in df), None)
    if col is None or "t_s" not in df:
        return None
    v = df.groupby("t_s")[col].mean().mean()
    return float(v) if math.isfinite(v) else None


def _config(sweep: Sweep, p) -> dict:
    try:
        return yaml.safe_load((sweep.dir / p.config).read_text()) or {}
    except OSError:
        return {}


def collect(sweep: Sweep, ids: Optional[set[str]] = None) -> list[dict[str, Any]]:
    """One row of facts per point (None where a fact is not available); ``ids``: only those."""
    rows = []
    for p in sweep.points:
        if ids is not None and p.id not in ids:
            continue
        sweep.refresh(p)
        summ = sweep.summary(p) or {}
        cfg = _config(sweep, p)
        run_dir = sweep.dir / p.run_dir if p.run_dir else None
        plan, run = {}, {}
        if run_dir:
            for name, target in (("plan.json", plan), ("run.json", run)):
                try:
                    target.update(json.loads((run_dir / name).read_text()))
                except (OSError, json.JSONDecodeError):
                    pass
        row: dict[str, Any] = {"id": p.id, "overrides": p.overrides, "status": p.status,
                               "verdict": p.verdict, "reasons": p.reasons, "error": p.error,
                               "exit_code": p.exit_code, "run_dir": p.run_dir, "has_summary": bool(summ)}
        row.update({k: _pick(summ, k) for k in CANDIDATES if not k.startswith(("ge_", "late", "ks", "lag"))})
        row.update(_ge_facts(summ))
        if row["devices"] is None and cfg.get("devices"):
            row["devices"] = sum(int(g.get("count", 1)) for g in cfg["devices"]) if summ else None
        row["affinity"] = plan.get("affinity") or get_path(cfg, "placement.affinity") or "pinned"
        n = row["devices"]
        row["tput_per_device"] = row["throughput_rps"] / n if n and row["throughput_rps"] is not None else None
        row["offered_per_device"] = row["offered_rps"] / n if n and row["offered_rps"] is not None else None
        if row["cd_rt_ms"] is None and row["rd_cd"] is not None:
            s_us = get_path(run, "cd.service_time_us")   # R = S (1 + R_d) holds for the median
            if isinstance(s_us, (int, float)) and get_path(summ, "rd.cd.test.p50") is not None:
                row["cd_rt_ms"] = s_us / 1000 * (1 + row["rd_cd"])
        if row["cpu_total_pct"] is None and run_dir:
            row["cpu_total_pct"] = _cpu_total(run_dir)
        report = run_dir / "report.html" if run_dir else None
        row["report"] = str(report.relative_to(sweep.dir)) if report and report.is_file() else None
        rows.append(row)
    return rows


def write_report(sweep: Sweep, capacity: Optional[dict] = None) -> Path:
    """Write ``<sweep dir>/report.html`` (self-contained) and return its path."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from . import figures
    rows = collect(sweep)
    env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    varied = sorted({k for p in sweep.points for k in p.overrides})
    page = env.get_template("sweep.html.j2").render(
        sweep=sweep.to_json(), rows=rows, varied=varied, figures=figures.make_figures(rows),
        capacity=capacity, esc=html.escape)
    out = sweep.dir / "report.html"
    out.write_text(page)
    return out


def _num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    return str(v)
