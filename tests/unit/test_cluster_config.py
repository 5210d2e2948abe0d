"""``backend: swarm`` and ``cluster.clock_bound_ms`` in the config, the command line over
them, and the refusals naming the key (wotbench.config.backend_choice)."""
from pathlib import Path

import pytest

from wotbench import cli
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.config import backend_choice as choose
from wotbench.distributed import coordinator
from wotbench.run_result import RunResult

BASE = {"name": "t", "devices": [{"group": "a", "count": 2}]}


def _cfg(**keys):
    return config_from_dict({**BASE, **keys})


def _write(tmp_path, text_keys: str):
    f = tmp_path / "c.yaml"
    f.write_text("name: t\ndevices:\n  - group: a\n    count: 2\n" + text_keys)
    return f


def test_swarm_is_a_backend_value_and_the_bound_defaults_to_1_ms():
    cfg = _cfg(backend="swarm")
    assert cfg.backend == "swarm"
    assert cfg.cluster.clock_bound_ms == 1.0
    assert _cfg(cluster={"clock_bound_ms": 0.25}).cluster.clock_bound_ms == 0.25


@pytest.mark.parametrize("bad", [0, -1, 1000.5, "fast"])
def test_a_bad_clock_bound_names_the_key(bad):
    with pytest.raises(ConfigError) as e:
        _cfg(cluster={"clock_bound_ms": bad})
    assert any(p.startswith("cluster.clock_bound_ms:") for p in e.value.problems), e.value.problems


def test_an_unknown_cluster_key_and_backend_are_named():
    with pytest.raises(ConfigError) as e:
        _cfg(cluster={"clock_bound": 1})
    assert any(p.startswith("cluster.clock_bound:") for p in e.value.problems)
    with pytest.raises(ConfigError) as e:
        _cfg(backend="swarn")
    assert any(p.startswith("backend:") and "'swarm'" in p for p in e.value.problems)


def test_the_command_line_overrides_the_config():
    cfg = _cfg(backend="docker", cluster={"clock_bound_ms": 5})
    assert choose.runs_on_swarm(cfg, "swarm") and not choose.runs_on_swarm(cfg, None)
    assert not choose.runs_on_swarm(_cfg(backend="swarm"), "docker")
    assert choose.clock_bound_ms(cfg, None) == 5
    assert choose.clock_bound_ms(cfg, 0.001) == 0.001
    with pytest.raises(ConfigError, match="--clock-bound-ms: must be 0.001..1000"):
        choose.clock_bound_ms(cfg, 0)


def test_run_dispatches_a_swarm_config_to_the_coordinator(tmp_path, monkeypatch):
    calls = []
    def run(c, o, b, source, on_run_dir=None):   # the dispatcher read the YAML once, hands it over
        calls.append((str(c), o, b, source.config.backend))
        return RunResult(0, None)
    monkeypatch.setattr(coordinator, "run", run)
    f = _write(tmp_path, "backend: swarm\ncluster: {clock_bound_ms: 2.5}\n")
    assert cli.main(["run", str(f), "--out-root", str(tmp_path)]) == 0
    assert cli.main(["run", str(f), "--out-root", str(tmp_path), "--clock-bound-ms", "0.5"]) == 0
    assert calls == [(str(f), str(tmp_path), 2.5, "swarm"), (str(f), str(tmp_path), 0.5, "swarm")]


def test_run_refuses_a_bad_option_before_any_docker(tmp_path, capsys):
    f = _write(tmp_path, "backend: swarm\n")
    assert cli.main(["run", str(f), "--clock-bound-ms", "-3"]) == 2
    assert "--clock-bound-ms: must be 0.001..1000 ms" in capsys.readouterr().err


@pytest.mark.parametrize("command,first", [(["sweep", "--vary", "devices[0].count=1,2"], "p00"),
                                           (["capacity", "--start", "1", "--max", "2"], "p000")])
def test_sweep_and_capacity_run_each_point_of_a_swarm_config_across_hosts(tmp_path, monkeypatch,
                                                                          command, first):
    calls = []   # the coordinator fails each run (exit 1, no summary): the point fails
    monkeypatch.setattr(coordinator, "run",
                        lambda c, o, b, source, on_run_dir=None:
                        calls.append((Path(c).stem, b)) or RunResult(1, None))
    f = _write(tmp_path, "backend: swarm\ncluster: {clock_bound_ms: 2.5}\n")
    assert cli.main([command[0], str(f), *command[1:], "--out-root", str(tmp_path),
                     *(["--no-progress"] if command[0] == "sweep" else [])]) == 1
    assert calls[0] == (first, 2.5)   # each point through the coordinator, with the bound
    assert len(calls) == (2 if command[0] == "sweep" else 1)   # a search stops at a failed run
