"""wotbench.distributed.report: the merged report.html of a run across hosts, rendered from a
synthetic merged directory (two analysed cells and a lost one, the clocks, the split)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from cluster_fixtures import make_cell
from wotbench.distributed import clock
from wotbench.distributed.merge import CellOutcome, merge
from wotbench.distributed.split import CellShare, Split
from wotbench.report import render
from wotbench.distributed.report import render_cluster, run_report_style
from wotbench.distributed.report_data import load
from wotbench.rundir import MergedRunDir
from wotbench.report.view import ReportError
from wotbench.report.present import ms, rate

DURATION_S = 8


def _est(offset_us: float, delay_us: int) -> clock.Estimate:
    return clock.Estimate(offset_ns=offset_us * 1e3, delay_ns=delay_us * 1000, samples=16,
                          valid=16)


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    d = tmp_path_factory.mktemp("merged")
    make_cell(d, "n1", 0, n_devices=3, duration_s=DURATION_S, seed=4, queue_us=100)
    make_cell(d, "n2", 100, n_devices=2, duration_s=DURATION_S, seed=5, queue_us=3000,
              rate_per_device=80)
    render(MergedRunDir(d).cell_dir("n1"))    # n1's own report rendered, n2's not
    clocks = [clock.CellClock(node="n1", before=_est(12, 30), after=_est(15, 28)),
              clock.CellClock(node="n2", before=_est(-7, 40), after=_est(-9, 44)),
              clock.CellClock(node="n3", before=_est(3, 20))]   # lost: no "after"
    check = clock.check(clocks, bound_ns=1_000_000)
    merge(d, [CellOutcome(node="n1"), CellOutcome(node="n2"),
              CellOutcome(node="n3", finished=False, why="node lost at t=3 s")], check)
    MergedRunDir(d).split_json.write_text(Split(cells=[
        CellShare(node="n1", device_cores=1, containers=["p0"], devices=["a-0", "a-1", "a-2"],
                  load=0.3),
        CellShare(node="n2", device_cores=1, containers=["p1"], devices=["a-3", "a-4"], load=0.2),
        CellShare(node="n3", device_cores=2, containers=["p2"], devices=["a-5"], load=0.1)],
        total_load=0.6, spread=0.25).model_dump_json())
    return d, render_cluster(d).read_text()


def _row(html: str, first_cell: str) -> str:
    """The table row whose first cell starts with ``first_cell``."""
    m = re.search(rf"<tr[^>]*>\s*<td>{re.escape(first_cell)}.*?</tr>", html, flags=re.S)
    assert m, first_cell
    return m.group(0)


def test_the_verdict_names_the_worst_host_and_every_cell(merged):
    d, html = merged
    assert MergedRunDir(d).report_html.is_file()
    assert "Verdict: invalid" in html
    assert "The host that stopped being faithful: <strong>n3</strong>" in html
    assert "node lost at t=3 s" in html
    assert "worst</span>" in _row(html, "n3") and "worst" not in _row(html, "n1")
    for n in ("n1", "n2"):
        assert "trustworthy" in _row(html, n)


def test_merged_percentiles_and_throughput_come_from_the_raw_requests(merged):
    d, html = merged
    raw = pd.read_csv(MergedRunDir(d).requests_csv)
    ok = raw[raw["outcome"] == "ok"]
    p99 = np.quantile(raw["rt_sent_ms"].dropna().to_numpy(), 0.99)
    total = _row(html, "<strong>all cells</strong>")
    assert ms(p99) in total
    # the cells run together for DURATION_S each: the run's rate is the sum of theirs
    assert rate(len(ok) / DURATION_S) in total
    n2 = ok[ok["cell"] == "n2"]
    assert rate(len(n2) / DURATION_S) in _row(html, "n2")
    assert ms(np.quantile(raw.loc[raw.cell == "n2", "rt_sent_ms"].dropna(), 0.99)) in _row(html, "n2")
    data = load(d)
    assert data.throughput_per_s == pytest.approx(len(ok) / DURATION_S)


def test_clocks_per_cell_before_after_and_start_skew(merged):
    _, html = merged
    clocks = html[html.index('id="clocks"'):html.index('id="split"')]
    assert "+12 ± 15" in _row(clocks, "n1") and "+15 ± 14" in _row(clocks, "n1")
    assert "-7 ± 20" in _row(clocks, "n2") and "-2</td>" in _row(clocks, "n2")   # drift
    assert "not measured (cell lost)" in _row(clocks, "n3")
    assert "at most 35 µs apart" in clocks      # the two largest δ/2: 20 + 15


def test_split_per_cell_and_links_to_the_cells_own_reports(merged):
    d, html = merged
    split = html[html.index('id="split"'):]
    assert "spread 25.0 %" in split
    assert re.search(r"<td>n1</td><td class=\"n\">1</td><td class=\"n\">1</td>"
                     r"<td class=\"n\">3</td><td class=\"n\">0.30</td>", split)
    assert 'href="cells/n1/report.html"' in html and (MergedRunDir(d).cell_dir("n1") / "report.html").is_file()
    assert "cells/n2/report.html" not in html and "not rendered" in _row(html, "n2")
    assert "none (failed)" in _row(html, "n3")


def test_self_contained_in_the_run_reports_style(merged):
    _, html = merged
    assert run_report_style() in html
    assert html.count("<svg") == 2 and "could not be drawn" not in html
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", html)


def test_a_directory_that_is_not_merged_is_refused_naming_the_file(tmp_path):
    with pytest.raises(ReportError, match="no cluster.json: not a merged run directory"):
        render_cluster(tmp_path)
