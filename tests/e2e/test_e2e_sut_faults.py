"""Scheduled faults in the system under test end to end (issue 35): `sut_faults:` pauses one
nginx device for a second and kills the other during an open-loop HTTP run (process backend);
the harness applies them on time and records them, the killed server's death is not a component
failure, and summary.json `sut_faults` shows the throughput and latency before, during and after
each (the report draws them on the time series)."""
from __future__ import annotations


import pytest

from e2e_support import NEEDS_HTTP, nginx_run, run_config

pytestmark = NEEDS_HTTP


@pytest.mark.long   # a whole run with two nginx servers
def test_pause_and_kill_are_applied_recorded_and_measured(harness_env, tmp_path):
    cfg = nginx_run("faults", 5, 10, gateways={"timeout_ms": 3000},
                    sut_faults=[{"device": "web-0", "at_s": 1.0, "action": "pause", "for_s": 1.0},
                                {"device": "web-1", "at_s": 3.0, "action": "kill"}])
    rc, h, rd, s = run_config(cfg, harness_env, tmp_path)
    assert rc == 3 or rc == 0, h.output
    assert not s["run"].get("failures"), s["run"]     # the kill is expected, not a failure
    pause, kill = s["sut_faults"]
    assert abs(pause["applied_s"] - 1.0) < 0.2 and abs(pause["resumed_s"] - 2.0) < 0.2
    before, during, after = pause["before"], pause["during"], pause["after"]
    assert during["p50_ms"] > max(300, 5 * before["p50_ms"])   # answered only after SIGCONT
    assert during["throughput_rps"] < 0.2 * before["throughput_rps"] < after["throughput_rps"]
    assert kill["applied_s"] is not None and kill["after"] is None
    assert kill["during"]["failed"] > 0.9 * kill["during"]["sent"]
    assert kill["before"]["failed"] < 0.1 * kill["before"]["sent"]
    assert any(r.startswith("sut fault kill web-1 at") for r in s["verdict"]["reasons"])
    assert "Faults in the system under test" in (rd / "report.html").read_text()
