"""HTTP setup and verify phases end to end (issue 35): `gateways.http.setup` requests reach
every nginx device before T0 and `verify` requests after the test, each a gateway-emulator run
of its own whose figures are summary.json `phases` (not the test's); a setup that is not
answered 2xx stops the run before T0, naming the key. Process backend."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from e2e_support import NEEDS_HTTP, Harness, nginx_run, run_dir_of

pytestmark = NEEDS_HTTP


def _run(harness_env, tmp_path: Path, setup_path: str) -> tuple[int, Harness]:
    cfg = nginx_run("phases", 2, 50, gateways={"http": {
               "setup": {"requests": 30, "rate": 500, "method": "POST", "path": setup_path,
                         "body_template": '{"id": "e{{seq}}"}'},
               "verify": {"requests": 2, "method": "GET", "path": "actuators/led"}}})
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    h = Harness(["run", str(path), "--out-root", str(tmp_path / "reports")], harness_env, tmp_path)
    return h.wait(150), h


def test_setup_and_verify_have_their_own_figures(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, "sensors/e{{seq}}")
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    setup, verify = s["phases"]["setup"], s["phases"]["verify"]
    assert setup["requests"] == 60 and setup["ok"] == 60 and setup["codes"] == {"200": 60}
    assert verify["requests"] == 4 and verify["ok"] == 4
    assert s["overall"]["requests"] == 80                  # the test's own: 2 x 2 s / 50 ms
    assert "Setup and verify (gateways.http)" in (rd / "report.html").read_text()
    assert "gateways.http.setup: 30 POST per device to 2 device(s)" in h.output


def test_a_failed_setup_stops_the_run_before_t0(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, "missing/e{{seq}}")   # nginx answers 404
    assert rc == 1, h.output
    assert "gateways.http.setup: 60 of 60 requests were not answered 2xx" in h.output
    assert "T0 in" not in h.output
