"""wotbench.distributed.verdict: the run's verdict is its worst cell's, naming the host."""
from __future__ import annotations

import pytest

from summary_factory import make_summary
from wotbench.distributed.verdict import (CellVerdict, aggregate, failed_cell, from_summary, table,
                                      unfaithful_host)


def cell(node, status="trustworthy", code=None, reason=None):
    code = code if code is not None else (0 if status == "trustworthy" else 3)
    return CellVerdict(node=node, status=status, exit_code=code,
                       reasons=[reason or f"{status} on {node}"])


def test_all_trustworthy_is_trustworthy_and_names_no_host():
    v = aggregate([cell("n1"), cell("n2"), cell("n3")])
    assert (v.status, v.exit_code, v.worst_node, v.unfaithful) == ("trustworthy", 0, None, [])
    assert unfaithful_host(v) is None


def test_worst_cell_wins_and_is_named():
    v = aggregate([cell("n1", "ge_bottleneck"), cell("n2", "contention", reason="CD R_d up"),
                   cell("n3")])
    assert (v.status, v.exit_code, v.worst_node) == ("contention", 3, "n2")
    assert v.unfaithful == ["n1", "n2"] and v.reasons[0] == "n2: contention: CD R_d up"
    assert unfaithful_host(v) == "n2"


def test_failed_cell_makes_the_run_invalid_and_keeps_every_row():
    v = aggregate([cell("n1"), failed_cell("n2", "node lost at t=12 s"), cell("n3", "contention")])
    assert (v.status, v.worst_node) == ("invalid", "n2") and len(v.cells) == 3
    assert "n2 failed: node lost" in v.reasons[0]
    assert "invalid (failed)" in table(v) and "**invalid**" in table(v)


def test_slo_miss_in_a_faithful_cluster_exits_4_and_ties_go_to_the_first_cell():
    v = aggregate([cell("n1"), cell("n2", code=4), cell("n3", code=4)])
    assert (v.status, v.exit_code, v.worst_node) == ("trustworthy", 4, None)
    v = aggregate([cell("n1", "contention"), cell("n2", "contention")])
    assert v.worst_node == "n1"


def test_from_summary_takes_the_cells_own_verdict():
    s = make_summary()
    c = from_summary("n7", s)
    assert (c.node, c.status, c.exit_code, c.reasons) == ("n7", s.verdict.status,
                                                          s.verdict.exit_code, s.verdict.reasons)


def test_nothing_to_aggregate_is_an_error():
    with pytest.raises(ValueError):
        aggregate([])
