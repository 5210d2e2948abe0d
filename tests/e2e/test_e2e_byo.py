"""Third-party components as systems under test, end to end and short: an aiocoap server
(PyPI) as a process-backend device, Debian's coap-server-notls as a device image and as a
forward proxy (-P) in front of wot-devices (Docker), and the bad inputs -- a command that is not
there, an image that does not exist, an external target that does not answer, a proxy that
refuses Proxy-Uri -- each stopped with the key and the fix, nothing left behind."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

from byo_run import run as _run, run_id as _run_id
from e2e_support import HERE, labelled, run_dir_of
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = pytest.mark.slow
AIOCOAP = [sys.executable, str(HERE / "servers" / "aiocoap_server.py"), "--bind", "{address}",
           "--port", "{port}"]
COAP_SERVER = ["coap-server-notls", "-A", "{address}", "-p", "{port}"]
needs_libcoap = pytest.mark.skipif(not shutil.which("coap-server-notls"),
                                   reason="coap-server-notls not installed (apt-get install libcoap3-bin)")


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
def test_aiocoap_server_as_process_device(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-aiocoap", "backend": "process", "devices": [
        {"group": "aio", "count": 2, "server": {"command": AIOCOAP}, "paths": ["time", "hello"],
         "rit": {"dist": "deterministic", "mean": 100}},
        {"group": "emu", "count": 1, "rit": {"dist": "deterministic", "mean": 100}}]})
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    assert s["per_device"]["aio-0"]["outcomes"]["ok"] >= 25, s["per_device"]
    assert s["per_device"]["aio-0"]["outcomes"]["ok"] == s["per_device"]["aio-0"]["requests"]
    assert any("aio-0, aio-1" in w and "R only" in w for w in s["run"]["warnings"])
    assert "System under test" in (rd / "report.html").read_text()
    assert leftover_processes(_run_id(tmp_path)) == []


def test_command_not_found(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-nocmd", "backend": "process", "devices": [
        {"group": "s", "server": {"command": ["no-such-coap-server", "{address}"]},
         "paths": ["x"]}]})
    assert rc == 2, h.output
    assert "devices[0].server.command: program 'no-such-coap-server' not found" in h.output
    assert not (tmp_path / "reports").exists()    # refused by the pre-flight: nothing created


@pytest.mark.long   # make test-long (CI runs it after make test): 5-15 s of waiting
def test_external_target_that_does_not_answer(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-silent", "backend": "process", "devices": [
        {"group": "far", "external": ["127.0.0.1:5799"], "paths": ["time"]}]})
    assert rc == 1, h.output
    assert "devices[0].external: far-0 at 127.0.0.1:5799 did not answer a CoAP ping" in h.output
    assert "start it first" in h.output
    assert leftover_processes(_run_id(tmp_path)) == []


@needs_libcoap
def test_proxy_that_refuses_proxy_uri(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-noproxy", "backend": "process", "devices": [
        {"group": "emu", "count": 1}], "gateways": {"proxy": {"command": COAP_SERVER}}})
    assert rc == 2, h.output
    assert "gateways.proxy: the proxy at" in h.output and "5.05 Proxying Not Supported" in h.output
    assert "-P" in h.output
    assert leftover_processes(_run_id(tmp_path)) == []


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@pytest.mark.docker
@needs_libcoap
def test_coap_server_image_device_and_proxy_on_docker(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-docker", "devices": [
        {"group": "coap", "count": 1, "server": {"command": COAP_SERVER}, "paths": ["time"],
         "rit": {"dist": "deterministic", "mean": 100}},
        {"group": "emu", "count": 2, "rit": {"dist": "deterministic", "mean": 100}}],
        "gateways": {"proxy": {"command": COAP_SERVER + ["-P", ",wotbench-proxy"]}}}, 180)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    assert all(v["outcomes"]["ok"] == v["requests"] > 0 for v in s["per_device"].values()), s
    # each emulated device got its own requests through the proxy, and R is split
    for d in ("emu-0", "emu-1"):
        logged = (rd / "devices" / d / "device-log.csv").read_text().count("\n") - 1
        assert logged >= s["per_device"][d]["requests"], (d, logged)
    assert s["rd"]["join"]["ok_requests_matched"] >= 0.9 * (
        s["per_device"]["emu-0"]["requests"] + s["per_device"]["emu-1"]["requests"])
    assert "proxy + network" in (rd / "report.html").read_text()
    assert labelled(_run_id(tmp_path)) == ([], [])


@pytest.mark.docker
def test_image_that_does_not_exist(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "byo-noimage", "devices": [
        {"group": "s", "server": {"image": "wotbench-test/no-such-image:0"}, "paths": ["x"]}]})
    assert rc == 2, h.output
    assert "devices[0].server.image: no local Docker image 'wotbench-test/no-such-image:0'" in h.output
    assert "docker load" in h.output
    assert not (tmp_path / "reports").exists()    # refused by the pre-flight: nothing created
