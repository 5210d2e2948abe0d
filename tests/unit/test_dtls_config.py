"""The dtls: block (wotbench.config.dtls) and its plumbing: device addresses and coaps:// trace URIs,
the key file of a run (wotbench.runner.prepare.dtlskey) and the flags both programs get. No network."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from wotbench.config import dtls as dtls_spec
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.deploy.resolve import cd_node_address, device_addresses, dump_resolved
from wotbench.rundir import RunDir
from wotbench.runner.prepare import dtlskey
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.backends.docker.backend import DockerBackend
from wotbench.labels import NOBODY
from wotbench.workload.trace_io import read_trace
from wotbench.workload.generate import write_trace

KEY = "s3cret-psk-value"


def cfg(dtls: dict | None = None, **extra):
    raw = {"name": "t", "duration_s": 2, "devices": [{"group": "g", "count": 3, "rit": {
        "dist": "deterministic", "mean": 200}}], **extra}
    if dtls is not None:
        raw["dtls"] = dtls
    return config_from_dict(raw)


def problems(dtls: dict, **extra) -> list[str]:
    with pytest.raises(ConfigError) as e:
        cfg(dtls, **extra)
    assert KEY not in str(e.value)          # an error message never shows the key
    return e.value.problems


@pytest.mark.parametrize("dtls, expected", [
    ({"enabled": True}, "dtls.psk_key: with dtls.enabled, give either psk_key"),
    ({"enabled": True, "psk_key": KEY, "psk_key_file": "/etc/hostname"}, "not both"),
    ({"enabled": True, "psk_key": KEY * 5}, "dtls.psk_key: expected 1..64 bytes, got 80"),
    ({"enabled": True, "psk_key": KEY + "\n"}, "dtls.psk_key: ends with a newline"),
    ({"enabled": True, "psk_key": ""}, "dtls.psk_key: expected 1..64 bytes, got 0"),
    ({"enabled": True, "psk_key": KEY, "psk_identity": ""}, "dtls.psk_identity: expected 1..128"),
    ({"enabled": True, "psk_key": KEY, "psk_identity": "a\tb"}, "without control characters"),
    ({"enabled": True, "psk_key": KEY, "sessions": "always"}, "dtls.sessions: must be"),
    ({"enabled": True, "psk_key_file": "/nonexistent/psk"},
     "dtls.psk_key_file: cannot read /nonexistent/psk"),
    ({"enable": True}, "dtls.enable: unknown key, did you mean 'enabled'?"),
])
def test_bad_dtls_block_names_the_key(dtls, expected):
    assert any(expected in p for p in problems(dtls)), problems(dtls)


def test_key_file_rule_and_relative_path(tmp_path):
    (tmp_path / "k").write_bytes(KEY.encode() + b"\n")
    (tmp_path / "empty").write_bytes(b"\n")
    c = config_from_dict({"name": "t", "devices": [{"group": "g"}],
                          "dtls": {"enabled": True, "psk_key_file": "k"}}, base_dir=tmp_path)
    assert c.dtls.psk_key_file == str(tmp_path / "k")
    assert dtls_spec.key_bytes(c.dtls) == KEY.encode()    # one trailing newline stripped
    with pytest.raises(ConfigError, match=r"dtls.psk_key_file: .*empty holds no key"):
        config_from_dict({"name": "t", "devices": [{"group": "g"}],
                          "dtls": {"enabled": True, "psk_key_file": "empty"}}, base_dir=tmp_path)


@pytest.mark.parametrize("group, key", [
    ({"server": {"command": ["coap-server-notls"]}, "paths": ["time"]}, "devices[1].server"),
    ({"external": ["127.0.0.1:5684"], "paths": ["time"]}, "devices[1].external"),
])
def test_third_party_servers_are_refused_with_dtls(group, key):
    p = problems({"enabled": True, "psk_key": KEY},
                 devices=[{"group": "g"}, {"group": "byo", **group}])
    assert any(x.startswith(f"{key}: with dtls.enabled, expected wot-devices only") for x in p)


def test_proxy_is_refused_with_dtls():
    p = problems({"enabled": True, "psk_key": KEY},
                 gateways={"proxy": {"endpoint": "127.0.0.1:5683"}})
    assert any(x.startswith("gateways.proxy: with dtls.enabled") for x in p)


def test_disabled_block_changes_nothing(tmp_path):
    c = cfg({"enabled": False})
    assert {a.port for a in device_addresses(c)} == {5683}
    write_trace(c, tmp_path)
    assert all(u.startswith("coap://") for u in read_trace(tmp_path / "trace.csv").uri)


def test_devices_on_5684_with_coaps_uris_and_the_cd_node_stays_plain(tmp_path):
    c = cfg({"enabled": True, "psk_key": KEY}, gateways={"count": 2})
    assert {a.port for a in device_addresses(c)} == {5684}
    assert cd_node_address(c).port == 5683
    s = write_trace(c, tmp_path)
    for f in s.ge_files + ["trace.csv"]:
        uris = read_trace(tmp_path / f).uri
        assert len(uris) and all(u.startswith("coaps://") and ":5684/" in u for u in uris)
    cd = read_trace(tmp_path / "cd-trace.csv").uri
    assert len(cd) and all(u.startswith("coap://") and ":5683/" in u for u in cd)


def test_a_trace_may_not_mix_schemes(tmp_path):
    t = tmp_path / "trace.csv"
    t.write_text("device_id,send_time_us,method,uri\n0,0,GET,coaps://127.0.0.1/r0\n"
                 "0,5,GET,coap://127.0.0.1/r0\n")
    with pytest.raises(ConfigError, match=r"trace.csv:3: uri 'coap://127.0.0.1/r0', expected "
                                          r"coaps:// like the trace's first request"):
        read_trace(t)


def test_resolved_config_does_not_hold_the_key(tmp_path):
    dump_resolved(cfg({"enabled": True, "psk_key": KEY}), tmp_path / "c.yaml")
    text = (tmp_path / "c.yaml").read_text()
    assert KEY not in text and "psk_key: REDACTED" in text


@pytest.mark.parametrize("for_containers", [False, True])
def test_key_file_mode_owner_and_removal(tmp_path, for_containers):
    rd = RunDir(tmp_path)
    creds = dtlskey.write(rd, cfg({"enabled": True, "psk_key": KEY}).dtls, for_containers)
    st = os.stat(creds.key_file)
    assert creds.key_file.read_bytes() == KEY.encode()
    assert stat.S_IMODE(os.stat(rd.secrets_dir).st_mode) == 0o700
    if os.geteuid() == 0:       # given to the programs' uid, readable by it only
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (NOBODY, 0o400)
    else:
        assert stat.S_IMODE(st.st_mode) == (0o444 if for_containers else 0o400)
    dtlskey.remove(rd)
    assert not rd.secrets_dir.exists()
    assert dtlskey.write(rd, cfg().dtls, for_containers) is None


def _runs(tmp_path: Path, creds):
    dev = DeviceRun(name="g-0", id=0, group="g", role="device", address="10.0.0.10",
                    cpuset="1", resources=tmp_path / "r.csv", log_dir=tmp_path, stdout=tmp_path / "o",
                    port=5684, dtls=creds)
    ge = GeRun(name="ge-0", role="ge", cpu=1, trace=tmp_path / "t.csv", out_dir=tmp_path,
               stdout=tmp_path / "o", dtls=creds)
    return dev, ge


def test_flags_for_both_programs_and_never_the_key(tmp_path):
    creds = dtlskey.write(RunDir(tmp_path), cfg({"enabled": True, "psk_key": KEY,
                                                 "sessions": "per-request"}).dtls, False)
    dev, ge = _runs(tmp_path, creds)
    a = dev.args("/r.csv", "/logs", None, "/k")
    assert a[-4:] == ["--dtls-psk-identity", "wotbench", "--dtls-psk-key-file", "/k"]
    g = ge.args("/t.csv", "/out", "/k")
    assert g[-6:] == ["--dtls-psk-identity", "wotbench", "--dtls-psk-key-file", "/k",
                      "--dtls-sessions", "per-request"]
    assert KEY not in " ".join(a + g)
    plain_dev, plain_ge = _runs(tmp_path, None)
    assert not any(x.startswith("--dtls") for x in plain_dev.args("/r", "/l", None, "/k")
                   + plain_ge.args("/t", "/o", "/k"))


def test_docker_mounts_the_key_file_read_only(tmp_path):
    """What `docker inspect` would show: a read-only bind mount and its path, not the key."""
    creds = dtlskey.write(RunDir(tmp_path), cfg({"enabled": True, "psk_key": KEY}).dtls, True)
    dev, ge = _runs(tmp_path, creds)
    b = DockerBackend(client=None, run_id="r")
    b.images = {"wot-device": "wd", "gateway-emulator": "ge"}
    b.net_plan = SimpleNamespace(endpoints=lambda name: [])
    specs = []
    b._create = lambda spec: specs.append(spec) or SimpleNamespace(start=lambda: None)
    b._start_device(dev)
    b.create_ge(ge)
    for spec in specs:
        assert spec.binds[creds.key_file] == (dtlskey.KEY_IN, "ro")
        assert dtlskey.KEY_IN in spec.command and KEY not in repr(spec)
