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

from e2e_support import REPO, WOTBENCH, labelled, run_dir_of
from testkit import faults

pytestmark = [pytest.mark.docker,
              pytest.mark.long]   # ~30 s each of real runs: make test-long (CI runs it)


def _start_and_reach_the_test(harness):
    h = harness("faults.yaml")
    h.wait_for("T0 in", timeout=180)
    h.wait_for("] test:", timeout=60)
    rid = faults.run_id_from(h.lines)
    assert rid, h.output
    return h, rid


def test_killed_devices_are_named_their_pod_mates_go_on_and_a_killed_ge_keeps_its_data(
        harness, tmp_path):
    """One run, three faults: a device's container killed and a pod's device crashed 3 s into
    the test, the gateway emulator killed 5 s later."""
    h, rid = _start_and_reach_the_test(harness)
    time.sleep(3)
    faults.kill_container(rid, "solo-1")
    faults.kill_pod_device(rid, "pod-pod0", "pod-2")
    time.sleep(5)
    faults.kill_container(rid, "ge-0")
    rc = h.wait(timeout=180)
    assert rc == 3, h.output
    out = h.output
    assert "FAILURE solo-1: container exited with 137 during the test" in out
    assert "FAILURE pod-2: its process in pod pod-pod0 died (code 137, killed by SIGKILL)" in out
    assert "ge-0 died before writing its results" in out
    rd = run_dir_of(tmp_path)
    ge_summary = json.loads((rd / "ge" / "ge-0" / "summary.json").read_text())
    assert ge_summary["salvaged"] and ge_summary["outcomes"]["ok"] > 0
    assert ge_summary["outcomes"]["unsent"] > 0      # killed mid-test: the rest never went
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["verdict"]["status"] == "invalid"
    reasons = " ".join(summary["verdict"]["reasons"])
    assert "solo-1" in reasons and "pod-2" in reasons and "ge-0" in reasons
    per_device = summary["loss"]["per_device"]
    for dead in ("solo-1", "pod-2"):         # its requests after the failure: component_failed
        assert per_device[dead].get("component_failed", 0) > 0, per_device
    assert (rd / "report.html").exists()
    req = pd.read_csv(rd / "ge" / "ge-0" / "requests.csv")
    ids = {d["name"]: d["id"] for d in json.loads((rd / "run.json").read_text())["devices"]}
    answered = req[req.outcome == "ok"]
    last = answered.scheduled_ns.max()
    for mate in ("pod-0", "pod-1", "pod-3", "solo-0"):   # the others answered to the GE's end
        rows = answered[answered.device == ids[mate]]
        assert rows.scheduled_ns.max() > last - 1e9, mate
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
