"""Fast checks of runner pieces that need neither Docker nor the binaries."""
from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

import pytest

from wotbench.errors import ConfigError
from wotbench.runner.during import progress
from wotbench.runner.deployment import readiness
from wotbench.runner.backends.docker import network
from wotbench.runner.teardown.cleanup import _labelled
from wotbench.runner.backends.process.backend import loopback_address


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


def test_readiness_waits_for_listening_devices_and_names_the_late_ones(tmp_path):
    up, down = tmp_path / "up-ready", tmp_path / "down-ready"
    up.touch()
    assert readiness.wait_listening([("up", up)], timeout_s=2) < 1
    with pytest.raises(readiness.NotReady) as e:
        readiness.wait_listening([("up", up), ("down-7", down)], timeout_s=0.3)
    assert e.value.missing == ["down-7"] and "did not start listening" in str(e.value)
    with pytest.raises(readiness.NotReady, match="exited with 139"):
        readiness.wait_listening([("down-7", down)], timeout_s=5,
                                 dead=lambda: {"down-7": "exited with 139"})


def test_readiness_names_devices_a_gateway_could_not_reach(tmp_path):
    import json
    import time
    names = {"172.28.0.10:5683": "cpu-0", "172.28.0.11:5683": "cpu-1"}
    w = tmp_path / "warmup.json"
    w.write_text(json.dumps({"endpoints": 2, "answered": 2, "took_ms": 3.0, "rounds": 1,
                             "unanswered": []}))
    soon = time.monotonic_ns() + 2 * 10**9
    assert readiness.wait_warm([("ge-0", w, soon)], names)["ge-0"].answered == 2
    w.write_text(json.dumps({"endpoints": 2, "answered": 1, "took_ms": 2000.0, "rounds": 20,
                             "unanswered": ["172.28.0.11:5683"]}))
    with pytest.raises(readiness.NotReady) as e:
        readiness.wait_warm([("ge-0", w, soon)], names)
    assert e.value.missing == ["cpu-1"] and "did not answer the gateway emulator's CoAP ping" in str(e.value)
    # a GE is waited for until its own start instant plus the margin, then named as a GE
    started = time.monotonic_ns() - int(readiness.WARM_RECORD_MARGIN_S * 1e9)
    t = time.monotonic()
    with pytest.raises(readiness.GeNotWarm, match="gateway emulator.s. ge-1 wrote no warm-up") as g:
        readiness.wait_warm([("ge-1", tmp_path / "none.json", started)], names)
    assert g.value.missing == ["ge-1"] and time.monotonic() - t < 1
    t = time.monotonic()
    with pytest.raises(readiness.GeNotWarm):
        readiness.wait_warm([("ge-1", tmp_path / "none.json", started + 5 * 10**8)], names)
    assert time.monotonic() - t >= 0.4   # not before its own deadline
    assert readiness.wait_warm([("ge-1", tmp_path / "none.json", soon)], names,
                               ge_gone=lambda g: True) == {}
    assert readiness.warmup_ms(1000) == (readiness.WARMUP_BASE_MS
                                         + 1000 * readiness.WARMUP_PER_ENDPOINT_MS
                                         + readiness.WARMUP_PER_ENDPOINT_SQ_US * 1000)
    assert readiness.warmup_ms(100) < 1500        # a small run does not wait for nothing


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
    from wotbench.runner.prepare.stage import HARNESS_NICE

    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs >= 2 cores to observe the pin")
    seen = {}

    def failing_deploy(inputs, st):
        seen["during"] = os.sched_getaffinity(0)
        raise EnvironmentProblem("deploy stopped by the test")

    monkeypatch.setattr(main, "deploy", failing_deploy)
    # the binaries as they are: a unit test builds no C (a fresh checkout's make check took 18 s
    # more here, compiling every program before the pin it looks at)
    from preflight_fakes import quick_preflight
    quick_preflight(monkeypatch)
    cfg = Path(__file__).parents[1] / "e2e" / "configs" / "small.yaml"
    outcome = main.Runner(cfg, out_root=tmp_path, backend="process").execute()
    assert isinstance(outcome.error, EnvironmentProblem)   # the run ends, analysis is not its job
    assert seen["during"] != before          # the run did pin the harness ...
    assert os.sched_getaffinity(0) == before  # ... and gave the cores back
    assert os.getpriority(os.PRIO_PROCESS, 0) <= HARNESS_NICE


def test_hogs_stop_kills_a_process_hog_that_ignores_sigterm(tmp_path, monkeypatch):
    """A hog that does not exit on SIGTERM (hung) must not outlive the run: it runs in its own
    session, so no other cleanup path would reach it."""
    import subprocess
    import sys

    from wotbench.runner.during.hogs import Hogs
    from wotbench.runner.backends.process.backend import ProcessHog

    from wotbench.rundir import RunDir

    hogs = Hogs(backend=None, run_id="r", rd=RunDir(tmp_path), log=lambda msg: None)  # stop() only
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                               "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, start_new_session=True)
    assert stubborn.stdout.readline() == b"ready\n"   # SIGTERM is ignored from here on
    hogs.running = {"h0": ProcessHog(stubborn)}
    communicate = subprocess.Popen.communicate   # stop() waits 10 s; 0.1 s is enough here
    monkeypatch.setattr(subprocess.Popen, "communicate", lambda self, timeout=None: communicate(self, timeout=0.1))
    hogs.stop()
    assert stubborn.poll() is not None and hogs.running == {}


def test_stop_components_stops_devices_when_gateways_were_never_created(tmp_path):
    """deploy() can fail (a device not ready) before any GE container exists; cleanup's
    stop_components must still SIGTERM the devices (their logs are written on SIGTERM) instead
    of failing on the missing GEs. A device whose creation never happened is skipped."""
    import signal

    from wotbench.runner.backends.docker import containers
    from wotbench.runner.prepare.hostlimits import HostTuning
    from wotbench.runner.run_state import Resources, RunState
    from wotbench.runner.teardown.stop import stop_components
    from types import SimpleNamespace

    from wotbench.runner.deployment.components import DeviceRun, GeRun
    from wotbench.runner.stages import Components
    from wotbench.rundir import RunDir
    from wotbench.runner.backends.docker.backend import DockerBackend

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

    rd = RunDir(tmp_path)
    inputs = SimpleNamespace(rd=rd, pushing=frozenset(), resolved=None)   # what stopping reads of stage 1
    backend = DockerBackend(Client(), "run", log=lambda msg: None)   # as deploy() holds it
    st = RunState(held=Resources(tuning=HostTuning(lambda msg: None), backend=backend))

    def device(name):
        d = rd.device_dir(name)
        d.mkdir(parents=True)
        return DeviceRun(name=name, id=0, group="g", role="device", address="172.28.0.10",
                         cpuset="1", resources=tmp_path / "r.csv", log_dir=d,
                         stdout=rd.device_stdout(name))
    devices = [device("d-0"), device("d-1"), device("d-never")]
    for d in devices[:2]:
        backend.ctr[d.name] = Container(d.name, d.log_dir)
    parts = Components(
        devices=devices, fleets=[],
        ges=[GeRun(name="ge-0", role="ge", cpu=2, trace=tmp_path / "t.csv",
                   out_dir=tmp_path / "ge-0", stdout=tmp_path / "ge-0.log", wait="hybrid", msg_type="con", timeout_ms=100)],
        cd_ge=GeRun(name="cd-ge", role="cd-ge", cpu=3, trace=tmp_path / "c.csv",
                    out_dir=tmp_path / "cd-ge", stdout=tmp_path / "cd-ge.log", wait="hybrid", msg_type="con", timeout_ms=100))

    stop_components(inputs, parts, st)

    assert [backend.ctr[n].signals for n in ("d-0", "d-1")] == [["SIGTERM"], ["SIGTERM"]]
    assert all((d.log_dir / "device-log.csv").exists() for d in devices[:2])
    assert st.happened.failures == [] and st.happened.ge_exit == {}


def test_process_backend_stop_reports_the_one_that_ignores_sigterm(tmp_path):
    """stop(): one SIGTERM each, one shared deadline; None for a process still running."""
    import subprocess
    import sys
    import time

    from wotbench.runner.backends.process.backend import ProcessBackend

    b = ProcessBackend("r", tmp_path, log=lambda msg: None)
    code = ("import signal, sys, time; {} print('ready', flush=True); time.sleep(30)")
    for name, ignore in (("polite", False), ("stubborn", True)):
        b.procs[name] = subprocess.Popen(
            [sys.executable, "-c", code.format(
                "signal.signal(signal.SIGTERM, signal.SIG_IGN);" if ignore else "")],
            stdout=subprocess.PIPE)
        assert b.procs[name].stdout.readline() == b"ready\n"
    t = time.monotonic()
    codes = b.stop(["polite", "stubborn", "never-created"], grace_s=0.5)
    took = time.monotonic() - t
    assert codes == {"polite": 128 + 15, "stubborn": None}
    assert 0.4 < took < 3.0
    assert b.cleanup() == {"processes": 1} and b.procs == {}


def test_cpu_model_is_the_first_model_name(tmp_path):
    from wotbench.runner.run_json import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\n"
                    "processor\t: 1\nmodel name\t: other\n")
    assert cpu_model(info) == "AMD EPYC 7B13"
    info.write_text("processor\t: 0\nFeatures\t: fp asimd\n")     # e.g. some ARM kernels
    assert cpu_model(info) is None and cpu_model(tmp_path / "missing") is None


def test_a_bridge_docker_refuses_is_an_environment_problem_naming_the_subnet():
    import docker.errors

    from wotbench.errors import EnvironmentProblem

    class Networks:
        def create(self, name, **kw):
            raise docker.errors.APIError("403 Client Error", explanation="Pool overlaps with "
                                         "other one on this address space")

    class Client:
        networks = Networks()

    plan = network.plan_networks("r", "172.28.0.0/16", _addrs(2), ["ge-0"])
    with pytest.raises(EnvironmentProblem) as e:
        network.create_networks(Client(), plan, {"wotbench.run": "r"})
    assert e.value.exit_code == 1
    assert str(e.value).startswith("network.subnet: Docker cannot create the bridge wb-r-net0 for "
                                   "172.28.0.0/22: Pool overlaps")
