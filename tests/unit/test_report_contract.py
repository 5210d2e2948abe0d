"""Writer meets readers: the run report and the sweep report drawn from run directories that the
real analysis wrote (raw files as the runner writes them, tests/unit/report_fixture.py). If
the analysis stops writing a key or a series that a figure needs, a figure here turns into a
"not available" note and the test says which one."""
from __future__ import annotations

import io
import re
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from report_fixture import make_run
from sweep_fakes import write_base
from wotbench.report import render
from wotbench.rundir import RunDir
from wotbench.run_result import RunResult
from wotbench.sweep import run_sweep
from wotbench.sweep.report import NOTIFY_FACTS, collect

RUN_FIGURES = ["fig-rit-cdf", "fig-rt-time", "fig-rt-cdf", "fig-rd", "fig-cpu-cores",
               "fig-cpu-containers"]
SWEEP_FIGURES = ["fig7", "fig8", "fig9", "fig5", "ci-throughput", "ci-p95", "ci-sut-cpu", "ci-sut-rss"]


def _analysed_runner(config_path: str, out_root: str, backend=None,
                     on_run_dir=None) -> RunResult:
    """A run function for the sweep engine: the raw files of a run with the point's device count
    and placement, then the real analysis and the real report, as ``wotbench run`` ends."""
    cfg = yaml.safe_load(Path(config_path).read_text())
    affinity = cfg.get("placement", {}).get("affinity", "pinned")
    run_dir = make_run(Path(out_root), name=cfg["name"], n_devices=cfg["devices"][0]["count"],
                       duration_s=20, faithful=affinity == "pinned", sut=True)
    if on_run_dir is not None:
        on_run_dir(run_dir)
    render(run_dir)
    summary = RunDir(run_dir).read_summary()
    return RunResult(summary.verdict.exit_code, run_dir, summary)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract-sweep")
    return run_sweep(write_base(tmp), ["devices[0].count=2,4", "placement.affinity=pinned,shared"],
                     out_root=tmp / "reports", run_fn=_analysed_runner,
                     console=Console(file=io.StringIO()), progress=False)


def _drawn(html: str, ids: list[str], tag: str) -> dict[str, bool]:
    out = {}
    for fid in ids:
        m = re.search(rf'<{tag}[^>]* id="{fid}">(.*?)</{tag}>', html, re.S)
        assert m, f"{fid} is not on the page"
        out[fid] = "<svg" in m.group(1)
    return out


def test_every_run_report_draws_every_figure(sweep):
    for p in sweep.points:
        html = (sweep.dir / p.run_dir / "report.html").read_text()
        drawn = _drawn(html, RUN_FIGURES, "figure")
        assert all(drawn.values()), (p.id, [f for f, ok in drawn.items() if not ok])


def test_every_sweep_fact_comes_from_the_analysed_runs(sweep):
    rows = collect(sweep)
    assert len(rows) == 4 and {r.affinity for r in rows} == {"pinned", "shared"}
    for r in rows:
        # the host's share is None exactly when the run's summary has no amount (this fixture
        # writes no monitor files, so no run-queue wait): still a fact of the analysed run
        s = RunDir(Path(r.run_dir) if Path(r.run_dir).is_absolute()
                   else sweep.dir / r.run_dir).read_summary()
        no_amount = {"testbed_ms", "testbed_share", "testbed_worst_share"} \
            if s.contention.added_ms is None else set()
        if s.notify is None:            # no notification sink in this fixture's runs
            no_amount |= set(NOTIFY_FACTS)
        # host: a run across hosts' unfaithful node only
        missing = [k for k, v in asdict(r).items() if v is None
                   and k not in ("error", "exit_code", "host") and k not in no_amount]
        assert r.exit_code is not None and not missing, (r.id, missing)
        assert r.report == f"{r.run_dir}/report.html"
    assert sorted(r.devices for r in rows) == [2, 2, 4, 4]


def test_the_sweep_report_draws_every_figure(sweep):
    html = (sweep.dir / "report.html").read_text()
    assert "SUT CPU (cores)" in html and "SUT peak RSS (MiB)" in html   # per point, from sut.csv
    drawn = _drawn(html, SWEEP_FIGURES, "div")
    assert all(drawn.values()), [f for f, ok in drawn.items() if not ok]
    assert "CPU utilisation not available" not in html     # Fig 5's host-CPU panel is drawn
