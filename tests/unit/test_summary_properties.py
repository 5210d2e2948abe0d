"""The facts the Summary model derives from its keys (read, never written)."""
from __future__ import annotations

import json

import pytest

from summary_factory import make_summary
from wotbench.rundir.summary import Summary


def test_contended_seconds_and_share():
    s = make_summary(duration_s=50.0, contention="detected", flagged_windows=((10, 20), (30, 35)))
    assert s.contention.contended_s == 15.0 and s.contended_share == pytest.approx(0.3)
    clean = make_summary()
    assert clean.contention.contended_s == 0 and clean.contended_share == 0


def test_threshold_rd_is_the_baseline_median_plus_the_shift():
    s = make_summary(rd_cd_calibration=0.05)
    b = s.contention.baseline
    assert b.threshold_rd is None                       # no shift recorded: no threshold
    assert b.model_copy(update={"threshold_shift": 0.1}).threshold_rd == pytest.approx(0.15)


def test_worst_ge_facts_over_several_ges():
    s = make_summary(late_share=0.002, ks_tol=0.01, lag_p99_ms=0.04)
    ge = s.ge_integrity
    second = ge.per_ge["ge-0"].model_copy(update={"late_share": 0.02, "ks_tol": None})
    ge = ge.model_copy(update={"per_ge": {**ge.per_ge, "ge-1": second}})
    assert ge.worst_late_share == 0.02 and ge.worst_ks_tol == 0.01       # None is skipped
    assert ge.worst_lag_p99_ms == 0.04
    assert ge.model_copy(update={"per_ge": {}}).worst_late_share is None


def test_derived_facts_are_not_written():
    s = make_summary(flagged_windows=((1, 2),), contention="detected")
    data = json.loads(s.model_dump_json())
    assert "contended_s" not in data["contention"] and "worst_late_share" not in data["ge_integrity"]
    assert Summary.model_validate(data) == s           # the written form reads back unchanged
