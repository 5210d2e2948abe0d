"""wotbench.distributed.merge: cells' run directories into one; percentiles from the raw data."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cluster_fixtures import make_cell
from wotbench.distributed.merge import CellOutcome, MergedRun, merge
from wotbench.rundir import MergedRunDir
from wotbench.errors import WotbenchError


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    merged = tmp_path_factory.mktemp("merged")
    # two cells with different response-time distributions (queueing 100 µs vs 3 ms)
    make_cell(merged, "n1", 0, n_devices=3, duration_s=8, seed=4, queue_us=100)
    make_cell(merged, "n2", 100, n_devices=2, duration_s=8, seed=5, queue_us=3000,
              rate_per_device=80)
    out = merge(merged, [CellOutcome(node="n1"), CellOutcome(node="n2"),
                         CellOutcome(node="n3", finished=False, why="node lost at t=3 s")])
    return merged, out


def test_merged_percentiles_come_from_the_raw_union_not_from_averaging(cluster):
    merged, out = cluster
    raw = pd.read_csv(MergedRunDir(merged).requests_csv)
    rt = raw["rt_sent_ms"].dropna().to_numpy()
    assert out.overall.response_time_ms.from_sent.p99_ms == pytest.approx(np.quantile(rt, 0.99))
    cells = {c.node: c for c in out.cells}
    p99s = [cells[n].requests.response_time_ms.from_sent.p99_ms for n in ("n1", "n2")]
    assert out.overall.response_time_ms.from_sent.p99_ms != pytest.approx(np.mean(p99s))
    # each cell's own figures match its own analysis (same raw data, same quantile rule)
    for n in ("n1", "n2"):
        own = json.loads((MergedRunDir(merged).cell_dir(n) / "summary.json").read_text())
        assert cells[n].requests.response_time_ms.from_sent.p99_ms == pytest.approx(
            own["overall"]["response_time_ms"]["from_sent"]["p99_ms"])
        assert cells[n].requests.requests == own["overall"]["requests"]


def test_counts_add_up_and_global_device_ids_are_kept(cluster):
    merged, out = cluster
    raw = pd.read_csv(MergedRunDir(merged).requests_csv)
    cells = {c.node: c for c in out.cells}
    assert out.overall.requests == len(raw) == cells["n1"].requests.requests + \
        cells["n2"].requests.requests
    assert set(raw.loc[raw.cell == "n2", "device_id"]) == {100, 101}
    assert set(raw.loc[raw.cell == "n1", "device_id"]) == {0, 1, 2}
    assert out.devices == 5


def test_a_failed_cell_is_named_kept_out_and_the_others_kept(cluster):
    merged, out = cluster
    n3 = next(c for c in out.cells if c.node == "n3")
    assert n3.requests is None and n3.verdict.failed
    assert out.verdict.status == "invalid" and out.verdict.worst_node == "n3"
    assert "node lost at t=3 s" in out.verdict.reasons[0]
    back = MergedRun.model_validate_json(MergedRunDir(merged).cluster_json.read_text())
    assert back == out


def test_an_unreadable_cell_directory_is_a_failed_cell(tmp_path):
    make_cell(tmp_path, "n1", 0, n_devices=2, duration_s=4, seed=6)
    out = merge(tmp_path, [CellOutcome(node="n1"), CellOutcome(node="n2")])   # n2: no dir
    n2 = next(c for c in out.cells if c.node == "n2")
    assert n2.verdict.failed and "cells/n2 cannot be read" in n2.verdict.reasons[0]
    assert out.overall.requests == next(c for c in out.cells if c.node == "n1").requests.requests


def test_two_cells_with_one_device_id_are_refused(tmp_path):
    make_cell(tmp_path, "n1", 0, n_devices=2, duration_s=4, seed=6)
    make_cell(tmp_path, "n2", 1, n_devices=2, duration_s=4, seed=7)
    with pytest.raises(WotbenchError, match="device id 1 is in the cells of both n1 and n2"):
        merge(tmp_path, [CellOutcome(node="n1"), CellOutcome(node="n2")])
