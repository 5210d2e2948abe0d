"""The runner's declared backend: every backend implements every method of the protocol with
the same parameters and compatible types (checked from the annotations, the way a type checker
reads them), and the pure timeline arithmetic."""
from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest

from wotbench.config.byo import Program
from wotbench.config.schema import Config
from wotbench.netimpair import DeviceTarget
from wotbench.rundir import BridgeRecord, HostRecord
from wotbench.runner.backends import interface as b
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.backends.docker.backend import DockerBackend, DockerKind
from wotbench.runner.during.hogspec import HogSpec
from wotbench.runner.backends.process.backend import ProcessBackend, ProcessKind
from wotbench.runner.during.timeline import END_MARGIN_S, NS, Timeline, lead_s
from wotbench.runner.backends.process import loopslot

PARTS = (b.Networks, b.Lifecycle, b.Inspector, b.Restarter, b.CpuLimiter, b.Stressor,
         b.ImpairTargets, b.Describer)
# the names backend.py imports only for type checking
TYPE_NAMES = {"Config": Config, "DeviceTarget": DeviceTarget, "BridgeRecord": BridgeRecord,
              "DeviceRun": DeviceRun, "GeRun": GeRun, "FleetRun": FleetRun, "HogSpec": HogSpec, "Program": Program}


def _methods(proto) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(proto).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


def _hints(obj) -> dict:
    return typing.get_type_hints(obj, localns=TYPE_NAMES)


def _is_protocol(t) -> bool:
    return isinstance(t, type) and getattr(t, "_is_protocol", False)


def _returns_ok(got, want) -> bool:
    """``got`` (the implementation's return type) is usable where ``want`` is promised."""
    if got == want:
        return True
    if _is_protocol(want) and isinstance(got, type):
        return not conformance_problems(got, want)
    return isinstance(got, type) and isinstance(want, type) and issubclass(got, want)


def conformance_problems(impl: type, proto: type) -> list[str]:
    """What a type checker would reject when ``impl`` is used as ``proto``: missing members,
    other parameters, parameter types that differ, return types that are not subtypes, data
    members of another type."""
    problems = []
    for base in reversed(proto.__mro__):
        if not _is_protocol(base) or base is typing.Protocol:
            continue
        for name, want in vars(base).get("__annotations__", {}).items():
            t = _hints(base)[name]
            if not hasattr(impl, name):
                problems.append(f"{impl.__name__} lacks {base.__name__}.{name}")
            elif not isinstance(getattr(impl, name), t):
                problems.append(f"{impl.__name__}.{name} is not a {t}")
        for name, sig in _methods(base).items():
            fn = getattr(impl, name, None)
            if fn is None:
                problems.append(f"{impl.__name__} lacks {base.__name__}.{name}")
                continue
            got_sig = inspect.signature(fn)
            if list(got_sig.parameters) != list(sig.parameters):
                problems.append(f"{impl.__name__}.{name}{list(got_sig.parameters)} != "
                                f"{list(sig.parameters)}")
                continue
            want_t, got_t = _hints(getattr(base, name)), _hints(fn)
            for p in list(sig.parameters)[1:]:
                if got_t.get(p) != want_t.get(p):
                    problems.append(f"{impl.__name__}.{name}({p}: {got_t.get(p)}) != "
                                    f"{want_t.get(p)}")
            if not _returns_ok(got_t.get("return"), want_t.get("return")):
                problems.append(f"{impl.__name__}.{name} returns {got_t.get('return')}, not "
                                f"{want_t.get('return')}")
    return problems


@pytest.mark.parametrize("impl", [DockerBackend, ProcessBackend])
def test_backend_implements_every_method_with_the_same_parameters(impl):
    assert issubclass(b.RunBackend, PARTS)
    for proto in PARTS:
        for name, sig in _methods(proto).items():
            assert hasattr(impl, name), f"{impl.__name__} lacks {proto.__name__}.{name}"
            got = list(inspect.signature(getattr(impl, name)).parameters)
            assert got == list(sig.parameters), f"{impl.__name__}.{name}{got} != {list(sig.parameters)}"
    assert isinstance(impl.name, str)


@pytest.mark.parametrize("impl", [DockerBackend, ProcessBackend])
def test_backend_is_a_run_backend_for_a_type_checker(impl):
    assert conformance_problems(impl, b.RunBackend) == []


@pytest.mark.parametrize("kind", [DockerKind, ProcessKind])
def test_kind_is_a_backend_kind_for_a_type_checker(kind):
    assert conformance_problems(kind, b.BackendKind) == []


def test_the_conformance_check_names_what_is_wrong():
    class Partial:      # a backend under construction: wrong types, a method missing
        name = 3

        def pid(self, name: int) -> str: ...

        def signal(self, name: str) -> None: ...

    problems = "\n".join(conformance_problems(Partial, b.RunBackend))
    assert "Partial.name is not a <class 'str'>" in problems
    assert "Partial.pid(name: <class 'int'>)" in problems and "Partial.pid returns" in problems
    assert "Partial.signal['self', 'name'] != ['self', 'name', 'sig']" in problems
    assert "Partial lacks Lifecycle.stop" in problems and "Partial lacks Stressor.launch_hog" in problems


def test_backend_descriptions_are_host_record_fields():
    class Client:
        def version(self):
            return {"Version": "20.10.24"}

    facts = DockerBackend(Client(), "r", log=lambda m: None).describe()
    assert facts == {"docker": "20.10.24"}
    assert HostRecord(**facts).docker == "20.10.24"
    assert ProcessBackend("r", Path("/tmp"), log=lambda m: None).describe() == {}


@pytest.mark.parametrize("kind", [DockerKind(), ProcessKind()])
def test_kinds_declare_what_the_runner_asks(kind):
    for attr in ("name", "ge_start_lead_s", "needs_docker", "container_namespaces"):
        assert hasattr(kind, attr)
    for name, sig in _methods(b.BackendKind).items():
        assert list(inspect.signature(getattr(kind, name)).parameters) == list(sig.parameters)[1:]


def test_only_the_docker_kind_hands_pumba_the_run_client():
    client = object()
    opts = DockerKind().impairment_options(client)
    assert opts["pumba"]["image_builder"].args == (client,)
    assert DockerKind().impairment_options(None) == {} and ProcessKind().impairment_options(None) == {}
    assert ProcessKind().connect() is None


class _Networks:
    """A Docker client whose daemon has these networks: {name: subnet}."""

    def __init__(self, nets: dict[str, str]):
        self.networks = self
        self.nets = nets

    def list(self):
        class N:
            def __init__(self, name, subnet):
                self.name, self.attrs = name, {"IPAM": {"Config": [{"Subnet": subnet}]}}
        return [N(n, s) for n, s in self.nets.items()]



def test_process_kind_moves_devices_to_loopback():
    from wotbench.configfile.yaml_loader import config_from_dict
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a"}]})
    adapted, notes = ProcessKind().adapt(cfg, None)
    try:
        block = loopslot.held()
        assert adapted.network.subnet == f"127.{block}.0.0/16"
        assert cfg.network.subnet == "172.28.0.0/16"
    finally:
        loopslot.release()
    assert notes and DockerKind().adapt(cfg, _Networks({"bridge": "172.17.0.0/16"})) == (cfg, [])


def test_concurrent_process_runs_get_loopback_blocks_of_their_own(tmp_path):
    """Another run's claim (an flock held by another open file: as another harness holds it)
    moves this run to the next block; a block is free again once its holder lets go."""
    import fcntl
    import os
    other = os.open(tmp_path / "block-0", os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        assert loopslot.claim(tmp_path) == 1 and loopslot.subnet(1) == "127.1.0.0/16"
        assert loopslot.claim(tmp_path) == 1     # this process's previous block given back first
    finally:
        loopslot.release()
        os.close(other)
    assert loopslot.claim(tmp_path) == 0 and loopslot.held() == 0
    loopslot.release()
    assert loopslot.held() is None


def test_docker_kind_moves_a_default_subnet_that_is_taken_and_stops_on_a_chosen_one():
    """A network left behind (or anyone's) never blocks the next run: the default subnet moves
    to a free one; a subnet the user chose stops the run before anything exists, naming it."""
    from wotbench.configfile.yaml_loader import config_from_dict
    from wotbench.errors import ConfigError
    taken = _Networks({"bridge": "172.17.0.0/16", "wb-old-run-net0": "172.28.0.0/22",
                       "other": "172.16.0.0/16"})
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a"}]})
    adapted, notes = DockerKind().adapt(cfg, taken)
    assert adapted.network.subnet == "172.18.0.0/16"
    assert "overlaps Docker network wb-old-run-net0" in notes[0]
    chosen = config_from_dict({"name": "t", "devices": [{"group": "a"}],
                               "network": {"subnet": "172.28.0.0/16"}})
    with pytest.raises(ConfigError) as e:
        DockerKind().adapt(chosen, taken)
    assert "wb-old-run-net0 (172.28.0.0/22)" in str(e.value) and "wotbench clean" in str(e.value)


def test_timeline_phases_and_deadline():
    t = Timeline.plan(now_ns=1_000 * NS, lead=2.5, calibration_s=20, duration_s=40, timeout_ms=10000)
    assert t.t0_ns == 1_002_500_000_000
    assert t.test_start_ns == t.t0_ns + 20 * NS and t.test_end_ns == t.test_start_ns + 40 * NS
    assert t.deadline_ns == t.test_end_ns + int((10 + END_MARGIN_S) * NS)
    assert t.phase(t.t0_ns - 1) == ("starting", 0.0)
    assert t.phase(t.t0_ns + 10 * NS) == ("calibration", 0.5)
    assert t.phase(t.test_start_ns + 10 * NS) == ("test", 0.25)
    assert t.phase(t.test_end_ns + NS) == ("test", 1.0)
    assert t.impairment_s() == 20 + 40 + 10 + END_MARGIN_S + 10


def test_timeline_without_calibration_starts_the_test_at_t0():
    t = Timeline.plan(now_ns=0, lead=1.0, calibration_s=0, duration_s=5, timeout_ms=500)
    assert t.test_start_ns == t.t0_ns == NS and t.phase(NS)[0] == "test"


def test_lead_grows_with_gateways_and_trace_size():
    assert lead_s(2, 0.4, 0) == pytest.approx(1.8)
    assert lead_s(2, 0.05, 4_000_000) == pytest.approx(1.0 + 0.1 + 2.0)
