"""End to end on Docker: a normal run, an interrupted run, a device killed mid-run."""
from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import time

import pytest

from e2e_support import labelled, run_dir_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEVICES = ["dev-0", "dev-1", "dev-2", "cd-node"]


def _count_lines(path) -> int:
    return sum(1 for line in open(path) if line.strip() and not line.startswith(("#", "device_id")))


def test_run_end_to_end(harness, tmp_path):
    h = harness("small.yaml")
    rc = h.wait(180)
    assert rc in (0, 3), h.output           # 3: this small shared host may be flagged
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    assert run["backend"] == "docker" and not run["interrupted"] and run["failures"] == [], h.output
    assert (rd / "summary.json").exists()
    if importlib.util.find_spec("wotbench.report"):
        assert (rd / "report.html").exists()
    # every trace request is accounted for by the GE, every device wrote its log
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())
    assert ge["requests"] == _count_lines(rd / "trace/trace.csv") == 240
    assert sum(ge["outcomes"].values()) == ge["requests"]
    assert ge["outcomes"]["ok"] >= 0.95 * ge["requests"]
    cd = json.loads((rd / "cd-ge/summary.json").read_text())
    assert cd["requests"] == _count_lines(rd / "trace/cd-trace.csv") == 44   # (3 + 8) s / 0.25
    served = 0
    for d in DEVICES:
        summ = json.loads((rd / "devices" / d / "device-summary.json").read_text())
        served += summ["responses"] if d != "cd-node" else 0
    assert served >= ge["outcomes"]["ok"]
    # the CD-GE starts at T0, the main GE calibration_s later
    assert run["test"]["start_mono_ns"] - run["calibration"]["start_mono_ns"] == 3_000_000_000
    assert abs(ge["start_mono_ns"] - run["test"]["start_mono_ns"]) < 1_000_000
    assert (rd / "monitor/cgroups.csv").stat().st_size > 100
    assert labelled(run["run_id"]) == ([], [])


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
def test_sigint_cleans_up_and_keeps_raw_logs(harness, tmp_path):
    h = harness("long.yaml")
    h.wait_for("T0 in", 120)
    t0_in = float(re.search(r"T0 in ([0-9.]+) s", h.output).group(1))
    time.sleep(t0_in + 3 + 2)               # into the test phase (calibration is 3 s)
    h.proc.send_signal(signal.SIGINT)
    rc = h.wait(60)
    assert rc == 130, h.output
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    assert run["interrupted"] is True
    assert labelled(run["run_id"]) == ([], [])
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())   # written on SIGTERM
    assert ge["interrupted"] and ge["outcomes"]["unsent"] > 0
    assert 0 < ge["requests"] - ge["outcomes"]["unsent"] < ge["requests"]
    for d in DEVICES:
        assert (rd / "devices" / d / "device-log.csv").exists(), d


@pytest.mark.long   # make test-long (CI runs it after make test): ~35 s of a real run
def test_contention_episode_runs_and_is_removed(harness, tmp_path):
    h = harness("hog.yaml")
    rc = h.wait(180)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    assert [e["name"] for e in run["contention"]] == ["hog-0-cpu"]
    assert run["contention"][0]["start_mono_ns"] == run["test"]["start_mono_ns"] + 3_000_000_000
    hog = json.loads((rd / "contention/hog-0-cpu.json").read_text())
    assert hog["started"] and hog["ran_s"] > 2.5
    assert labelled(run["run_id"]) == ([], [])
