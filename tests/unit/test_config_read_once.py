"""The YAML of a config is parsed once per run and once per sweep (issue 32): every kind of run
(one host, ``--set``, connected, across hosts, connected across hosts) and every series (sweep,
capacity search) is counted here by every ``yaml.safe_load`` of the file's text, with the run
stopped where it would start deploying. Each run gets the typed config the dispatcher read."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from preflight_fakes import quick_preflight

from wotbench import cli, dispatch
from wotbench.errors import EnvironmentProblem
from wotbench.run_result import RunResult
from wotbench.runner.backends.process import loopslot

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "e2e" / "configs" / "small.yaml"
CONNECTED = {"name": "conn", "edge_server": {
    "command": ["nginx", "-c", "{config}"],
    "config_template": str(ROOT / "configs" / "attached-devices-nchan.conf")},
    "applications": {"count": 2},
    "devices": [{"group": "m", "count": 4, "protocol": "websocket", "connection": {}}]}


class Stop(Exception):
    """Where a counted run stops: before anything is deployed."""


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Every text ``yaml.safe_load`` parses from here on."""
    seen: list[str] = []
    real = yaml.safe_load

    def counting(stream):
        text = stream if isinstance(stream, str) else stream.read()
        seen.append(text)
        return real(text)
    monkeypatch.setattr(yaml, "safe_load", counting)
    return seen


def _config(tmp_path: Path, raw: dict | Path) -> tuple[Path, str]:
    text = raw.read_text() if isinstance(raw, Path) else yaml.safe_dump(raw, sort_keys=False)
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path, text


def test_a_run_on_one_host_reads_its_yaml_once(tmp_path, monkeypatch, parses):
    """The dispatcher reads it; the runner's pre-flight and plan take the typed config."""
    from wotbench.runner import main
    got = {}

    def deploy(inputs, st):
        got["cfg"] = inputs.cfg
        raise EnvironmentProblem("stopped by the test before deploying")
    monkeypatch.setattr(main, "deploy", deploy)
    quick_preflight(monkeypatch)
    path, text = _config(tmp_path, SMALL)
    try:
        with pytest.raises(EnvironmentProblem, match="stopped by the test"):
            dispatch.run_config(path, tmp_path / "reports", "process")
    finally:
        loopslot.release()       # the loopback block the process backend claimed
    assert parses.count(text) == 1 and got["cfg"].name == "e2e-small"


def _stub_runs(monkeypatch) -> list:
    """Each point's run stops after the dispatcher read its file (exit 1, no summary)."""
    seen = []

    def run(config_path, out_root, backend=None, cfg=None, on_run_dir=None):
        seen.append((Path(config_path).read_text(), cfg))
        return RunResult(1, None)
    monkeypatch.setattr("wotbench.run_command.run", run)
    return seen


def test_run_with_set_reads_the_file_once_and_runs_the_config_it_made(tmp_path, monkeypatch,
                                                                      parses):
    runs = _stub_runs(monkeypatch)
    path, text = _config(tmp_path, SMALL)
    assert cli.main(["run", str(path), "--set", "duration_s=5", "--out-root",
                     str(tmp_path / "r")]) == 1
    (written, cfg), = runs
    assert cfg.duration_s == 5 and "duration_s: 5" in written
    assert parses.count(text) == 1 and parses.count(written) == 0   # made, not read back


def test_a_connected_run_reads_its_yaml_once(tmp_path, monkeypatch, parses):
    from wotbench.connected import run as crun
    got = {}

    def layout(cfg, **kw):
        got["cfg"] = cfg
        raise Stop
    for name in ("FLEET_BIN", "RPCAPP_BIN"):      # there, whether built or not
        monkeypatch.setattr(crun, name, Path(__file__))
    monkeypatch.setattr(crun, "make_layout", layout)
    path, text = _config(tmp_path, CONNECTED)
    with pytest.raises(Stop):
        dispatch.run_config(path, tmp_path / "reports", "process")
    assert parses.count(text) == 1 and got["cfg"].applications.count == 2


@pytest.mark.parametrize("raw", [SMALL, CONNECTED], ids=["cells", "connected-cells"])
def test_a_run_across_hosts_hands_the_coordinator_what_the_dispatcher_read(tmp_path, monkeypatch,
                                                                           parses, raw):
    """The coordinator sends the cells the text it was given (a connected one: the mapping,
    without the server's template, ``cell_config_text``); it reads no file itself."""
    from wotbench.distributed.connected_coord import ConnectedCoordinator
    from wotbench.distributed.coordinator import Coordinator
    got = []

    def run(self):
        got.append((type(self), self.source, self.cfg))
        return 0
    monkeypatch.setattr(Coordinator, "run", run)
    monkeypatch.setattr(ConnectedCoordinator, "run", run)
    path, text = _config(tmp_path, raw)
    assert dispatch.run_config(path, tmp_path / "reports", "swarm", 5.0).exit_code == 0
    kind, source, cfg = got[0]
    assert kind is (Coordinator if raw is SMALL else ConnectedCoordinator)
    assert parses.count(text) == 1 and source.text == text and cfg is source.config


def test_a_sweep_reads_its_base_once_and_each_point_once_in_its_run(tmp_path, monkeypatch,
                                                                    parses):
    from wotbench.sweep.command import run_sweep
    runs = _stub_runs(monkeypatch)
    path, text = _config(tmp_path, SMALL)
    run_sweep(path, ["duration_s=5,6"], out_root=tmp_path / "r", progress=False, report=False,
              run_fn=dispatch.run_config)
    assert parses.count(text) == 1
    assert [c.duration_s for _, c in runs] == [5, 6]
    assert [parses.count(point) for point, _ in runs] == [1, 1]


def test_a_capacity_search_reads_its_base_once(tmp_path, monkeypatch, parses):
    from wotbench.capacity.command import run_capacity
    runs = _stub_runs(monkeypatch)
    path, text = _config(tmp_path, SMALL)
    run_capacity(path, key="devices[0].count", start=2, maximum=4, out_root=tmp_path / "r",
                 report=False, run_fn=dispatch.run_config)
    assert parses.count(text) == 1
    assert runs and all(parses.count(point) == 1 for point, _ in runs)


def test_a_study_scenario_reads_its_config_once(tmp_path, parses):
    """Its seed and duration and its points' base come from one read."""
    from wotbench.validation.scenarios import scenario_sweep
    path, text = _config(tmp_path, SMALL)
    sweep = scenario_sweep(tmp_path / "study", tmp_path / "study.yaml",
                           {"name": "s", "config": path.name, "repeats": 2})
    assert parses.count(text) == 1
    assert [p.overrides for p in sweep.points] == [{"seed": 7}, {"seed": 8}]


@pytest.mark.parametrize("argv", [["sweep", "--vary", "duration_s=5,6", "--no-progress"],
                                  ["capacity", "--key", "devices[0].count", "--start", "2",
                                   "--max", "4"]], ids=["sweep", "capacity"])
def test_the_commands_read_the_base_once_also_where_they_refuse_connected_configs(
        tmp_path, monkeypatch, parses, argv):
    """On docker the command checks the base for connected groups before the first point; that
    read is the series' one."""
    runs = _stub_runs(monkeypatch)
    path, text = _config(tmp_path, SMALL)
    cli.main([argv[0], str(path), *argv[1:], "--backend", "docker", "--out-root",
              str(tmp_path / "r")])
    assert runs and parses.count(text) == 1
