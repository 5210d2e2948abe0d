"""The merged report of a run across hosts: one self-contained ``report.html`` in the merged
run directory (docs/CLUSTER.md).

    render_cluster(merged_dir, out=None) -> Path

The run's verdict and each cell's (naming the host that stopped being faithful), the merged
percentiles and throughput from the raw requests, the clocks, the split, and links to the
cells' own reports. The page wears the run report's style sheet, read from its template, so
the two never drift apart.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from markupsafe import Markup

from wotbench.distributed.report_data import load
from wotbench.distributed.report_figures import make_figures
from wotbench.report.present import jinja_env
from wotbench.rundir import MergedRunDir, atomic

TEMPLATE = "cluster.html.j2"
RUN_TEMPLATE = "report.html.j2"
BANNER = {"trustworthy": "ok", "ge_bottleneck": "warn", "contention": "warn",
          "testbed_loss": "bad", "invalid": "bad"}


def run_report_style() -> str:
    """The ``<style>`` block of the run report's template (the one style of the reports)."""
    text = (resources.files("wotbench.report") / "templates" / RUN_TEMPLATE).read_text()
    m = re.search(r"<style>.*?</style>", text, flags=re.S)
    if m is None:
        raise RuntimeError(f"wotbench/report/templates/{RUN_TEMPLATE} has no <style> block")
    return m.group(0)


def render_cluster_html(merged_dir: Path | str) -> str:
    data = load(merged_dir)
    figs = make_figures(data.rows)
    for f in figs:
        if f["svg"]:
            f["svg"] = Markup(f["svg"])   # produced by matplotlib, not user text
    rt = data.merged.overall.response_time_ms
    return jinja_env("wotbench.distributed").get_template(TEMPLATE).render(
        d=data, m=data.merged, v=data.merged.verdict, rt=rt.from_sent, rt_sched=rt.from_scheduled,
        banner=BANNER.get(data.merged.verdict.status, "unknown"), figures=figs,
        style=Markup(run_report_style()),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def render_cluster(merged_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write ``<merged_dir>/report.html`` (or ``out``) and return its path."""
    html = render_cluster_html(merged_dir)
    return atomic.write_text(Path(out) if out else MergedRunDir(merged_dir).report_html, html)
