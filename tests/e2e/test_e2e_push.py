"""End to end, process backend: devices that talk first (devices[].push, issue 23) against
servers nobody here wrote. Two meters register with aiocoap's Resource Directory before T0,
replay the requests they sent themselves from a recorded trace (`>POST` lines to a
coap-server-notls data store) beside the GE's, are looked up after the test (the verify op)
and deregister. One meter's link delays what it sends (app backend, egress 30 ms): its own
requests' R shows it."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from e2e_support import run_dir_of

pytestmark = pytest.mark.slow
RD_BIN = Path(sys.executable).parent / "aiocoap-rd"
STORE_BIN = shutil.which("coap-server-notls")


def _config(tmp_path: Path) -> Path:
    res = tmp_path / "resources"
    res.mkdir()
    for d in range(2):
        (res / f"meter-{d}.csv").write_text("path,service_time_us,mode,payload_bytes\nr0,500,sleep,8\n")
    lines = ["device_id,send_time_us,method,uri,payload_bytes"]
    for k in range(20):                                   # GE: 10 req/s per meter
        lines.append(f"{k % 2},{100000 * k},GET,coap://10.9.9.9:5683/r0,0")
        if k % 2 == 0:                                   # each meter: a reading every 200 ms
            lines += [f"{d},{100000 * k + 1000 * d},>POST,coap://store/readings/{{device}},24"
                      for d in range(2)]
    body = sorted(lines[1:], key=lambda s: int(s.split(",")[1]))
    (tmp_path / "trace.csv").write_text("\n".join([lines[0]] + body) + "\n")
    cfg = {"name": "e2e-push", "backend": "process", "duration_s": 2.5, "seed": 3,
           "trace": {"file": "trace.csv", "resources": "resources"},
           "gateways": {"timeout_ms": 1500},
           "contention_detector": {"enabled": False},
           "devices": [
               {"group": "meter", "count": 2, "mode": "sleep",
                "network": {"delay": {"time_ms": 30}, "direction": "egress",
                            "overrides": {"meter-0": {"delay": None}}},
                "push": [
                    {"op": "register", "phase": "setup", "target": "rd",
                     "path": "rd?ep={device}&lt=60&base=coap://{address}:{port}",
                     "format": "link-format", "body": "</r0>"},
                    {"op": "lookup", "phase": "verify", "target": "rd", "method": "GET",
                     "path": "endpoint-lookup/", "expect": 'ep="{device}"'},
                    {"op": "deregister", "phase": "teardown", "target": "rd",
                     "method": "DELETE", "path": "@location"}]},
               {"group": "rd", "server": {"command": [str(RD_BIN), "--bind", "{address}:{port}"],
                                          "ready_timeout_s": 20},
                "paths": ["resource-lookup/"], "requests": False},
               {"group": "store", "server": {"command": [STORE_BIN, "-A", "{address}", "-p",
                                                         "{port}", "-d", "10"]},
                "paths": ["time"], "requests": False}],
           "network": {"backend": "app"}, "report": {"enabled": False}}
    p = tmp_path / "push.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.skipif(not RD_BIN.exists() or STORE_BIN is None,
                    reason="needs aiocoap-rd (venv) and coap-server-notls (libcoap3-bin)")
def test_devices_register_replay_their_trace_lines_and_are_looked_up(harness, tmp_path):
    h = harness(str(_config(tmp_path)))
    rc = h.wait(180)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    run = json.loads((rd / "run.json").read_text())
    assert run["failures"] == [], h.output
    ops = s["push"]["by_op"]
    assert ops["register"]["outcomes"]["ok"] == 2 and ops["deregister"]["outcomes"]["ok"] == 2
    assert ops["trace-post"]["requests"] == 20 and ops["trace-post"]["outcomes"]["ok"] == 20
    [v] = s["push"]["verify"]
    assert (v["expected"], v["found"], v["missing"]) == (2, 2, [])
    assert s["overall"]["requests"] == 20 + 20            # the GE's lines + the devices' own
    r = {}
    for d in ("meter-0", "meter-1"):                      # meter-1's link delays its requests
        rows = (rd / "devices" / d / "push-requests.csv").read_text().splitlines()[1:]
        posts = [x.split(",") for x in rows if x.endswith(",test,trace-post")]
        r[d] = sorted(int(x[10]) - int(x[5]) for x in posts)[len(posts) // 2] / 1e6
    assert r["meter-1"] >= 30 > r["meter-0"], r
