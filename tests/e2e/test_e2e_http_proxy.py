"""The paper's Figure 1 end to end and short: the GE speaks HTTP/1.1 to a real HTTP->CoAP proxy
(Eclipse Californium's proxy2, docs/examples/http-coap-proxy.yaml's command) in front of wot-devices;
every request is answered, joined to its device's log, and R is split into "proxy + network"
and "device". And an HTTP server that is no HTTP->CoAP proxy (the standard library's
http.server) stops the run before T0 with the key and the fix.

Californium is not part of this project (docs/HTTP-PROXY.md says how to get and build it beside
the project, at ../thirdparty/californium/); its test skips with the reason when it is absent."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from byo_run import run as _run, run_id as _run_id
from e2e_support import REPO, run_dir_of
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = pytest.mark.slow
EXAMPLE = REPO / "docs" / "examples" / "http-coap-proxy.yaml"


def _example_proxy() -> dict:
    """The example's gateways.proxy, its relative paths made absolute (the harness runs in a
    temporary directory)."""
    proxy = yaml.safe_load(EXAMPLE.read_text())["gateways"]["proxy"]

    def absolute(arg: str) -> str:
        parts = [str((REPO / p).resolve()) if p.startswith(("../", "scripts/")) else p
                 for p in arg.split(":")]
        return ":".join(parts)
    proxy["command"] = [absolute(a) for a in proxy["command"]]
    return proxy


def _missing() -> str | None:
    if not shutil.which("java"):
        return "java not installed (apt-get install openjdk-17-jre-headless)"
    cp = _example_proxy()["command"]
    jars = cp[cp.index("-cp") + 1].split(":")
    absent = [j for j in jars if not Path(j).is_file()]
    return (f"Californium proxy2 not built here: {', '.join(absent)} absent (docs/HTTP-PROXY.md, "
            "'Getting the proxy')") if absent else None


@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_ge_http_to_californium_proxy_to_wot_devices(harness_env, tmp_path):
    rc, h = _run(harness_env, tmp_path, {"name": "http-proxy", "backend": "process", "devices": [
        {"group": "emu", "count": 3, "rit": {"dist": "deterministic", "mean": 50}}],
        "gateways": {"proxy": _example_proxy()}})
    assert rc in (0, 3), h.output
    assert "the proxy forwards: 200 for emu-0/r0" in h.output
    rd = run_dir_of(tmp_path)
    s = json.loads((rd / "summary.json").read_text())
    assert all(v["outcomes"]["ok"] == v["requests"] > 0 for v in s["per_device"].values()), s
    ok = sum(v["requests"] for v in s["per_device"].values())
    ge = json.loads((rd / "ge" / "ge-0" / "summary.json").read_text())
    assert ge["http"]["connections_per_target"] == 8 and ge["http"]["status_classes"]["2xx"] == ok
    trace = (rd / "trace" / "trace.csv").read_text()
    assert "/proxy/coap://" in trace and ",http://" in trace
    # every answered request joined to its device's log through the proxy: R is split
    assert s["rd"]["join"]["ok_requests_matched"] == ok, s["rd"]["join"]
    dec = s["rd"]["overall"]["decomposition_ms"]
    assert dec["network_stack"]["count"] == dec["service"]["count"] == ok
    report = (rd / "report.html").read_text()
    assert "HTTP→CoAP proxy" in report and "proxy + network" in report
    assert s["sut_resources"]["components"]["proxy"]["test"]["cpu_cores"] > 0
    assert leftover_processes(_run_id(tmp_path)) == []


def test_http_server_that_is_no_proxy_stops_before_t0(harness_env, tmp_path):
    plain = [sys.executable, "-m", "http.server", "--bind", "{address}", "--directory",
             str(tmp_path / "no-such-dir"), "{port}"]
    rc, h = _run(harness_env, tmp_path, {"name": "http-noproxy", "backend": "process", "devices": [
        {"group": "emu", "count": 1}],
        "gateways": {"proxy": {"mode": "http", "command": plain, "ready_timeout_s": 20}}})
    assert rc == 2, h.output
    assert "gateways.proxy: the HTTP->CoAP proxy at" in h.output and "404" in h.output
    assert "not an HTTP->CoAP proxy" in h.output and "gateways.proxy.http_prefix" in h.output
    assert "T0 in" not in h.output
    assert leftover_processes(_run_id(tmp_path)) == []
