"""Faults during a Docker run (issue 20): each survived, named, with its data kept and nothing
left behind. The slow and daemon-restarting ones are in ``make bench-faults``."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from conftest import REPO, WOTBENCH, labelled, run_dir_of
from testkit import faults

pytestmark = pytest.mark.docker


def _start_and_reach_the_test(harness):
    h = harness("faults.yaml")
    h.wait_for("T0 in", timeout=180)
    h.wait_for("] test:", timeout=60)
    rid = faults.run_id_from(h.lines)
    assert rid, h.output
    return h, rid


def test_a_killed_device_container_and_a_crashed_pod_device_are_named_and_the_run_goes_on(
        harness, tmp_path):
    h, rid = _start_and_reach_the_test(harness)
    time.sleep(3)
    faults.kill_container(rid, "solo-1")
    faults.kill_pod_device(rid, "pod-pod0", "pod-2")
    rc = h.wait(timeout=180)
    assert rc == 3, h.output
    out = h.output
    assert "FAILURE solo-1: container exited with 137 during the test" in out
    assert "FAILURE pod-2: its process in pod pod-pod0 died (code 137, killed by SIGKILL)" in out
    rd = run_dir_of(tmp_path)
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["verdict"]["status"] == "invalid"
    assert any("solo-1" in r for r in summary["verdict"]["reasons"])
    per_device = summary["loss"]["per_device"]
    for dead in ("solo-1", "pod-2"):         # its requests after the failure: component_failed
        assert per_device[dead].get("component_failed", 0) > 0, per_device
    req = pd.read_csv(rd / "ge" / "ge-0" / "requests.csv")
    late = req[req.scheduled_ns > req.scheduled_ns.max() - 5e9]
    ids = {d["name"]: d["id"] for d in json.loads((rd / "run.json").read_text())["devices"]}
    for mate in ("pod-0", "pod-1", "pod-3", "solo-0"):   # the others answered to the end
        rows = late[late.device == ids[mate]]
        assert len(rows) and (rows.outcome == "ok").all(), (mate, rows.outcome.value_counts())
    assert labelled(rid) == ([], [])


def test_a_killed_gateway_emulator_leaves_what_it_measured_and_an_invalid_verdict(
        harness, tmp_path):
    h, rid = _start_and_reach_the_test(harness)
    time.sleep(3)
    faults.kill_container(rid, "ge-0")
    rc = h.wait(timeout=180)
    assert rc == 3, h.output
    assert "ge-0 died before writing its results" in h.output
    rd = run_dir_of(tmp_path)
    ge_summary = json.loads((rd / "ge" / "ge-0" / "summary.json").read_text())
    assert ge_summary["salvaged"] and ge_summary["outcomes"]["ok"] > 0
    assert ge_summary["outcomes"]["unsent"] > 0      # killed mid-test: the rest never went
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["verdict"]["status"] == "invalid"
    assert any("ge-0" in r for r in summary["verdict"]["reasons"])
    assert (rd / "report.html").exists()
    assert labelled(rid) == ([], [])


def test_a_killed_harness_leaves_nothing_burning_and_clean_removes_the_rest(harness, tmp_path):
    h, rid = _start_and_reach_the_test(harness)
    h.proc.send_signal(signal.SIGKILL)
    h.wait(timeout=10)
    assert faults.containers_of(rid, running_only=True)       # orphans, for now
    took = faults.wait_none_running(rid, within_s=30)
    assert took is not None, faults.containers_of(rid, running_only=True)
    r = subprocess.run(WOTBENCH + ["clean"], cwd=REPO, capture_output=True, text=True,
                       timeout=180)
    assert f"found run {rid}" in r.stdout and "its harness last renewed its lease" in r.stdout, \
        r.stdout
    assert labelled(rid) == ([], []), r.stdout
