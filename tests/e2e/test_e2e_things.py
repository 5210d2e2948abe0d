"""Things from a TD and a Thing Model through ``wotbench run`` (issue 34), and an emulated
Thing's resources read by libcoap's coap-client (a CoAP client nobody here wrote)."""
from __future__ import annotations

import csv
import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from e2e_support import REPO, finished_run, run_dir_of
from testkit.coap import ping
from wotbench.configfile.yaml_loader import load_config
from wotbench.things.trace import write_trace

DEVICE_BIN = REPO / "wot-device" / "build" / "wot-device"
GE_BIN = REPO / "gateway-emulator" / "build" / "gateway-emulator"
COAP_CLIENT = shutil.which("coap-client-notls") or shutil.which("coap-client")
REAL = pytest.mark.skipif(not (DEVICE_BIN.exists() and GE_BIN.exists()),
                          reason="needs the real wot-device and gateway-emulator (make build): "
                                 "the C stand-ins serve no resource files")


def _config(tmp_path: Path, **over) -> Path:
    src = yaml.safe_load((REPO / "configs" / "td-small.yaml").read_text())
    for t in src["things"]:
        for k in ("td", "model"):
            if k in t:
                t[k] = str(REPO / "configs" / t[k])
    src.update({"backend": "process", "duration_s": 6, "monitor": {"enabled": False},
                "contention_detector": {"calibration_s": 2}, **over})
    p = tmp_path / "td-small.yaml"
    p.write_text(yaml.safe_dump(src))
    return p


@pytest.mark.long    # ~33 s on this 2-core host (a 6 s test, 2 s calibration, report)
@REAL
def test_td_small_runs_and_reports_by_affordance(harness, tmp_path):
    rd, reqs = finished_run(harness(str(_config(tmp_path))), tmp_path)
    seen = {(r["method"], r["path"].lstrip("/").split("?")[0]) for r in reqs}
    assert {("GET", "status"), ("PUT", "status"), ("POST", "toggle"), ("OBSERVE", "status"),
            ("OBSERVE", "oh"), ("GET", "properties/temperature"),
            ("POST", "actions/setMode")} <= seen, seen
    answered = [r for r in reqs if r["method"] in ("GET", "PUT", "POST")]
    assert answered and all(r["outcome"] in ("ok", "error", "timeout", "reset", "unsent")
                            for r in answered)
    assert sum(r["outcome"] == "ok" for r in answered) > 0.95 * len(answered)
    # the devices served the TD's paths with the affordances' service times
    with open(rd / "devices/lamp-0/device-log.csv") as f:
        log = list(csv.DictReader(f))
    toggles = [int(r["end_ns"]) - int(r["start_ns"]) for r in log if r["path"] == "toggle"]
    assert toggles and min(toggles) >= 8_000_000          # service_time_ms: 8 (sleep)
    with open(rd / "devices/lamp-0/notify-log.csv") as f:
        notes = [r for r in csv.DictReader(f) if r["kind"] == "notify"]
    assert {r["path"] for r in notes} == {"status", "oh"}, notes[:3]
    html = (rd / "report.html").read_text()
    assert 'id="table-things"' in html and "actions/setMode" in html and "Thermostat" in html


@pytest.mark.skipif(COAP_CLIENT is None, reason="libcoap3-bin's coap-client is not installed")
@pytest.mark.skipif(not DEVICE_BIN.exists(), reason="needs wot-device (make build)")
def test_an_instance_serves_its_forms_and_its_own_td_to_coap_client(tmp_path):
    cfg = load_config(_config(tmp_path))
    write_trace(cfg, tmp_path / "trace")
    td = json.loads((tmp_path / "trace/things/tds.jsonl").read_text().splitlines()[0])["td"]
    own = json.dumps(td, separators=(",", ":"), ensure_ascii=False).encode()
    ip, port = f"127.0.{random.randint(1, 250)}.{random.randint(2, 250)}", random.randint(20000, 60000)
    log = tmp_path / "dev"
    log.mkdir()
    proc = subprocess.Popen([str(DEVICE_BIN), "--resources", str(tmp_path / "trace/resources/lamp-0.csv"),
                             "--log-dir", str(log), "--listen", f"{ip}:{port}"],
                            stderr=open(tmp_path / "stderr.txt", "w"))
    try:
        deadline = time.monotonic() + 10
        while not ping((ip, port)):
            assert proc.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "stderr.txt").read_text()

        def get(path: str) -> bytes:
            out = subprocess.run([COAP_CLIENT, "-B", "5", f"coap://{ip}:{port}/{path}"],
                                 capture_output=True, timeout=10)
            assert out.returncode == 0, out
            return out.stdout.strip()
        assert get(".well-known/wot") == own      # its own TD's bytes (block-wise above 1024)
        assert len(get("status")) in (len('"on"'), len('"off"'))   # a value of its enum
        core = get(".well-known/core").decode()
        assert all(f"</{p}>" in core for p in ("status", "toggle", "oh", ".well-known/wot")), core
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


TDD_BIN = REPO / ".venv" / "bin" / "wotbench-tdd"


@pytest.mark.long    # ~40 s: a directory that spawns node.js per stored TD
@pytest.mark.skipif(not TDD_BIN.exists() or shutil.which("node") is None,
                    reason="needs wotbench-tdd (make build: domus-tdd-api, pyoxigraph) and node.js "
                           "(Debian nodejs), which Domus runs to turn JSON-LD into triples")
@pytest.mark.skipif(not GE_BIN.exists(), reason="needs the real gateway-emulator (make build)")
def test_things_register_with_a_real_directory(harness, tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-directory.yaml").read_text())
    src["things"][0]["model"] = str(REPO / "configs" / src["things"][0]["model"])
    src["things"][0]["count"] = 6
    src["directory"]["server"]["command"][0] = str(TDD_BIN)
    src["directory"].update({"register_within_s": 5, "verify_within_s": 4, "updates_per_s": 0,
                             "queries_per_s": 0.5, "deregister_within_s": 4})
    src.update({"duration_s": 20, "monitor": {"enabled": False},
                "contention_detector": {"calibration_s": 2, "service_time_ms": 1, "mode": "busy"}})
    p = tmp_path / "td-directory.yaml"
    p.write_text(yaml.safe_dump(src))
    h = harness(str(p))
    rc = h.wait(240)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    with open(rd / "ge/ge-0/requests.csv") as f:
        reqs = list(csv.DictReader(f))
    def phase(method, suffix=""):
        return [r for r in reqs if r["method"] == method and r["path"].lstrip("/").startswith("things/")
                and r["path"].endswith(suffix) and ("?" in r["path"]) == bool(suffix)]
    reg, ver, dereg = phase("PUT"), phase("GET", "?verify"), phase("DELETE")
    assert len(reg) == len(ver) == len(dereg) == 6, h.output
    assert [r["code"] for r in reg] == ["201"] * 6                # created
    assert [r["code"] for r in ver] == ["200"] * 6                # every instance found
    assert [r["code"] for r in dereg] == ["204"] * 6              # and gone again
    html = (rd / "report.html").read_text()
    assert "Thing Description Directory" in html and "register" in html
    assert "Directory verification: 6 of 6 registered Things found" in html


@pytest.mark.skipif(not TDD_BIN.exists() or shutil.which("node") is None,
                    reason="needs wotbench-tdd (make build: domus-tdd-api, pyoxigraph) and node.js "
                           "(Debian nodejs), which Domus runs to turn JSON-LD into triples")
@pytest.mark.skipif(not GE_BIN.exists(), reason="needs the real gateway-emulator (make build)")
def test_each_registration_stores_its_own_td_in_a_real_directory(tmp_path):
    """td-directory's registrations (its trace's PUT lines, the body column) sent by the GE to
    Domus TDD API; each instance's TD read back from the directory is its own."""
    import socket
    import urllib.request
    src = yaml.safe_load((REPO / "configs" / "td-directory.yaml").read_text())
    src["things"][0]["model"] = str(REPO / "configs" / src["things"][0]["model"])
    src["things"][0]["count"] = 4
    src["directory"]["server"]["command"][0] = str(TDD_BIN)
    p = tmp_path / "td-directory.yaml"
    p.write_text(yaml.safe_dump(src))
    write_trace(load_config(p), tmp_path / "trace")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines = (tmp_path / "trace/trace.csv").read_text().splitlines()
    regs = [x.split(",", 4) for x in lines[1:] if ",PUT," in x and "?" not in x.split(",")[3]]
    assert len(regs) == 4
    rows = [f"{d},{100_000 * k},PUT,http://127.0.0.1:{port}/{uri.split('/', 3)[3]},{rest}"
            for k, (d, _, _, uri, rest) in enumerate(regs)]
    (tmp_path / "reg.csv").write_text(lines[0] + "\n" + "\n".join(rows) + "\n")
    tdd = subprocess.Popen([str(TDD_BIN), "--listen", f"127.0.0.1:{port}", "--workdir",
                            str(tmp_path)], stdout=subprocess.DEVNULL,
                           stderr=open(tmp_path / "tdd.txt", "w"))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2).read()
                break
            except OSError:
                assert tdd.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "tdd.txt").read_text()[-2000:]
                time.sleep(0.3)
        ge = subprocess.run([str(GE_BIN), "--trace", str(tmp_path / "reg.csv"), "--out",
                             str(tmp_path / "ge"), "--timeout-ms", "30000", "--http-header",
                             "Content-Type: application/td+json"],
                            capture_output=True, text=True, timeout=180)
        assert ge.returncode == 0, ge.stderr
        with open(tmp_path / "ge/requests.csv") as f:
            assert [r["code"] for r in csv.DictReader(f)] == ["201"] * 4   # each one created
        own = [json.loads(x)["td"] for x in
               (tmp_path / "trace/things/tds.jsonl").read_text().splitlines()]
        stored = [json.loads(urllib.request.urlopen(f"{base}/things/{td['id']}", timeout=30).read())
                  for td in own]
    finally:
        tdd.terminate()
        tdd.wait(10)
    keys = ("id", "title", "description", "base")
    for mine, theirs in zip(own, stored):
        assert {k: theirs.get(k) for k in keys} == {k: mine[k] for k in keys}
        assert theirs["properties"].keys() == mine["properties"].keys()
    assert len({td["base"] for td in stored}) == len({td["description"] for td in stored}) == 4
