"""End to end, process backend: devices in a wot-fleet engine talk first (devices[].push in
the engine, issue 29) to servers nobody here wrote. 40 meters of one engine register with
aiocoap's Resource Directory before T0 (setup), refresh their registration at the location it
gave and PUT readings to a coap-server-notls store during the test, are looked up after it
(the verify op: aiocoap's client asks the RD) and deregister at the stop; the analysis counts
their own requests as it counts a process device's."""
from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from e2e_support import REPO, run_dir_of

pytestmark = [pytest.mark.slow, pytest.mark.long]   # ~20 s: RD start, a 2.5 s test, the drain
RD_BIN = Path(sys.executable).parent / "aiocoap-rd"
STORE_BIN = shutil.which("coap-server-notls")
FLEET_BIN = REPO / "wot-device" / "build" / "wot-fleet"
METERS = 40


def _config(tmp_path: Path) -> Path:
    cfg = {"name": "e2e-fleet-push", "backend": "process", "duration_s": 2.5, "seed": 5,
           "gateways": {"timeout_ms": 3000},
           "contention_detector": {"enabled": False},
           "devices": [
               {"group": "rd", "server": {"command": [str(RD_BIN), "--bind", "{address}:{port}"],
                                          "ready_timeout_s": 20},
                "paths": ["resource-lookup/"], "requests": False},
               {"group": "store", "server": {"command": [STORE_BIN, "-A", "{address}", "-p",
                                                         "{port}"]},
                "paths": ["time"], "rit": {"dist": "deterministic", "mean": 500}},
               {"group": "meter", "count": METERS, "engine": "fleet", "requests": False,
                "push": [
                    {"op": "register", "phase": "setup", "target": "rd",
                     "path": "rd?ep={device}&lt=60&base=coap://{address}:{port}",
                     "format": "link-format", "body": "</r0>"},
                    {"op": "refresh", "target": "rd", "path": "@location?lt=60",
                     "interval": {"dist": "deterministic", "mean": 1000}},
                    {"op": "reading", "target": "store", "method": "PUT",
                     "path": "example_data", "type": "non", "format": "senml+json",
                     "interval": {"dist": "deterministic", "mean": 500},
                     "value": {"dist": "normal", "mean": 21.5, "cv": 0.05},
                     "body": [{"n": "temp", "v": "{value}"}]},
                    {"op": "lookup", "phase": "verify", "target": "rd", "method": "GET",
                     "path": "endpoint-lookup/", "expect": 'ep="{device}"'},
                    {"op": "deregister", "phase": "teardown", "target": "rd",
                     "method": "DELETE", "path": "@location"}]}],
           "report": {"enabled": False}}
    p = tmp_path / "fleet-push.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.skipif(not RD_BIN.exists() or STORE_BIN is None or not FLEET_BIN.exists(),
                    reason="needs aiocoap-rd (venv), coap-server-notls (libcoap3-bin) and the "
                           "real wot-fleet (make build)")
def test_engine_devices_register_push_are_looked_up_and_deregister(harness, tmp_path):
    h = harness(str(_config(tmp_path)))
    rc = h.wait(180)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    assert run["failures"] == [], h.output
    [fleet] = run["fleets"]
    assert fleet["devices"] == METERS
    engine = json.loads((rd / fleet["dir"] / "fleet-summary.json").read_text())
    push = engine["push"]
    assert push["devices"] == METERS and push["started"] is True
    rows = list(csv.DictReader(open(rd / fleet["dir"] / "fleet-push.csv")))
    assert len(rows) == push["requests"] == sum(push["outcomes"].values())
    # every device registered at a location of its own, refreshed and left it there
    by_op = {}
    for r in rows:
        by_op.setdefault(r["op"], []).append(r)
    assert {r["outcome"] for r in by_op["register"]} == {"ok"}
    assert {r["code"] for r in by_op["register"]} == {"2.01"}
    assert len({r["device"] for r in by_op["register"]}) == METERS
    refreshed = {r["path"].split("?")[0] for r in by_op["refresh"]}
    deregistered = {r["path"] for r in by_op["deregister"]}
    assert len(deregistered) == METERS and refreshed == deregistered
    assert all(p.startswith("reg/") for p in deregistered)   # aiocoap-rd's Location-Path
    assert {r["outcome"] for r in by_op["deregister"]} == {"ok"}
    # each device sent from its own endpoint: the RD's lookup names all of them
    s = json.loads((rd / "summary.json").read_text())
    [v] = s["push"]["verify"]
    assert (v["expected"], v["found"], v["missing"]) == (METERS, METERS, [])
    ops = s["push"]["by_op"]
    assert ops["register"]["outcomes"]["ok"] == METERS and ops["deregister"]["outcomes"]["ok"] == METERS
    test_rows = len(by_op["refresh"]) + len(by_op["reading"])
    assert ops["refresh"]["requests"] + ops["reading"]["requests"] == test_rows
    assert ops["refresh"]["outcomes"]["ok"] == len(by_op["refresh"])
    assert s["push"]["send_lag"]["p50_us"] is not None
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())
    assert s["overall"]["requests"] == ge["requests"] + test_rows   # the devices' own counted
