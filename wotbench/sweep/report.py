"""The sweep report: one row of facts per point (read from each run's summary.json and series),
figures (:mod:`wotbench.sweep.figures`) and one self-contained HTML page.

The summary.json keys read are listed in ``SUMMARY_KEYS`` (one key per fact, as the analysis
writes them: wotbench/analysis/README.md); wotbench/sweep/README.md lists them too.
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

# fact -> its key in a run's summary.json (wotbench/analysis/README.md documents every key)
SUMMARY_KEYS: dict[str, str] = {
    "devices": "overall.devices",
    "throughput_rps": "overall.throughput_rps",
    "offered_rps": "overall.offered_rps",
    "rt_p50_ms": "overall.response_time_ms.from_sent.p50_ms",
    "rt_mean_ms": "overall.response_time_ms.from_sent.mean_ms",
    "rt_p95_ms": "overall.response_time_ms.from_sent.p95_ms",
    "rd_devices": "rd.overall.rd.p50",
    "rd_cd": "rd.cd.test.p50",
    "rd_cd_baseline": "rd.cd.calibration.p50",
    "ge_kept_up": "ge_integrity.kept_up",
}


def _pick(summary: dict, fact: str) -> Any:
    v = get_path(summary, SUMMARY_KEYS[fact])
    return None if isinstance(v, (dict, list)) else v


def _ge_facts(summary: dict) -> dict[str, Any]:
    """GE integrity is kept per GE (ge_integrity.per_ge); a series shows the worst GE."""
    per_ge = get_path(summary, "ge_integrity.per_ge") or {}

    def worst(path: str, scale: float = 1.0) -> Optional[float]:
        vals = [float(v) * scale for b in per_ge.values()
                if isinstance(v := get_path(b, path), (int, float))]
        return max(vals) if vals else None
    return {"ge_kept_up": _pick(summary, "ge_kept_up"), "late_share": worst("late_share"),
            "ks": worst("ks_tol"), "lag_p99_us": worst("lag_ms.p99", 1000.0)}


def _cpu_total(run_dir: Path, run: dict) -> Optional[float]:
    """Mean host CPU busy % over all cores during the test, from collectl (monitor/cpu.csv)."""
    try:
        df = pd.read_csv(run_dir / "monitor" / "cpu.csv")
    except (OSError, ValueError):
        return None
    cols = [c for c in df.columns if c.startswith("[CPU:") and c.endswith("]Totl%")]
    if not cols or "mono_ns" not in df:
        return None
    start, dur = get_path(run, "test.start_mono_ns"), get_path(run, "test.duration_s")
    if isinstance(start, (int, float)) and isinstance(dur, (int, float)):
        df = df[(df["mono_ns"] >= start) & (df["mono_ns"] <= start + dur * 1e9)]
    v = float(df[cols].to_numpy(dtype=float).mean()) if len(df) else float("nan")
    return v if math.isfinite(v) else None


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
        row.update({k: _pick(summ, k) for k in SUMMARY_KEYS if k != "ge_kept_up"})
        row.update(_ge_facts(summ))
        if row["devices"] is None and summ and cfg.get("devices"):
            row["devices"] = sum(int(g.get("count", 1)) for g in cfg["devices"])
        row["affinity"] = plan.get("affinity") or get_path(cfg, "placement.affinity") or "pinned"
        n = row["devices"]
        row["tput_per_device"] = row["throughput_rps"] / n if n and row["throughput_rps"] is not None else None
        row["offered_per_device"] = row["offered_rps"] / n if n and row["offered_rps"] is not None else None
        # the CD's median response time: R = S (1 + R_d) holds for the median (S is fixed)
        s_us = get_path(run, "cd.service_time_us")
        row["cd_rt_ms"] = (s_us / 1000 * (1 + row["rd_cd"])
                           if isinstance(s_us, (int, float)) and row["rd_cd"] is not None else None)
        row["cpu_total_pct"] = _cpu_total(run_dir, run) if run_dir else None
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
