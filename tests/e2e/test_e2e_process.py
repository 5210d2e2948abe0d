"""End to end with the process backend (no Docker needed)."""
from __future__ import annotations

import json

import pytest

from e2e_support import run_dir_of
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = pytest.mark.slow


def test_process_backend_end_to_end(harness, tmp_path):
    h = harness("small.yaml", "--backend", "process")
    rc = h.wait(180)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    assert run["backend"] == "process" and run["failures"] == [], h.output
    assert all(d["address"].startswith("127.") for d in run["devices"])
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())
    assert ge["requests"] == 240 and ge["outcomes"]["ok"] >= 0.95 * 240
    for d in ("dev-0", "dev-1", "dev-2", "cd-node"):
        assert (rd / "devices" / d / "device-log.csv").exists()
    assert (rd / "summary.json").exists()
    assert leftover_processes(run["run_id"]) == []


@pytest.mark.long   # make test-long (CI runs it after make test): 5-15 s of waiting
def test_a_killed_harness_leaves_no_process_running(harness):
    """The programs' wardens get the parent-death signal and stop them (RELIABILITY.md)."""
    import signal
    import time
    from testkit.faults import run_id_from
    h = harness("long.yaml", "--backend", "process")
    h.wait_for("] test:", timeout=120)
    rid = run_id_from(h.lines)
    assert [p for p, r in leftover_processes() if r == rid]
    h.proc.send_signal(signal.SIGKILL)
    h.wait(timeout=10)
    end = time.monotonic() + 30
    while time.monotonic() < end and [p for p, r in leftover_processes() if r == rid]:
        time.sleep(0.5)
    assert [p for p, r in leftover_processes() if r == rid] == []
