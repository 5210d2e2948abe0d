"""An HTTP->CoAP proxy in the path (gateways.proxy.mode: http, the paper's Figure 1): the
config's defaults and checks, the URI mapping both ways (trace -> proxy, GE's recorded path ->
device path), where the proxy's losses go, and the readiness check against HTTP servers from
the standard library that are no such proxy."""
from __future__ import annotations

import http.server
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from wotbench.analysis import http_proxy as httpm
from wotbench.analysis import loss as lossm
from wotbench.config import byo
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.deploy.resolve import device_addresses, proxy_address
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.runner.deployment import thirdparty
from wotbench.workload import httpproxy
from wotbench.workload.generate import write_trace

PROXY_CMD = ["java", "-cp", "x.jar", "HttpCoapProxy.java", "{address}", "{port}"]


def _cfg(proxy: dict, **extra):
    return config_from_dict({"name": "t", "duration_s": 2, "seed": 1,
                             "devices": [{"group": "s", "count": 3,
                                          "rit": {"dist": "deterministic", "mean": 100}}],
                             "gateways": {"proxy": proxy}, **extra})


# ------------------------------------------------------------------ config
def test_http_mode_defaults_to_port_8080_and_prefix_proxy():
    p = byo.ProxySpec(command=PROXY_CMD, mode="http")
    assert (p.port, p.http_prefix, p.http) == (8080, "/proxy/", True)
    q = byo.ProxySpec(command=PROXY_CMD, mode="http", port=9000, http_prefix="/hc/")
    assert (q.port, q.http_prefix) == (9000, "/hc/")
    coap = byo.ProxySpec(command=["coap-server-notls"])
    assert (coap.port, coap.http_prefix, coap.http) == (5683, None, False)


@pytest.mark.parametrize("bad", ["proxy/", "/a?b", "/a#b", "/a b"])
def test_http_prefix_must_be_a_plain_path(bad):
    with pytest.raises(ConfigError) as e:
        _cfg({"command": PROXY_CMD, "mode": "http", "http_prefix": bad})
    assert "gateways.proxy.http_prefix" in str(e.value) and "starts with '/'" in str(e.value)


def test_http_prefix_without_http_mode_names_the_key_and_the_fix():
    with pytest.raises(ConfigError) as e:
        _cfg({"command": ["coap-server-notls"], "http_prefix": "/proxy/"})
    assert "gateways.proxy.http_prefix: only with mode: http" in str(e.value)
    with pytest.raises(ConfigError) as e:
        _cfg({"command": ["coap-server-notls"], "http_connections": 4})
    assert "gateways.proxy.http_connections: only with mode: http" in str(e.value)


# ------------------------------------------------------------------ URI mapping
def test_trace_addresses_every_request_to_the_proxy_with_the_device_uri(tmp_path: Path):
    cfg = _cfg({"command": PROXY_CMD, "mode": "http"})
    write_trace(cfg, tmp_path)
    trace = pd.read_csv(tmp_path / "trace.csv")
    px = proxy_address(cfg)
    addrs = {a.id: a for a in device_addresses(cfg)}
    assert len(trace) > 0
    for dev, uri in zip(trace.device_id, trace.uri):
        a = addrs[dev]
        assert uri.startswith(f"http://{px.ip}:8080/proxy/coap://{a.ip}:{a.port}/r"), uri
    # the GE records the request target without its leading slash; the analysis maps it back
    recorded = trace.uri.str.replace(f"http://{px.ip}:8080/", "", regex=False)
    assert set(recorded.map(httpproxy.device_path)) <= {f"r{j}" for j in range(100)}


def test_coap_proxy_modes_keep_coap_uris(tmp_path: Path):
    cfg = _cfg({"command": ["coap-server-notls"], "mode": "proxy-uri"})
    assert httpproxy.via(cfg) == ""
    write_trace(cfg, tmp_path)
    assert pd.read_csv(tmp_path / "trace.csv").uri.str.startswith("coap://").all()


def test_target_uri_and_device_path():
    assert httpproxy.target_uri("10.0.0.9", 8080, "/proxy/", "coap://10.0.0.2:5683/r1") == \
        "http://10.0.0.9:8080/proxy/coap://10.0.0.2:5683/r1"
    assert httpproxy.target_uri("fd00::9", 80, "/p/", "coap://[fd00::2]:5683/t") == \
        "http://[fd00::9]:80/p/coap://[fd00::2]:5683/t"
    assert httpproxy.device_path("proxy/coap://10.0.0.2:5683/r1") == "r1"
    assert httpproxy.device_path("hc/coap://[fd00::2]:5683/a/b?x=1") == "a/b?x=1"
    assert httpproxy.device_path("time") is None


def test_to_device_paths_merges_the_devices_paths_and_keeps_missing_ones():
    req = pd.DataFrame({"path": pd.Categorical(
        ["proxy/coap://10.0.0.2:5683/r0", "proxy/coap://10.0.0.3:5683/r0",
         "proxy/coap://10.0.0.3:5683/r1", None, "plain"])})
    out = httpproxy.to_device_paths(req)
    assert out["path"].astype(object).tolist()[:3] == ["r0", "r0", "r1"]
    assert pd.isna(out["path"].iloc[3]) and out["path"].iloc[4] == "plain"
    assert sorted(out["path"].cat.categories) == ["plain", "r0", "r1"]
    assert req["path"].iloc[0].startswith("proxy/")   # the input is not changed


# ------------------------------------------------------------------ loss attribution
def _losses(rows: list[tuple], matched_rows: list[tuple], timeout_ms: float = 100.0,
            interrupted: bool = False):
    """rows: (outcome, code, sent_ns); matched_rows: (row, arrival_ns, end_ns)."""
    req = pd.DataFrame({"outcome": [r[0] for r in rows],
                        "code": pd.array([r[1] for r in rows], dtype=object),
                        "sent": np.array([r[2] for r in rows], np.float64)})
    matched = pd.DataFrame({"row": [m[0] for m in matched_rows],
                            "arrival": np.array([m[1] for m in matched_rows], np.float64),
                            "end": np.array([m[2] for m in matched_rows], np.float64)})
    codes = np.zeros(len(rows), np.int64)
    has_log = np.array([True])
    cause = lossm.classify(req, matched, has_log, codes, timeout_ms)
    out = httpm.reclassify(cause, req, matched, has_log[codes], timeout_ms, interrupted)
    return [lossm.CAUSES[c] if c >= 0 else None for c in out]


def test_the_proxys_losses_go_to_the_proxy_and_the_devices_to_the_device():
    ms = 1e6
    got = _losses([
        ("ok", "200", 0.0),                 # 0 answered
        ("error", "504", 0.0),              # 1 the proxy gave up; the device never saw it
        ("error", "504", 0.0),              # 2 ... the device answered after the GE's timeout
        ("error", "502", 0.0),              # 3 the proxy could not translate the answer
        ("error", "503", 0.0),              # 4 the device refused it (logged): its 5.03
        ("error", "503", 0.0),              # 5 the proxy refused it (the device never saw it)
        ("timeout", "", 0.0),               # 6 the device never saw it: TCP got it to the proxy
        ("timeout", "", 0.0),               # 7 the device answered in time, the proxy held it
        ("timeout", "", 0.0),               # 8 the device answered late
        ("error", "404", 0.0),              # 9 the device has no such resource
        ("error", "", np.nan),              # 10 the GE's own send failed: the testbed's
        ("error", "", 0.0),                 # 11 sent, an answer that was no HTTP
        ("reset", "", 0.0),                 # 12 the proxy reset the connection
    ], [(0, 1 * ms, 3 * ms), (2, 1 * ms, 150 * ms), (4, 1 * ms, np.nan),
        (7, 1 * ms, 3 * ms), (8, 1 * ms, 150 * ms), (9, 1 * ms, np.nan)])
    assert got == [None, "proxy", "device_late", "proxy", "refused_503", "proxy", "proxy",
                   "proxy", "device_late", "sut_error", "local_send", "proxy", "sut_reset"]
    assert "proxy" in lossm.SUT and "proxy" not in lossm.TESTBED
    # in an interrupted run a request in flight without an answer is the interruption's
    assert _losses([("error", "", 0.0)], [], interrupted=True) == ["interrupted"]


# ------------------------------------------------------------------ readiness
class _Server:
    """A standard-library HTTP server on 127.0.0.1 answering GET with ``answer(path)``."""

    def __init__(self, answer):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                status = answer(self.path)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        # shutdown() waits for the loop's next poll: 0.5 s by default, per test
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def __enter__(self):
        return SimpleNamespace(name="proxy", address="127.0.0.1", port=self.port, role="proxy")

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


TARGET = "coap://10.0.0.2:5683/r0"


def test_a_forwarding_proxy_is_ready():
    seen = []

    def proxy(path):   # forwards: the device has r0 and nothing else
        seen.append(path)
        return 200 if path.endswith("/r0") else 404
    with _Server(proxy) as p:
        assert thirdparty.check_http_proxy(p, "/proxy/", TARGET, 2.0) == 200
    assert seen == ["/proxy/coap://10.0.0.2:5683/r0",
                    f"/proxy/coap://10.0.0.2:5683/{thirdparty.ABSENT_PATH}"]


def test_an_http_server_that_is_no_proxy_stops_the_run_with_the_key_and_the_fix():
    with _Server(lambda path: 404) as p:   # a plain web server: no such file
        with pytest.raises(ConfigError) as e:
            thirdparty.check_http_proxy(p, "/proxy/", TARGET, 2.0)
    msg = str(e.value)
    assert "gateways.proxy: the HTTP->CoAP proxy at 127.0.0.1" in msg and "404" in msg
    assert "not an HTTP->CoAP proxy" in msg and "gateways.proxy.http_prefix" in msg


def test_a_server_that_answers_everything_is_no_proxy():
    with _Server(lambda path: 200) as p:
        with pytest.raises(ConfigError) as e:
            thirdparty.check_http_proxy(p, "/proxy/", TARGET, 2.0)
    assert thirdparty.ABSENT_PATH in str(e.value) and "answers without asking" in str(e.value)


def test_a_proxy_that_cannot_reach_the_device_is_the_environments_problem():
    with _Server(lambda path: 504) as p:
        with pytest.raises(EnvironmentProblem) as e:
            thirdparty.check_http_proxy(p, "/proxy/", TARGET, 2.0)
    assert "504" in str(e.value) and "reaches the devices' network" in str(e.value)


def test_nothing_listening_names_the_key_and_what_the_program_did():
    with _Server(lambda path: 200) as p:
        pass   # closed: nothing listens on its port now
    with pytest.raises(EnvironmentProblem) as e:
        thirdparty.check_http_proxy(p, "/proxy/", TARGET, 0.3,
                                    gone=lambda: "exited with 1")
    assert "gateways.proxy" in str(e.value) and "exited with 1" in str(e.value)
    assert "command line may be wrong" in str(e.value)
    with pytest.raises(EnvironmentProblem) as e:   # alive, but listening elsewhere
        thirdparty.check_http_proxy(p, "/proxy/", TARGET, 0.3, gone=lambda: None)
    assert "accepted no TCP connection within 0.3 s" in str(e.value)
    assert "gateways.proxy.ready_timeout_s" in str(e.value)
