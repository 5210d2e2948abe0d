"""SUT faults `restart` and `cpu_quota` end to end against libcoap's coap-server-notls (issue 35,
process backend): one server is stopped and started again with the same command at 1.5 s (the
harness waits until it answers a CoAP ping again: the downtime), the other is limited to 0.02
cores at 2 s through a cpu cgroup the harness created (its throttling read back from the
cgroup). Neither exit is a component failure; summary.json `sut_faults` has the windows."""
from __future__ import annotations

import shutil

import pytest

from e2e_support import run_config
from wotbench.runner.backends.process import cpu_cgroup

COAP_SERVER = ["coap-server-notls", "-A", "{address}", "-p", "{port}"]
pytestmark = [
    pytest.mark.skipif(not shutil.which("coap-server-notls"),
                       reason="coap-server-notls not installed (apt-get install libcoap3-bin)"),
    pytest.mark.skipif(cpu_cgroup.unavailable() is not None,
                       reason=f"no writable cpu cgroup here: {cpu_cgroup.unavailable()}"),
]


@pytest.mark.long   # a whole run with two coap-servers
def test_restart_and_cpu_quota_are_applied_recorded_and_measured(harness_env, tmp_path):
    cfg = {"name": "restart-quota", "backend": "process", "duration_s": 5, "seed": 5,
           "contention_detector": {"enabled": False}, "monitor": {"enabled": False},
           "devices": [{"group": "srv", "count": 2, "server": {"command": COAP_SERVER},
                        "paths": ["time"], "rit": {"dist": "deterministic", "mean": 1}}],
           "gateways": {"timeout_ms": 500},
           "sut_faults": [{"device": "srv-0", "at_s": 1.5, "action": "restart"},
                          {"device": "srv-1", "at_s": 2.0, "action": "cpu_quota",
                           "cpus": 0.02}]}
    rc, h, rd, s = run_config(cfg, harness_env, tmp_path)
    assert rc in (0, 3), h.output
    assert not s["run"].get("failures"), s["run"]   # neither fault is a component failure
    restart, quota = s["sut_faults"]
    assert restart["error"] is None and abs(restart["applied_s"] - 1.5) < 0.3
    assert 0 < restart["downtime_s"] < 5 and restart["stopped_s"] <= restart["resumed_s"]
    assert restart["after"]["ok"] > 0.9 * restart["after"]["sent"] > 0   # it serves again
    assert restart["before"]["failed"] < 0.1 * restart["before"]["sent"]
    assert quota["throttled_periods"] > 0, quota    # the kernel enforced the quota
    assert quota["error"] is None and quota["cpus"] == 0.02 and quota["after"] is None
    assert any(r.startswith("sut fault restart srv-0 at") for r in s["verdict"]["reasons"])
    assert (rd / "devices" / "srv-0").exists()
    assert "Faults in the system under test" in (rd / "report.html").read_text()
