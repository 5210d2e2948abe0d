"""Closed-loop load end to end and short (process backend): 200 virtual clients against
libcoap's coap-server-notls and aiocoap's server started by WoTbench as `server:` devices, an
open loop from 50 client endpoints, and the bad inputs -- a client count beyond the port range
and a target that does not answer -- stopped before the test with the key and the fix."""
from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from e2e_support import HERE, Harness, run_dir_of

pytestmark = pytest.mark.slow
COAP_SERVER = ["coap-server-notls", "-A", "{address}", "-p", "{port}"]
AIOCOAP = [sys.executable, str(HERE / "servers" / "aiocoap_server.py"), "--bind", "{address}",
           "--port", "{port}"]
needs_libcoap = pytest.mark.skipif(not shutil.which("coap-server-notls"),
                                   reason="coap-server-notls not installed (apt-get install libcoap3-bin)")


def _run(harness_env, tmp_path: Path, gateways: dict, server=COAP_SERVER, **extra):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({
        "name": "closed", "backend": "process", "duration_s": 4, "seed": 3,
        "devices": [{"group": "srv", "count": 1, "server": {"command": server},
                     "paths": ["time"]}],
        "gateways": gateways, "contention_detector": {"enabled": False},
        "monitor": {"enabled": False}, **extra}))
    h = Harness(["run", str(path), "--out-root", str(tmp_path / "reports")], harness_env, tmp_path)
    return h.wait(180), h


def _requests(rd: Path) -> list[dict]:
    with open(rd / "ge" / "ge-0" / "requests.csv", newline="") as f:
        return list(csv.DictReader(f))


@needs_libcoap
def test_closed_loop_against_libcoap_server(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"loop": "closed", "clients": 200, "warmup_s": 1,
                                         "cooldown_s": 0.5, "timeout_ms": 1000})
    assert rc in (0, 3), h.output    # 3: a shared 2-core host may flag the GE's stalls
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    load = s["load"]
    rows = _requests(rd)
    phases = {p: sum(r["phase"] == p for r in rows) for p in ("warmup", "measure", "cooldown")}
    assert load["loop"] == "closed" and load["clients"] == 200 and load["window_s"] == 2.5
    assert load["requests"] == phases["measure"] > 1000
    assert load["excluded"] == {"warmup": phases["warmup"], "cooldown": phases["cooldown"]}
    assert load["per_client"]["clients"] == 200 and load["per_client"]["min"] > 0
    assert load["throughput_rps"] > 0 and load["latency_ms"]["p50_ms"] > 0
    assert "coordinated omission" in load["note"]
    assert len({r["client"] for r in rows}) == 200
    g = s["ge_integrity"]["per_ge"]["ge-0"]
    assert g["closed_loop"]["stall_share"] is not None and g["kept_up"] is not None
    assert "Load: closed loop, 200 client endpoints" in (rd / "report.html").read_text()


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
def test_closed_loop_against_aiocoap_server(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"loop": "closed", "clients": 20,
                                         "think": {"dist": "exponential", "mean": 5}},
                 server=AIOCOAP)
    assert rc in (0, 3), h.output
    s = json.loads((run_dir_of(tmp_path) / "summary.json").read_text())
    assert s["load"]["loop"] == "closed" and s["load"]["think"] == "exp 5000 µs"
    assert s["load"]["per_client"]["min"] > 0


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@needs_libcoap
def test_open_loop_from_many_endpoints(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"clients": 50},
                 devices=[{"group": "srv", "count": 1, "server": {"command": COAP_SERVER},
                           "paths": ["time"], "rit": {"dist": "exponential", "mean": 5}}])
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    assert s["load"]["loop"] == "open" and s["load"]["clients"] == 50
    assert s["load"]["latency_from_schedule_ms"]["p50_ms"] is not None
    assert len({r["client"] for r in _requests(rd)}) == 50


def test_clients_beyond_the_port_range_stop_before_anything(harness_env, tmp_path):
    lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    rc, h = _run(harness_env, tmp_path, {"loop": "closed", "clients": min(hi - lo + 2, 60000)})
    if hi - lo + 2 > 60000:
        pytest.skip("the port range is wider than the schema's client limit")
    assert rc == 2, h.output
    assert "gateways.clients:" in h.output and "ip_local_port_range" in h.output
    assert "Traceback" not in h.output
    assert not list((tmp_path / "reports").glob("*/ge"))     # nothing started


@pytest.mark.long   # make test-long (CI runs it after make test): 5-15 s of waiting
def test_target_that_does_not_answer_stops_the_run(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"loop": "closed", "clients": 10},
                 devices=[{"group": "ext", "external": ["127.0.0.1:9"], "paths": ["time"]}])
    assert rc != 0 and "devices[0].external" in h.output, h.output
    assert "Traceback" not in h.output
