"""HTTP systems under test (issue 22), Python side: the config keys (devices[].protocol,
gateways.http, server.config_template/check) and their checks, the http:// trace, the GE's
options, the readiness GET, the rendered server config and nginx's own check, the analysis's
``http`` block and the report's HTTP section."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from testkit.groups import config_of, problems_of
from testkit.http_server import HttpServer
from wotbench.analysis import http_figures as http_analysis
from wotbench.config import http_spec
from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.errors import ConfigError
from wotbench.report.http_section import http as http_section
from wotbench.runner.deployment import httpprobe
from wotbench.runner import serverconf
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.rundir.ge_files import GeHttp
from wotbench.rundir.layout import GE_BODY_TEMPLATE
from wotbench.sweep.core import derive_config
from wotbench.workload.generate import write_trace

REPO = Path(__file__).resolve().parents[2]
NGINX = ["nginx", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
TEMPLATE = str(REPO / "configs" / "http-nginx.conf")


def web(**kw) -> dict:
    g = {"group": "web", "count": 2, "protocol": "http",
         "server": {"command": NGINX, "config_template": TEMPLATE},
         "paths": ["sensors/t", "actuators/led"]}
    g.update(kw)
    return g


cfg, problems = config_of, problems_of


def test_http_group_defaults_to_port_8080_and_generates_http_uris(tmp_path):
    c = cfg(web(methods={"GET": 0.5, "PATCH": 0.5}, request_payload_bytes=7,
                rit={"dist": "deterministic", "mean": 50}))
    assert c.devices[0].server.port == 8080
    write_trace(c, tmp_path)
    rows = list(csv.DictReader((tmp_path / "trace.csv").open()))
    assert rows and all(r["uri"].startswith("http://172.28.0.1") and ":8080/" in r["uri"]
                        for r in rows)
    assert {r["uri"].split("/", 3)[3] for r in rows} == {"sensors/t", "actuators/led"}
    assert {r["method"] for r in rows} == {"GET", "PATCH"}
    assert {r["payload_bytes"] for r in rows if r["method"] == "PATCH"} == {"7"}
    assert {r["payload_bytes"] for r in rows if r["method"] == "GET"} == {"0"}
    # the CD's probes stay CoAP
    assert "coap://" in (tmp_path / "cd-trace.csv").read_text()


def test_an_explicit_port_and_external_endpoints_are_kept(tmp_path):
    c = cfg(web(server={"command": NGINX, "config_template": TEMPLATE, "port": 9000}, count=1))
    assert c.devices[0].server.port == 9000
    c = cfg({"group": "far", "protocol": "http", "external": ["127.0.0.1:8081"], "paths": ["x"]})
    write_trace(c, tmp_path)
    assert "http://127.0.0.1:8081/x" in (tmp_path / "trace.csv").read_text()


def test_coap_only_settings_are_refused_with_the_key():
    p = problems(web(response="separate"), gateways={"message_type": "non", "retransmit": True,
                                                     "block_size": 64, "clients": 4},
                 dtls={"enabled": True, "psk_key": "k"})
    text = "\n".join(p)
    for key in ("devices[0].response: separate", "gateways.message_type: non",
                "gateways.retransmit: true", "gateways.block_size: block-wise",
                "gateways.clients: an open loop's client endpoints", "dtls.enabled: true"):
        assert key in text, text
    assert ("gateways.message_type: non: CoAP message types mean nothing over HTTP (TCP); remove "
            "it (devices[0] has protocol: http)") in p
    closed = config_of(web(), gateways={"loop": "closed", "clients": 2})  # one connection each
    assert closed.gateways.loop == "closed" and http_spec.ge_args(closed) == []
    assert problems(web(), gateways={"loop": "closed", "clients": 2,
                                     "http": {"connections": 4}}) == [
        "gateways.http.connections: with loop: closed every client owns one connection "
        "(gateways.clients); remove it (devices[0] has protocol: http)"]
    assert any(x.startswith("gateways.proxy: a CoAP forward proxy cannot carry http://")
               for x in problems(web(), gateways={"proxy": {"endpoint": "127.0.0.1:5683"}}))
    assert any("devices[0].observe" in x for x in problems(web(observe={"period_ms": 100})))


def test_one_protocol_per_run_and_http_needs_a_server():
    assert problems({"group": "emu"}, web()) == [
        "devices[0].protocol: coap, but devices[1] is http: a gateway emulator speaks one "
        "protocol per trace; give every group protocol: http, or run the CoAP groups in "
        "another run"]
    assert problems({"group": "emu", "protocol": "http"}) == [
        "devices[0].protocol: http needs 'server' (e.g. Debian's nginx, configs/http-nginx.yaml) "
        "or 'external' endpoints: wot-device speaks CoAP only"]
    assert problems({"group": "emu", "methods": {"PATCH": 1}}) == [
        "devices[0].methods: PATCH is HTTP only, expected GET/PUT/POST/DELETE for a CoAP group "
        "(or protocol: http)"]
    assert problems({"group": "emu"}, gateways={"http": {"connections": 2}}) == [
        "gateways.http: only with a device group of protocol: http; remove it (the devices "
        "speak CoAP)"]


def test_header_and_body_templates_are_checked_like_the_ge_does(tmp_path):
    body = tmp_path / "body.json"
    body.write_text('{"a": 1,\n "b": "{{devcie}}"}\n')
    p = problems(web(), gateways={"http": {
        "headers": ["Host: x", "Bad Name: y", "X-Id: {{index}", "X-Ok: {{device}}"],
        "body_template_file": str(body)}})
    assert p[0].startswith("gateways.http.headers[0]: 'Host: x': the gateway emulator writes "
                           "Host itself")
    assert p[1].startswith("gateways.http.headers[1]: 'Bad Name: y', expected 'Name: value'")
    assert p[2].startswith("gateways.http.headers[2]:1:7: an unclosed '{{'")
    assert p[3] == (f"gateways.http.body_template_file: {body}:2:8: unknown placeholder "
                    "'devcie', expected one of {{index}} {{device}} {{method}} {{path}} "
                    "{{payload}} {{seq}} {{client}} {{rand}} {{time_ms}} {{time_ns}} (a literal "
                    "'{{' cannot be written)")
    assert len(p) == 4
    assert problems(web(), gateways={"http": {"body_template": "x", "body_template_file": str(body)}}) == [
        "gateways.http: give body_template or body_template_file, not both"]
    assert "cannot read" in problems(web(), gateways={"http": {
        "body_template_file": str(tmp_path / "none")}})[0]
    # single braces are text: a JSON body needs no escaping
    assert http_spec.template_problems('{"v": {{payload}}}', "k") == []


def test_server_config_keys_are_checked(tmp_path):
    assert problems(web(server={"command": NGINX})) == [
        "devices[0].server: {config} or 'check' without config_template: give config_template "
        "(the file rendered into the run directory)"]
    assert problems(web(server={"command": NGINX, "config_template": str(tmp_path / "no.conf")})) == [
        f"devices[0].server.config_template: file not found: {tmp_path / 'no.conf'}"]


def test_ge_options_and_body_template_file():
    c = cfg(web(), gateways={"http": {"connections": 3, "connection_per_request": True,
                                      "headers": ["Content-Type: application/json"]}})
    assert http_spec.ge_args(c) == ["--http-connections", "3", "--http-connection-per-request",
                                    "--http-header", "Content-Type: application/json"]
    assert http_spec.ge_args(cfg({"group": "emu"})) == []
    g = GeRun(name="ge-0", role="ge", cpu=1, trace=Path("t"), out_dir=Path("o"), stdout=Path("s"),
              http_body_template=True)
    a = g.args("/trace.csv", "/out")
    assert a[a.index("--http-body-template") + 1] == f"/out/{GE_BODY_TEMPLATE}"


def test_the_example_config_loads_and_sweeps_over_http_keys(tmp_path):
    path = REPO / "configs" / "http-nginx.yaml"
    c = load_config(path)
    assert c.devices[0].protocol == "http" and c.gateways.http.connections == 2
    raw = __import__("yaml").safe_load(path.read_text())
    # a sweep / capacity point: the pool size and the rate of the HTTP group
    d = config_from_dict(derive_config(raw, {"gateways.http.connections": 8,
                                             "devices[0].rit.mean": 5.0},
                                       base_dir=path.parent, name="p"))
    assert d.gateways.http.connections == 8 and d.devices[0].rit.mean == 5.0
    assert d.devices[0].server.config_template == str(REPO / "configs" / "http-nginx.conf")
    s = write_trace(d, tmp_path)
    assert s.requests > 0 and "http://" in (tmp_path / "trace.csv").read_text()


def test_render_keeps_the_servers_own_braces():
    t = "server {\n  listen {address}:{port};\n  return 200 '{\"d\":\"{name}\"}';\n  pid {scratch}/p;\n}"
    assert serverconf.render_text(t, "10.0.0.1", 8080, "web-0", "/s") == (
        "server {\n  listen 10.0.0.1:8080;\n  return 200 '{\"d\":\"web-0\"}';\n  pid /s/p;\n}")


def _device(tmp_path: Path, template: Path, check: list[str]) -> DeviceRun:
    c = cfg(web(server={"command": NGINX, "config_template": str(template), "check": check},
                count=1))
    d = DeviceRun(name="web-0", id=0, group="web", role="device", address="172.28.0.10",
                  port=8080, cpuset="1", resources=None, log_dir=tmp_path / "dev",
                  stdout=tmp_path / "out", program=c.devices[0].server,
                  program_key="devices[0].server", protocol="http", probe_path="sensors/t")
    (d.log_dir / "scratch").mkdir(parents=True)
    return d


def test_rendered_config_paths_for_container_and_process(tmp_path):
    tpl = tmp_path / "n.conf"
    tpl.write_text("listen {address}:{port}; pid {scratch}/pid;\n")
    d = _device(tmp_path, tpl, ["true"])
    serverconf.prepare(d, in_container=True, scratch=d.log_dir / "scratch")
    assert (d.log_dir / "n.conf").read_text() == "listen 172.28.0.10:8080; pid /.wb/scratch/pid;\n"
    assert d.program_args(False, d.address, in_container=True) == [
        "nginx", "-e", "stderr", "-c", "/.wb/config/n.conf", "-p", "/.wb/scratch/"]
    serverconf.prepare(d, in_container=False, scratch=d.log_dir / "scratch")
    assert d.program_args(False, d.address)[4] == str(d.log_dir / "n.conf")


@pytest.mark.skipif(not shutil.which("nginx"), reason="nginx not installed (apt-get install nginx)")
def test_nginx_config_error_names_the_template_line(tmp_path):
    tpl = REPO / "configs" / "http-nginx.conf"
    check = ["nginx", "-t", "-q", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
    d = _device(tmp_path, tpl, check)
    serverconf.prepare(d, in_container=True, scratch=d.log_dir / "scratch")
    serverconf.check_program(d.program_key, d.program, d.name)   # the example passes nginx -t
    bad = tmp_path / "bad.conf"
    bad.write_text(tpl.read_text().replace("keepalive_timeout 300s;", "keepalive_timeout 300s;\n  no_such_directive on;"))
    line = bad.read_text().splitlines().index("  no_such_directive on;") + 1
    (tmp_path / "b").mkdir()
    d = _device(tmp_path / "b", bad, check)
    serverconf.prepare(d, in_container=True, scratch=d.log_dir / "scratch")
    with pytest.raises(ConfigError) as e:
        serverconf.check_program(d.program_key, d.program, d.name)
    msg = e.value.problems[0]
    assert msg.startswith(f"devices[0].server.config_template: {bad} was refused by `nginx -t -q -e stderr -c {{config}}")
    assert f'unknown directive "no_such_directive" in {bad}:{line}' in msg
    assert list((d.log_dir / "scratch").iterdir()) == []   # the check wrote elsewhere


def test_http_probe_takes_any_status_as_an_answer():
    with HttpServer(mode="status:404") as s:
        silent, status = httpprobe.probe_all([("a", s.host, s.port, "x")], timeout_s=2)
    assert silent == [] and status == {"a": 404}
    port = serverconf._free_loopback_port()   # nothing listens there
    silent, _ = httpprobe.probe_all([("b", "127.0.0.1", port, "")], timeout_s=0.3)
    assert silent == ["b"]


def _ge_summary(**kw) -> GeHttp:
    base = dict(connections_per_target=2, connection="keep-alive", connections=4, connects=5,
                connect_failures=1, refused=1, resets=0, closed_by_server=1, protocol_errors=0,
                queued=2, new_connection_requests=0, bytes_received=900,
                status_classes={"1xx": 0, "2xx": 3, "3xx": 0, "4xx": 1, "5xx": 1}, headers=0,
                body_template=False)
    base.update(kw)
    return GeHttp.model_validate(base)


def test_analysis_block_counts_codes_waits_and_the_pool():
    req = pd.DataFrame({
        "code": pd.Categorical(["200", "200", "404", "503", "200", None, None]),
        "outcome": pd.Categorical(["ok", "ok", "error", "error", "ok", "reset", "timeout"]),
        "sent": [1e6, 2e6, 3e6, 9e6, 5e6, 6e6, np.nan],
        "queued": [np.nan, np.nan, np.nan, 5e6, np.nan, np.nan, 6.5e6]})
    run = SimpleNamespace(ges=[SimpleNamespace(summary=SimpleNamespace(http=_ge_summary())),
                               SimpleNamespace(summary=SimpleNamespace(http=_ge_summary()))])
    b = http_analysis.analyse(run, req)
    assert b.status_codes == {"200": 3, "404": 1, "503": 1}
    assert b.without_status == {"reset": 1, "timeout": 1}
    # two waited; the one still waiting at its timeout has no send: no wait figure
    assert b.queued == 2 and b.queued_share == pytest.approx(2 / 7)
    assert b.wait_ms.count == 1 and b.wait_ms.p50_ms == pytest.approx(4.0)
    assert b.pool.connects == 10 and b.pool.refused == 2 and b.connection == "keep-alive"
    run.ges[1].summary.http = _ge_summary(connection="per-request", connections_per_target=64)
    assert http_analysis.analyse(run, req).connection == "mixed"
    assert http_analysis.analyse(SimpleNamespace(ges=[SimpleNamespace(
        summary=SimpleNamespace(http=None))]), req) is None

    sec = http_section(SimpleNamespace(http=b))
    assert [(r["code"], r["class"], r["requests"]) for r in sec["rows"]] == [
        ("200", "ok", 3), ("404", "client error", 1), ("503", "server error", 1),
        ("—", "no status: reset", 1), ("—", "no status: timeout", 1)]
    assert sec["wait"]["n"] == 2 and sec["pool"]["connects"] == 10
    assert http_section(SimpleNamespace(http=None)) == {"available": False}
