"""The sweep report: one row of facts per point (read from each run's typed summary.json,
run.json and plan.json), figures (:mod:`wotbench.sweep.figures`) and one self-contained page.
"""
from __future__ import annotations

import html
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from wotbench.config.schema import Config, Placement
from wotbench.deploy.plan import Plan
from wotbench.report.present import jinja_env
from wotbench.rundir import Summary
from wotbench.rundir import atomic
from wotbench.rundir.sut import MIB
from wotbench.sweep.aggregate import METRICS, Interval
from wotbench.distributed.answer import hosts_text
from wotbench.sweep.core import Point, Sweep
from wotbench.sweep.repeats import ORDER
from wotbench.sweep.rows import PointRow, RunFacts


def _facts(s: Optional[Summary]) -> RunFacts:
    """The facts a series shows, from one point's summary (None when it has none)."""
    if s is None:
        return RunFacts()
    o, rt, cd, ge = s.overall, s.overall.response_time_ms.from_sent, s.rd.cd, s.ge_integrity
    lag_ms = ge.worst_lag_p99_ms      # GE integrity is per GE: the row shows the worst GE
    sut = s.sut_resources.total if s.sut_resources else None
    return RunFacts(
        devices=o.devices, throughput_rps=o.throughput_rps, offered_rps=o.offered_rps,
        rt_p50_ms=rt.p50_ms, rt_mean_ms=rt.mean_ms, rt_p95_ms=rt.p95_ms, rt_p99_ms=rt.p99_ms,
        loss_share=o.loss_rate_of_sent, timeouts=o.outcomes.timeout,
        sut_cpu_cores=sut.cpu_cores if sut else None,
        sut_rss_peak_mib=sut.rss_peak_bytes / MIB if sut and sut.rss_peak_bytes is not None
        else None,
        rd_devices=s.rd.overall.rd.p50, rd_cd=cd.test.p50 if cd else None,
        rd_cd_baseline=cd.calibration.p50 if cd else None,
        ge_kept_up=ge.kept_up, late_share=ge.worst_late_share, ks=ge.worst_ks_tol,
        lag_p99_us=lag_ms * 1000.0 if lag_ms is not None else None,
        cpu_total_pct=s.monitor.host_cpu_busy_pct if s.monitor else None,
        testbed_ms=s.contention.added_ms, testbed_share=s.contention.added_share,
        testbed_worst_share=s.contention.worst_share, **_notify_facts(s))


NOTIFY_FACTS = ("notify_p50_ms", "notify_p99_ms", "notify_per_s", "notify_lost_share")


def _notify_facts(s: Summary) -> dict[str, Optional[float]]:
    """The notification sink's figures (None without ``notify:``): the worst subscriber's
    latency and lost share, every subscriber's notifications/s together."""
    subs = s.notify.subscribers if s.notify else []
    if not subs:
        return dict.fromkeys(NOTIFY_FACTS)

    def worst(values) -> Optional[float]:
        known = [v for v in values if v is not None]
        return max(known) if known else None
    return {"notify_p50_ms": worst(x.latency_ms.p50 for x in subs),
            "notify_p99_ms": worst(x.latency_ms.p99 for x in subs),
            "notify_per_s": sum(x.notifications_per_s for x in subs),
            "notify_lost_share": worst(x.lost_share for x in subs)}


def _affinity(sweep: Sweep, p: Point, plan: Optional[Plan]) -> str:
    """How the point's devices were placed: the plan's, else (a point that has not run) its
    config's. The config is read against the schema only: the sweep validated it when it was
    made, and its trace files need not exist where the report is rendered."""
    if plan is not None:
        return plan.affinity
    try:
        return Config.model_validate(yaml.safe_load((sweep.dir / p.config).read_text())
                                     ).placement.affinity
    except (OSError, yaml.YAMLError, ValidationError):
        return Placement().affinity


def _read(read) -> Any:
    try:
        return read()
    except (OSError, ValueError):
        return None


def collect(sweep: Sweep, ids: Optional[set[str]] = None) -> list[PointRow]:
    """One row per point (None where a fact is not available); ``ids``: only those. Reads the
    points as they are: the caller refreshes the sweep first."""
    rows = []
    for p in sweep.points:
        if ids is not None and p.id not in ids:
            continue
        rd = sweep.run_dir(p)
        summ = sweep.summary(p)
        run = _read(rd.read_run) if rd else None
        plan = _read(lambda: Plan.model_validate_json(rd.plan_json.read_text())) if rd else None
        f = _facts(summ)
        n = f.devices
        # the CD's median response time: R = S (1 + R_d) holds for the median (S is fixed)
        s_us = run.cd.service_time_us if run and run.cd else None
        report = rd.rel(rd.report_html) if rd and rd.report_html.is_file() else None
        rows.append(PointRow(
            **{k.name: getattr(f, k.name) for k in fields(RunFacts)},
            id=p.id, setting=p.setting, repeat=p.repeat, overrides=p.overrides,
            status=p.status, verdict=p.verdict, reasons=p.reasons, error=p.error,
            exit_code=p.exit_code, run_dir=p.run_dir, has_summary=summ is not None,
            host=hosts_text([p.host]) if p.host else None,
            affinity=_affinity(sweep, p, plan),
            tput_per_device=f.throughput_rps / n if n and f.throughput_rps is not None else None,
            offered_per_device=f.offered_rps / n if n and f.offered_rps is not None else None,
            cd_rt_ms=(s_us / 1000 * (1 + f.rd_cd)
                      if s_us is not None and f.rd_cd is not None else None),
            report=f"{p.run_dir}/{report}" if report else None))
    return rows


# digits and scale of a metric's unit in the results table
_UNIT_FORMAT = {"req/s": (1, 1.0, ""), "ms": (2, 1.0, ""), "share": (2, 100.0, " %"),
                "requests": (1, 1.0, ""), "cores": (3, 1.0, ""), "MiB": (1, 1.0, ""),
                "1/s": (1, 1.0, "")}


def ci_text(iv: Interval, unit: str) -> str:
    """'12.3 ± 0.4' (n ≥ 2), '12.3' (one repeat), '—' (no value)."""
    digits, scale, suffix = _UNIT_FORMAT.get(unit, (2, 1.0, ""))
    if iv.mean is None:
        return "—"
    text = f"{iv.mean * scale:.{digits}f}"
    if iv.half_width is not None:
        text += f" ± {iv.half_width * scale:.{digits}f}"
    return text + suffix


def _shown(res) -> list[tuple[str, str, str]]:
    """The metrics of the results table: the SUT's only when some setting has them."""
    return [m for m in METRICS if not m[0].startswith(("sut_", "notify_"))
            or any(st.metrics[m[0]].mean is not None for st in res.settings)]


def _varied(sweep: Sweep) -> list[str]:
    """The varied keys: --vary's in their order, then the matrix's and capacity's."""
    keys = [v["key"] for v in sweep.header.vary or []]
    return keys + sorted({k for p in sweep.points for k in p.overrides} - set(keys))


def write_report(sweep: Sweep, capacity: Optional[Any] = None) -> Path:
    """Write ``<sweep dir>/report.html`` (self-contained) with the results beside it
    (``results.json``, ``points.csv``, ``settings.csv``) and return the report's path.
    ``capacity``: a capacity search's ``wotbench.capacity.result.CapacityResult`` (typed; not
    imported here, the capacity search sits above the sweep)."""
    from wotbench.sweep import ci_figures, figures, results
    rows = collect(sweep)
    varied = _varied(sweep)
    res = results.build(rows, varied, sweep.repeats, sweep.header.order or ORDER)
    results.write(sweep.dir, res)
    page = jinja_env("wotbench.sweep").get_template("sweep.html.j2").render(
        sweep=sweep.to_json(), rows=rows, varied=varied, figures=figures.make_figures(rows),
        capacity=capacity, esc=html.escape, results=res, metrics=_shown(res), ci_text=ci_text,
        ci_figures=ci_figures.make_ci_figures(res) if capacity is None else [])
    out = sweep.files.report_html
    atomic.write_text(out, page)
    return out
