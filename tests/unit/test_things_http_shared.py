"""HTTP Things at scale (issue 34): one process serves many instances of a group, each on its
own address and port with its own TD, service times and values -- the same bytes a process per
instance served -- and the runner starts one process per group and cores (process backend)."""
from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.runner.deployment.build import _share_thing_processes
from wotbench.runner.deployment.components import DeviceRun
from wotbench.things import http_thing

REPO = Path(__file__).resolve().parents[2]
PLUG_FILE = REPO / "configs" / "things" / "plug.td.json"
LOAD = [{"affordance": "properties/power", "op": "readproperty", "rate_per_s": 5},
        {"affordance": "actions/reset", "op": "invokeaction", "rate_per_s": 2,
         "service_time_ms": 10}]


def _cfg(tmp_path: Path, mode: str = "sleep"):
    return config_from_dict({"name": "t", "duration_s": 10, "backend": "process",
                             "things": [{"td": str(PLUG_FILE), "group": "plug", "count": 4,
                                         "mode": mode,
                                         "service_time_ms": {"dist": "exponential", "mean": 2},
                                         "load": LOAD}]}, tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> bytes:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        assert r.status == 200, (path, r.status)
        return r.read()
    finally:
        c.close()


def test_shared_computation_gives_each_instance_what_its_own_process_gave(tmp_path):
    cfg = _cfg(tmp_path)
    cmd = cfg.devices[0].server.argv(use_image=False, address="127.0.0.1", port=8080,
                                     name="plug-0")
    a = dict(zip(cmd[2::2], cmd[3::2]))
    named = [(f"plug-{i}", f"127.0.0.{10 + i}:8080") for i in range(4)]
    together = http_thing.instances(a["--spec"], 0, 0, 1, named)
    for (name, auth), t in zip(named, together):
        alone = http_thing.instance(a["--spec"], 0, 0, 1, name, auth)
        assert t == alone, name
    tds = [json.loads(t.resources[".well-known/wot"].body) for t in together]
    assert [td["base"] for td in tds] == [f"http://{auth}/" for _, auth in named]
    # the service times are the group's draw from the distribution: not all the same
    assert len({t.resources["api/power"].service_us for t in together}) > 1


def test_one_process_serves_several_instances_on_their_own_ports(tmp_path):
    cfg = _cfg(tmp_path)
    ports = [_free_port() for _ in range(3)]
    names = ["plug-0", "plug-2", "plug-3"]
    argv = cfg.devices[0].server.argv(use_image=False, address="127.0.0.1", port=ports[0],
                                      name=names[0])
    argv += [x for n, p in zip(names[1:], ports[1:]) for x in ("--instance", f"{n}=127.0.0.1:{p}")]
    spec = dict(zip(argv[2::2], argv[3::2]))["--spec"]
    proc = subprocess.Popen([sys.executable] + argv[1:], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        line = b""
        deadline = time.monotonic() + 30
        while b"listening" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "the server exited"
        assert line.strip() == b"http_thing: 3 instance(s) listening", line
        for name, port in zip(names, ports):
            want = http_thing.instance(spec, 0, 0, 1, name, f"127.0.0.1:{port}")
            assert _get(port, "/.well-known/wot") == want.resources[".well-known/wot"].body
            assert _get(port, "/api/power") == want.resources["api/power"].body
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _devices(cfg, cpusets: list[str]) -> list[DeviceRun]:
    g = cfg.devices[0]
    return [DeviceRun(name=f"plug-{i}", id=i, group="plug", role="device",
                      address=f"127.0.0.{10 + i}", port=8080, cpuset=c, resources=None,
                      log_dir=Path("/nonexistent"), stdout=Path("/nonexistent"),
                      program=g.server, program_key="devices[0].server", protocol="http")
            for i, c in enumerate(cpusets)]


def test_the_runner_starts_one_process_per_group_and_cores(tmp_path):
    cfg = _cfg(tmp_path)
    devs = _devices(cfg, ["1", "1", "0", "1"])
    _share_thing_processes(devs, cfg)
    assert [d.hosted_by for d in devs] == ["", "plug-0", "", "plug-0"]
    assert devs[0].hosts == [("plug-1", "127.0.0.11:8080"), ("plug-3", "127.0.0.13:8080")]
    argv = devs[0].program_args(False, "127.0.0.10")
    assert argv[-4:] == ["--instance", "plug-1=127.0.0.11:8080",
                         "--instance", "plug-3=127.0.0.13:8080"]
    assert "--instance" not in devs[2].program_args(False, "127.0.0.12")


def test_busy_http_things_keep_a_process_each(tmp_path):
    """mode: busy spins the event loop for the service time: instances sharing a loop would
    wait for one another."""
    cfg = _cfg(tmp_path, mode="busy")
    devs = _devices(cfg, ["1", "1"])
    _share_thing_processes(devs, cfg)
    assert [(d.hosted_by, d.hosts) for d in devs] == [("", []), ("", [])]


def test_the_process_backend_runs_one_process_for_the_hosted_devices(tmp_path):
    from wotbench.config.byo import Program
    from wotbench.runner.backends.process.backend import ProcessBackend
    prog = Program(command=[sys.executable, "-c",
                            "import sys, time; print(sys.argv[1:], flush=True); time.sleep(60)",
                            "{name}"])
    devs = [DeviceRun(name=f"plug-{i}", id=i, group="plug", role="device",
                      address=f"127.0.0.{10 + i}", port=8080, cpuset="0", resources=None,
                      log_dir=tmp_path, stdout=tmp_path / f"plug-{i}.out", program=prog,
                      program_key="devices[0].server", protocol="http") for i in range(3)]
    devs[0].hosts = [(d.name, d.endpoint) for d in devs[1:]]
    for d in devs[1:]:
        d.hosted_by = "plug-0"
    b = ProcessBackend("r", tmp_path, log=lambda msg: None)
    b.prepare_programs({"devices[0].server": prog})
    try:
        b.start_devices(devs)
        assert len({id(p) for p in b.procs.values()}) == 1
        assert b.pid("plug-0") is not None and b.pid("plug-1") is None   # accounted once
        end = time.monotonic() + 10
        while time.monotonic() < end and not devs[0].stdout.read_text().strip():
            time.sleep(0.05)
        assert devs[0].stdout.read_text().strip() == str(
            ["plug-0", "--instance", "plug-1=127.0.0.11:8080", "--instance", "plug-2=127.0.0.12:8080"])
        assert not devs[1].stdout.exists()
        codes = b.stop([d.name for d in devs], grace_s=5)
        assert codes == {d.name: 128 + 15 for d in devs}, codes   # one SIGTERM ended all three
        with pytest.raises(ProcessLookupError, match="shares its process"):
            b.restart(devs[1], grace_s=1)
    finally:
        b.cleanup()
