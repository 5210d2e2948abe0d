"""Bring your own system under test: the config keys (wotbench.config.byo), the trace's paths, the
CD sizing, the proxy's core, the harness's CoAP encoding and the pre-run checks."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testkit.groups import config_of, problems_of
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.deploy.plan import make_plan
from wotbench.deploy.resolve import device_addresses, proxy_address
from cd_module.sizing import resolve_cd
from wotbench.runner.deployment import coapprobe, thirdparty
from wotbench.runner.backends.docker import hostimage
from wotbench.workload.generate import write_trace

SERVER = {"command": ["coap-server-notls", "-A", "{address}", "-p", "{port}"]}


cfg, problems = config_of, problems_of


def test_bad_keys_are_named_with_the_fix():
    assert problems({"group": "a", "server": {}, "paths": ["x"]}) == [
        "devices[0].server: give 'image' (a local Docker image) or 'command' (a program of this "
        "host, e.g. [coap-server-notls, -A, '{address}'])"]
    assert "devices[0].paths: required with server" in problems({"group": "a", "server": SERVER})[0]
    assert "unknown placeholder 'adress'" in problems(
        {"group": "a", "server": {"command": "srv -A {adress}"}, "paths": ["x"]})[0]
    assert problems({"group": "a", "external": ["10.1.2.3"], "paths": ["x"]}) == [
        "devices[0].external: expected HOST:PORT such as 127.0.0.1:5683, got '10.1.2.3'"]
    assert "one device per endpoint" in problems(
        {"group": "a", "count": 3, "external": ["127.0.0.1:5683"], "paths": ["x"]})[0]
    assert "only for a third-party server" in problems({"group": "a", "paths": ["x"]})[0]
    assert "'endpoint'" in problems({"group": "a"}, gateways={"proxy": {"mode": "proxy-uri"}})[0]


def test_addresses_paths_and_resource_files(tmp_path):
    c = cfg({"group": "w", "count": 1}, {"group": "s", "count": 2, "server": SERVER,
                                         "paths": ["time", ""]},
            {"group": "e", "external": "127.0.0.1:5699", "paths": ["/a/b?x=1"]})
    addrs = device_addresses(c)
    assert [(a.name, a.ip, a.port) for a in addrs][-1] == ("e-0", "127.0.0.1", 5699)
    write_trace(c, tmp_path)
    uris = {line.split(",")[3] for line in (tmp_path / "trace.csv").read_text().splitlines()[1:]}
    assert {u for u in uris if "172.28.0.11" in u or "172.28.0.12" in u} <= {
        "coap://172.28.0.11:5683/time", "coap://172.28.0.11:5683/",
        "coap://172.28.0.12:5683/time", "coap://172.28.0.12:5683/"}
    assert "coap://127.0.0.1:5699/a/b?x=1" in uris
    assert sorted(p.name for p in (tmp_path / "resources").iterdir()) == ["cd-node.csv", "w-0.csv"]


def test_cd_sized_on_emulated_devices_only():
    only_third = resolve_cd(cfg({"group": "s", "server": SERVER, "paths": ["time"]}))
    assert only_third.contention_detector.service_time_ms == 1.0
    mixed = resolve_cd(cfg({"group": "s", "server": SERVER, "paths": ["time"]},
                           {"group": "w", "service_time": {"dist": "deterministic", "mean": 3}}))
    assert mixed.contention_detector.service_time_ms == 3.0


def test_proxy_gets_its_own_core_or_shares_the_device_cores():
    c = cfg({"group": "w", "count": 2}, gateways={"proxy": {"command": ["p", "-A", "{address}"]}})
    assert make_plan(c, cores=range(5)).proxy_cpuset == "3"
    small = make_plan(c, cores=range(2))
    assert small.proxy_cpuset == "1" and any("proxy shares" in w for w in small.warnings)
    assert proxy_address(c).ip == "172.28.0.13"      # after the CD node
    ext = cfg({"group": "w"}, gateways={"proxy": {"endpoint": "127.0.0.1:5700"}})
    assert make_plan(ext, cores=range(2)).proxy_cpuset is None
    assert (proxy_address(ext).ip, proxy_address(ext).port) == ("127.0.0.1", 5700)


def test_proxy_options_encoding():
    assert coapprobe.options(coapprobe.proxy_options("coap://1.2.3.4:5683/t", "proxy-uri")) == \
        bytes([0xDD, 35 - 13, 21 - 13]) + b"coap://1.2.3.4:5683/t"
    enc = coapprobe.options(coapprobe.proxy_options("coap://h:5684/a/b?q=1", "proxy-scheme"))
    # Uri-Host (3) "h", Uri-Port (7) 5684, Uri-Path (11) a, b, Uri-Query (15), Proxy-Scheme (39)
    assert enc == (bytes([0x31]) + b"h" + bytes([0x42, 0x16, 0x34]) + bytes([0x41]) + b"a"
                   + bytes([0x01]) + b"b" + bytes([0x43]) + b"q=1" + bytes([0xD4, 24 - 13])
                   + b"coap")


def test_missing_command_and_app_only_impairments_stop_before_the_run():
    with pytest.raises(ConfigError) as e:
        thirdparty.find_command("devices[0].server",
                                cfg({"group": "s", "server": {"command": "no-such-coap-srv"},
                                     "paths": ["x"]}).devices[0].server)
    assert e.value.problems[0].startswith("devices[0].server.command: program 'no-such-coap-srv' "
                                          "not found on this host")
    c = cfg({"group": "s", "server": SERVER, "paths": ["x"], "network": {"delay": {"time_ms": 5}}})
    with pytest.raises(EnvironmentProblem, match=r"devices\[0\].network: .* only impairment "
                                                 r"backend is 'app'"):
        thirdparty.check_impairments(c, "app")
    thirdparty.check_impairments(c, "netem")   # a network-level backend is fine


@pytest.mark.skipif(not shutil.which("coap-server-notls"), reason="libcoap3-bin not installed")
def test_shared_files_of_a_host_program():
    files = hostimage.shared_files(Path(shutil.which("coap-server-notls")))
    assert any("libcoap" in f.name for f in files) and any("ld-linux" in f.name for f in files)
    assert all(f.is_absolute() and f.exists() for f in files)
