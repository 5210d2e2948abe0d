"""WoTbench analysis: turns a run directory into summary.json, series/*.csv and a verdict.

Public API::

    analyze(run_dir, params=None, write=True) -> Summary   # also written to summary.json
    main(run_dir) -> int      # prints the verdict; 0 trustworthy, 3 flagged/invalid,
                              # 4 trustworthy but an SLO missed, 2 bad input

See README.md in this package for every key of summary.json and every series file.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from wotbench.rundir import (AnalysisParams, ContentionParams, GeIntegrityParams, RdParams,
                             Summary)

from wotbench.analysis.errors import AnalysisError, WotbenchError
from wotbench.analysis.loading import load_run
from wotbench.analysis.summary import build, write as _write

__all__ = ["analyze", "main", "AnalysisParams", "GeIntegrityParams", "RdParams",
           "ContentionParams", "AnalysisError", "Summary", "WotbenchError"]


def analyze(run_dir: str | Path, params: AnalysisParams | None = None,
            write: bool = True) -> Summary:
    """Analyse ``run_dir``; write ``summary.json`` and ``series/*.csv`` there (if ``write``).

    Raises AnalysisError (exit_code 2) for missing or malformed input files.
    """
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    summary, series = build(run, params or AnalysisParams())
    if write:
        _write(run_dir, summary, series)
    return summary


def main(run_dir: str | Path, params: AnalysisParams | None = None) -> int:
    """Analyse, print the verdict with rich; return 0 (trustworthy), 3 (flagged), 4 (trustworthy,
    SLO missed), 2 (bad input)."""
    from rich.console import Console

    console = Console()
    try:
        summary = analyze(run_dir, params)
    except WotbenchError as exc:
        sys.stderr.write(f"wotbench: error: {exc}\n")  # the CLI's one error format
        return int(getattr(exc, "exit_code", 2) or 2)
    print_summary(summary, console)
    return summary.verdict.exit_code


def print_summary(summary: Summary, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    ov = summary.overall
    rt = ov.response_time_ms.from_sent
    rts = ov.response_time_ms.from_scheduled

    def f(x: Any, fmt: str = ".3f") -> str:
        return "-" if x is None else format(x, fmt)

    t = Table(title=f"run {summary.run.name or summary.run.run_dir}")
    for col in ("requests", "ok", "timeout", "error", "reset", "unsent", "thr/s", "p50 ms",
                "p99 ms", "p99 (sched) ms"):
        t.add_column(col, justify="right")
    oc = ov.outcomes
    t.add_row(str(ov.requests), str(oc.ok), str(oc.timeout), str(oc.error),
              str(oc.reset), str(oc.unsent), f(ov.throughput_rps, ".1f"),
              f(rt.p50_ms), f(rt.p99_ms), f(rts.p99_ms))
    console.print(t)
    for gid, g in summary.ge_integrity.per_ge.items():
        ok = g.kept_up
        mark = "[green]kept up[/]" if ok else ("[yellow]not checked[/]" if ok is None
                                                 else "[red]did NOT keep up[/]")
        console.print(f"GE {gid}: {mark}  late share {f(g.late_share, '.2%')} beyond "
                      f"{f(g.tolerance_ms)} ms (p {f(g.late_p_value, '.2g')}), lag p99 "
                      f"{f(g.lag_ms.p99)} ms, KS {f(g.ks)} (±5 % {f(g.ks_tol)}, limit "
                      f"{f(g.ks_limit)})")
    c = summary.contention
    colour = {"detected": "red", "none": "green"}.get(c.status, "yellow")
    console.print(f"contention: [{colour}]{c.status}[/] — {c.reason}")
    v = summary.verdict
    colour = {"trustworthy": "green", "invalid": "red"}.get(v.status, "red")
    console.print(f"[bold]verdict: [{colour}]{v.status}[/][/] (exit {v.exit_code})")
    for r in v.reasons:
        console.print(f"  - {r}", highlight=False)
    if summary.slo is not None:
        colour = "green" if summary.slo.status == "met" else "red"
        console.print(f"[{colour}]{summary.slo.text}[/]", highlight=False)
        if summary.slo.testbed_caveat:
            console.print(f"  ({summary.slo.testbed_caveat})", highlight=False)
    for w in summary.run.warnings:
        console.print(f"  [yellow]warning:[/] {w}", highlight=False)
