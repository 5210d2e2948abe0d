"""Sweeps and capacity searches on backend: swarm: each point a merged run (its own
summary.json from every cell's raw requests), and answers that name the host (node) whose
cell stopped being faithful, and why."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from cluster_fakes import AsCluster, cluster_json
from cluster_fixtures import make_cell
from slo_fakes import SloFakeRunner, rate_of
from sweep_fakes import FakeRunner, write_base
from wotbench.capacity.command import run_capacity
from wotbench.distributed.answer import host_fault, hosts_text
from wotbench.distributed.merge import CellOutcome, merge
from wotbench.rundir import MergedRunDir
from wotbench.distributed.mergedsummary import deciding_cell, write
from wotbench.rundir import RunDir
from wotbench.sweep import run_sweep


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    d = tmp_path_factory.mktemp("merged")
    make_cell(d, "n1", 0, global_names=True, n_devices=3, duration_s=6, seed=4, queue_us=100)
    make_cell(d, "n2", 100, global_names=True, n_devices=2, duration_s=6, seed=5,
              queue_us=3000, rate_per_device=80)
    m = merge(d, [CellOutcome(node="n1"), CellOutcome(node="n2"),
                  CellOutcome(node="n3", finished=False, why="node lost at t=3 s")])
    return d, m, write(d, m, "run-x")


def test_merged_summary_holds_every_cells_requests_with_percentiles_of_the_union(merged):
    d, m, s = merged
    assert RunDir(d).read_summary() == s            # written, and readable as a summary
    raw = pd.read_csv(MergedRunDir(d).requests_csv)
    rt = raw["rt_sent_ms"].dropna().to_numpy()
    assert s.overall.requests == len(raw) == m.overall.requests
    assert s.overall.response_time_ms.from_sent.p99_ms == pytest.approx(np.quantile(rt, 0.99))
    assert sorted(s.per_device) == ["cpu-0", "cpu-1", "cpu-100", "cpu-101", "cpu-2"]
    assert s.per_device["cpu-100"].requests == int((raw.device_id == 100).sum())
    assert s.overall.devices == 5 and s.run.backend == "swarm" and s.run.run_id == "run-x"


def test_merged_summary_verdict_is_the_runs_naming_the_lost_node(merged):
    d, m, s = merged
    assert s.verdict.status == "invalid" == m.verdict.status and s.verdict.exit_code == 3
    assert s.verdict.reasons[0].startswith("n3: invalid: the cell on n3 failed: node lost")
    # n3 returned nothing: the per-host blocks are the first finished cell's, and it says so
    assert deciding_cell(m) == "n1"
    assert any("those of n1's cell" in w for w in s.run.warnings)


def test_host_fault_names_the_worst_node_its_reason_and_the_others(tmp_path, merged):
    d, _, _ = merged
    f = host_fault(d)
    assert (f.node, f.status) == ("n3", "invalid") and "node lost at t=3 s" in f.why
    cluster_json(tmp_path, "contention", "n2", "R_d rose")
    f = host_fault(tmp_path)
    assert f.text() == "n2 (contention: R_d rose)"
    assert hosts_text([None, f.model_dump(), f.model_dump()]) == \
        "the host that stopped being faithful: n2 (contention: R_d rose)"


def test_no_host_when_all_cells_were_faithful_or_on_one_host(tmp_path):
    assert host_fault(tmp_path) is None                 # no cluster.json: a single-host run
    cluster_json(tmp_path, "trustworthy", "n2", "-")
    assert host_fault(tmp_path) is None
    (tmp_path / "cluster.json").write_text("{not json")
    assert host_fault(tmp_path) is None
    assert hosts_text([None, None]) is None


def test_a_sweep_on_swarm_names_the_host_per_point(tmp_path):
    runner = AsCluster(FakeRunner(verdict=lambda c: "contention"
                                  if c["devices"][0]["count"] >= 10 else "trustworthy"))
    out = io.StringIO()
    sweep = run_sweep(write_base(tmp_path), ["devices[0].count=5,10"], out_root=tmp_path / "r",
                      run_fn=runner, console=Console(file=out, width=200), progress=False)
    hosts = [p.host for p in sweep.points]
    assert hosts[0] is None and hosts[1]["node"] == "n2"
    saved = json.loads((sweep.dir / "sweep.json").read_text())
    assert saved["points"][1]["host"]["why"] == "CD-node R_d rose 3x over its calibration"
    assert "n2 (contention: CD-node R_d rose 3x" in out.getvalue()
    html = (sweep.dir / "report.html").read_text()
    assert "the host that stopped being faithful: n2 (contention" in html


def test_a_capacity_search_on_swarm_names_the_host_at_the_first_flagged_setting(tmp_path):
    runner = AsCluster(FakeRunner(verdict=lambda c: "contention"
                                  if c["devices"][0]["count"] >= 37 else "trustworthy"),
                       bad_node="n3", why="GE fell behind")
    res = run_capacity(write_base(tmp_path), out_root=tmp_path / "r", run_fn=runner,
                       console=Console(file=io.StringIO()))
    assert res.answer == 36 and res.first_flagged == 37
    assert res.conclusion.endswith("At devices[0].count = 37, the host that stopped being "
                                      "faithful: n3 (contention: GE fell behind).")
    hosts = {s.value: s.hosts for s in res.steps}
    assert hosts[37][0]["node"] == "n3" and hosts[36] == [None]   # clean: no host named


def test_an_slo_search_on_swarm_names_the_host_that_stopped_being_faithful(tmp_path):
    runner = AsCluster(SloFakeRunner(rt=lambda c: rate_of(c), verdict=lambda c: "contention"
                                     if rate_of(c) >= 30 else "trustworthy"))
    res = run_capacity(write_base(tmp_path), out_root=tmp_path / "r", run_fn=runner,
                       console=Console(file=io.StringIO()), key="devices[0].rate", start=10,
                       maximum=60, step=10, slo=["p95<=35ms"])
    o = res.outcome
    assert o.kind == "host"
    assert o.sentence.endswith("On this cluster, the host that stopped being faithful: n2 "
                                  "(contention: CD-node R_d rose 3x over its calibration).")


def test_wotbench_report_of_a_merged_run_draws_the_merged_report(merged, capsys):
    from wotbench import cli
    d, _, _ = merged
    assert cli.main(["report", str(d)]) == 0   # summary.json is there: still the cluster's
    assert capsys.readouterr().out.strip() == str(d / "report.html")
    assert "3 cells" in (d / "report.html").read_text()
