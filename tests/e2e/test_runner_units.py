"""Fast checks of runner pieces that need neither Docker nor the binaries."""
from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from pathlib import Path

import pytest

from wotbench.errors import ConfigError
from wotbench.runner import network, progress, readiness
from wotbench.runner.cleanup import _labelled
from wotbench.runner.process_backend import loopback_address


def _addrs(n, base="172.28.0.0/16"):
    return {f"d-{i}": network.bridge_address(base, i) for i in range(n)}


def test_networks_split_below_bridge_port_limit():
    plan = network.plan_networks("r", "172.28.0.0/16", _addrs(2500), ["ge-0", "cd-ge"])
    assert len(plan.blocks) == 3
    for b in plan.blocks:
        assert len(b.devices) + len(b.gateways) < network.MAX_BRIDGE_PORTS
        assert b.subnet.prefixlen == 22 and set(b.gateways) == {"ge-0", "cd-ge"}
        assert all(ipaddress.ip_address(ip) in b.subnet for ip in b.gateways.values())
    ips = [ip for b in plan.blocks for ip in list(b.devices.values()) + list(b.gateways.values())]
    assert len(ips) == len(set(ips))
    assert len(plan.endpoints("ge-0")) == 3 and len(plan.endpoints("d-5")) == 1


def test_networks_reject_reserved_and_foreign_addresses():
    with pytest.raises(ConfigError) as e:
        network.plan_networks("r", "172.28.0.0/16", {"a": "172.28.4.1", "b": "10.0.0.5"}, [])
    text = "\n".join(e.value.problems)
    assert "reserved" in text and "outside" in text


def test_bridge_address_layout():
    assert network.bridge_address("172.28.0.0/16", 0) == "172.28.0.10"
    assert network.bridge_address("172.28.0.0/16", 1003) == "172.28.3.245"
    assert network.bridge_address("172.28.0.0/16", 1004) == "172.28.4.10"
    consecutive = {f"d-{i}": str(ipaddress.ip_address("172.28.0.10") + i) for i in range(1100)}
    with pytest.raises(ConfigError, match="reserved"):
        network.plan_networks("r", "172.28.0.0/16", consecutive, ["ge-0"])


def test_small_subnet_is_one_bridge():
    plan = network.plan_networks("r", "172.28.5.0/24", _addrs(3, "172.28.5.0/24"), ["ge-0"])
    assert [str(b.subnet) for b in plan.blocks] == ["172.28.5.0/24"]


def test_loopback_mapping_keeps_host_part():
    assert loopback_address("172.28.3.241", "172.28.0.0/16") == "127.0.3.241"


def test_cleanup_never_matches_unlabelled():
    assert not _labelled({"wotbench.role": "device"}, None)
    assert not _labelled({"wotbench.run": "a"}, "b")
    assert _labelled({"wotbench.run": "a"}, None) and _labelled({"wotbench.run": "a"}, "a")


def test_readiness_names_the_silent_device():
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    stop = threading.Event()

    def answer():  # a device that answers pings with RST
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                data, src = srv.recvfrom(64)
            except socket.timeout:
                continue
            srv.sendto(bytes([0x70, 0]) + data[2:4], src)
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        assert readiness.wait_ready([("up", "127.0.0.1", port)], timeout_s=2) < 2
        with pytest.raises(readiness.NotReady) as e:
            readiness.wait_ready([("up", "127.0.0.1", port), ("down-7", "127.0.0.1", 9)],
                                 timeout_s=0.5)
        assert e.value.missing == ["down-7"] and "down-7" in str(e.value)
    finally:
        stop.set()
        t.join()
        srv.close()


def test_progress_reader(tmp_path):
    p = tmp_path / "progress.bin"
    assert progress.read_progress(p) is None
    p.write_bytes(struct.pack("<8Q", progress.MAGIC, 100, 50, 40, 5, 1, 2, 2))
    got = progress.read_progress(p)
    assert got == {"total": 100, "sent": 50, "ok": 40, "timeout": 5, "reset": 1, "error": 2,
                   "state": 2}
    c = progress.combine([got, None, got])
    assert c["sent"] == 100 and c["answered"] == 86 and c["lost"] == 10 and c["state"] == "sending"


def test_runner_restores_affinity_after_a_run(tmp_path, monkeypatch):
    """prepare() pins the harness to the OS cores; a sweep runs many tests in one process, so
    after each run the process must have its cores back (else the next run plans on 1 core)."""
    import os

    from wotbench.errors import EnvironmentProblem
    from wotbench.runner import main

    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs >= 2 cores to observe the pin")
    seen = {}

    def failing_deploy(self):
        seen["during"] = os.sched_getaffinity(0)
        raise EnvironmentProblem("deploy stopped by the test")

    monkeypatch.setattr(main.Runner, "deploy", failing_deploy)
    monkeypatch.setattr(main.Runner, "conclude", lambda self: 1)
    cfg = Path(__file__).parent / "configs" / "small.yaml"
    main.Runner(cfg, out_root=tmp_path, backend="process").execute()
    assert seen["during"] != before          # the run did pin the harness ...
    assert os.sched_getaffinity(0) == before  # ... and gave the cores back
    assert os.getpriority(os.PRIO_PROCESS, 0) <= main.HARNESS_NICE


def test_hogs_stop_kills_a_process_hog_that_ignores_sigterm(tmp_path, monkeypatch):
    """A hog that does not exit on SIGTERM (hung) must not outlive the run: it runs in its own
    session, so no other cleanup path would reach it."""
    import subprocess
    import sys

    from wotbench.runner.hogs import Hogs

    hogs = Hogs.__new__(Hogs)           # only stop()'s state is needed
    hogs.dir, hogs.log = tmp_path, lambda msg: None
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                               "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, start_new_session=True)
    assert stubborn.stdout.readline() == b"ready\n"   # SIGTERM is ignored from here on
    hogs.running = {"h0": stubborn}
    communicate = subprocess.Popen.communicate   # stop() waits 10 s; 0.5 s is enough here
    monkeypatch.setattr(subprocess.Popen, "communicate", lambda self, timeout=None: communicate(self, timeout=0.5))
    hogs.stop()
    assert stubborn.poll() is not None and hogs.running == {}


def test_stop_components_stops_devices_when_gateways_were_never_created(tmp_path):
    """deploy() can fail (a device not ready) before any GE container exists; cleanup's
    stop_components must still SIGTERM the devices (their logs are written on SIGTERM) instead
    of failing on the missing GEs. A device whose creation never happened is skipped."""
    import signal

    from wotbench.runner import containers, main
    from wotbench.runner.components import DeviceRun, GeRun
    from wotbench.runner.docker_backend import DockerBackend

    class Container:   # the docker SDK calls DockerBackend makes, for a running device
        def __init__(self, name, log_dir):
            self.name, self.log_dir, self.signals = name, log_dir, []
            self.labels = {containers.COMPONENT_LABEL: name}
            self.attrs = {"State": {"Status": "running", "Pid": 4242, "ExitCode": 0}}

        def reload(self):
            pass

        def kill(self, signal):
            self.signals.append(signal)
            (self.log_dir / "device-log.csv").write_text("t,event\n")   # written on SIGTERM
            self.attrs["State"] = {"Status": "exited", "Pid": 0, "ExitCode": 0}

        def wait(self, timeout):
            return {"StatusCode": self.attrs["State"]["ExitCode"]}

        def logs(self, **kw):
            return b""

    class Client:
        def __init__(self):
            self.containers = self

        def list(self, all, filters):
            return [c for c in backend.ctr.values() if c.attrs["State"]["Status"] == "exited"]

    r = main.Runner(tmp_path / "unused.yaml", out_root=tmp_path)
    r.run_dir = tmp_path
    backend = r.backend = DockerBackend(Client(), "run", log=lambda msg: None)

    def device(name):
        d = tmp_path / name
        d.mkdir()
        return DeviceRun(name=name, id=0, group="g", role="device", address="172.28.0.10",
                         cpuset="1", resources=tmp_path / "r.csv", log_dir=d)
    r.devices = [device("d-0"), device("d-1"), device("d-never")]
    for d in r.devices[:2]:
        backend.ctr[d.name] = Container(d.name, d.log_dir)
    r.ges = [GeRun(name="ge-0", role="ge", cpu=2, trace=tmp_path / "t.csv",
                   out_dir=tmp_path / "ge-0", wait="hybrid", msg_type="con", timeout_ms=100)]
    r.cd_ge = GeRun(name="cd-ge", role="cd-ge", cpu=3, trace=tmp_path / "c.csv",
                    out_dir=tmp_path / "cd-ge", wait="hybrid", msg_type="con", timeout_ms=100)

    r.stop_components()

    assert [backend.ctr[n].signals for n in ("d-0", "d-1")] == [["SIGTERM"], ["SIGTERM"]]
    assert all((d.log_dir / "device-log.csv").exists() for d in r.devices[:2])
    assert r.failures == [] and r.ge_exit == {}
