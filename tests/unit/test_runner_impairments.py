"""Runner side of network impairments without Docker or binaries: backend choice, exit codes
(1 environment, 2 config), the CD node never impaired, the run.json record."""
from __future__ import annotations

import json

import pytest

from analysis_fixtures import device_summary
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.runner.deployment.components import DeviceRun
from wotbench.rundir import RunDir
from wotbench.rundir.device_files import DeviceImpair
from wotbench.runner.backends.docker.backend import DockerKind
from wotbench.runner.deployment.impair import Impairments
from wotbench.runner.backends.process.backend import ProcessKind

DOCKER, PROCESS = DockerKind(), ProcessKind()


def _cfg(network: dict | None, backend: str = "auto") -> object:
    return config_from_dict({"name": "t", "devices": [
        {"group": "near", "count": 1},
        {"group": "far", "count": 2, "network": network}], "network": {"backend": backend}})


DELAY_LOSS = {"delay": {"time_ms": 20}, "loss": {"percent": 2}}
NO_NETEM = {"probe": lambda: (False, "this kernel has no sch_netem (tc: qdisc kind is unknown)")}


def _fake_pumba(ok=True):
    return {"which": lambda _: "/usr/bin/pumba", "probe": lambda: (ok, "netem works" if ok else "no netem")}


def test_nothing_impaired_records_no_backend():
    imp = Impairments.select(_cfg(None), DOCKER, True)
    assert imp.backend is None and imp.device_args("far-0", "device") == []
    rec = imp.record().model_dump(mode="json")
    assert rec["backend"] is None and rec["devices"] == {} and rec["requested"] == "auto"


def test_auto_chooses_app_without_netem_and_never_impairs_the_cd_node():
    imp = Impairments.select(_cfg(DELAY_LOSS), DOCKER, True,
                             options={"pumba": {"which": lambda _: None, "probe": NO_NETEM["probe"]},
                                      "netem": NO_NETEM})
    assert imp.name == "app" and len(imp.reasons) == 3 and "app backend chosen" in imp.reasons[-1]
    args = imp.device_args("far-1", "device")
    assert args[0] == "--impair" and args[1] == "dir=egress,delay=20ms,loss=2%" and "--impair-seed" in args
    assert imp.device_args("near-0", "device") == []
    assert imp.device_args("far-1", "cd-node") == []          # role decides: never the CD node
    d = DeviceRun(name="far-1", id=2, group="far", role="device", address="1.2.3.4", cpuset="1",
                  resources="r", log_dir="l", stdout="l/stdout.log", impair=args)
    assert d.args("/r", "/l", None)[-len(args):] == args
    imp.apply([], 30)
    imp.remove()
    imp.remove()                                              # idempotent
    rec = imp.record().model_dump(mode="json")
    assert rec["backend"] == "app" and rec["requested"] == "auto" and rec["removed"] is True
    assert rec["devices"]["far-0"]["applied"][:2] == ["--impair", "dir=egress,delay=20ms,loss=2%"]
    assert rec["devices"]["far-0"]["describe"] and "near-0" not in rec["devices"]


def test_explicit_netem_without_kernel_support_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem) as e:
        Impairments.select(_cfg(DELAY_LOSS, "netem"), DOCKER, True, options={"netem": NO_NETEM})
    assert e.value.exit_code == 1 and "sch_netem" in str(e.value) and "network.backend: app" in str(e.value)


def test_pumba_that_cannot_do_the_plan_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        Impairments.select(_cfg(DELAY_LOSS, "pumba"), DOCKER, True, options={"pumba": _fake_pumba()})
    assert e.value.exit_code == 2 and "cannot be combined" in str(e.value)


def test_process_backend_takes_app_only():
    with pytest.raises(ConfigError, match="network.backend: netem works on device containers"):
        Impairments.select(_cfg(DELAY_LOSS, "netem"), PROCESS, True)
    with pytest.raises(EnvironmentProblem, match="Docker is not reachable"):
        Impairments.select(_cfg(DELAY_LOSS, "pumba"), PROCESS, False)
    imp = Impairments.select(_cfg(DELAY_LOSS, "auto"), PROCESS, True)
    assert imp.name == "app" and "need device containers" in imp.reasons[0]


def test_bad_override_is_a_config_error():
    net = {**DELAY_LOSS, "overrides": {"far-9": {"loss": None}}}
    with pytest.raises(ConfigError, match=r"devices\[1\]\.network\.overrides\.far-9: no device named far-9"):
        Impairments.select(_cfg(net), DOCKER, True)


def test_record_carries_device_counters(tmp_path):
    imp = Impairments.select(_cfg(DELAY_LOSS, "app"), DOCKER, True)
    (tmp_path / "devices" / "far-0").mkdir(parents=True)
    impair = {k: 0 for k in DeviceImpair.model_fields if k not in ("dir", "seed")}
    (tmp_path / "devices" / "far-0" / "device-summary.json").write_text(json.dumps(
        device_summary("far-0", 10, impair={**impair, "dir": "egress", "seed": 1,
                                            "dropped_out": 3})))
    rec = imp.record(RunDir(tmp_path)).model_dump(mode="json", exclude_none=True)
    assert rec["devices"]["far-0"]["counters"]["dropped_out"] == 3
    assert "counters" not in rec["devices"]["far-1"] and rec["in_effect"] is False


def test_wot_device_without_impair_is_named(tmp_path):
    fake = tmp_path / "wot-device"
    fake.write_text("#!/bin/sh\necho 'usage: wot-device --resources FILE --log-dir DIR'\n")
    fake.chmod(0o755)
    imp = Impairments.select(_cfg(DELAY_LOSS, "app"), DOCKER, True)
    with pytest.raises(EnvironmentProblem, match="does not support --impair"):
        imp.check_device_binary(fake)
    fake.write_text("#!/bin/sh\necho 'usage: wot-device ... [--impair SPEC]'\n")
    imp.check_device_binary(fake)
