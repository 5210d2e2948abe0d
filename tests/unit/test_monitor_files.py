"""The monitor's clock.json and cost.json are written and read through their models
(wotbench.rundir.monitor_files): a bad file names the file and the key."""
from __future__ import annotations

import json

import pytest

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.sut_resources import _sampling_cost
from wotbench.monitor.recorder import load_collectl
from wotbench.rundir import RunDir
from wotbench.rundir._model import read_record
from wotbench.rundir.monitor_files import MonitorClock, MonitorCost

COST = {"samples": 20, "components": 3, "components_cpu_ns": 10, "host_counters_cpu_ns": 10,
        "process_scan_cpu_ns": 10, "sut_cpu_ns": 50_000_000, "sut_components": 2,
        "interval_s": 0.5, "elapsed_s": 10.0, "share_of_a_core": 0.005}


def _rd(tmp_path) -> RunDir:
    rd = RunDir(tmp_path)
    rd.monitor_dir.mkdir()
    return rd


def test_the_sampling_cost_is_read_through_its_model(tmp_path):
    rd = _rd(tmp_path)
    assert _sampling_cost(rd) is None                      # no cost.json: no sentence
    rd.monitor_cost_json.write_text(json.dumps(COST))
    assert _sampling_cost(rd) == ("sampling them cost the monitor 0.500 % of a core "
                                  "(2 component(s), 20 samples)")
    rd.monitor_cost_json.write_text(json.dumps({**COST, "elapsed_s": 0}))
    assert _sampling_cost(rd) is None                      # nothing elapsed: no share


def test_a_bad_cost_json_names_the_file_and_the_key(tmp_path):
    rd = _rd(tmp_path)
    bad = {k: v for k, v in COST.items() if k != "sut_cpu_ns"}
    rd.monitor_cost_json.write_text(json.dumps({**bad, "samples": "many"}))
    with pytest.raises(AnalysisError) as e:
        _sampling_cost(rd)
    msg = str(e.value)
    assert str(rd.monitor_cost_json) in msg and "samples: must be an integer" in msg
    assert "sut_cpu_ns: required key missing" in msg


def test_the_clock_maps_collectl_onto_the_monotonic_clock(tmp_path):
    rd = _rd(tmp_path)
    rd.clock_json.write_text(json.dumps(MonitorClock(wall_s=1000.0, mono_ns=5_000).model_dump()))
    rd.collectl_dir.mkdir()
    (rd.collectl_dir / "h.tab").write_text("#UTC [CPU]Totl%\n1001.5 12\n")
    [row] = load_collectl(rd)["host"].to_dict("records")
    assert row["mono_ns"] == 1_500_005_000 and row["[CPU]Totl%"] == 12


def test_a_bad_clock_json_names_the_file_and_the_key(tmp_path):
    rd = _rd(tmp_path)
    rd.clock_json.write_text(json.dumps({"wall_s": 1.0, "mono": 3}))
    with pytest.raises(ValueError) as e:
        read_record(rd.clock_json, MonitorClock)
    assert str(rd.clock_json) in str(e.value)
    assert "mono_ns: required key missing" in str(e.value)
    assert "mono: unknown key" in str(e.value)
    rd.clock_json.write_text("{")
    with pytest.raises(ValueError, match="clock.json: not valid JSON"):
        read_record(rd.clock_json, MonitorCost)
