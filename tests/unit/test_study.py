"""The validation study on the sweep engine, in process: scenarios become sweep dirs, a killed
study resumes without rerunning finished points, the quiet-host gate skips and records."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sweep_fakes import FakeRunner
from wotbench.errors import ConfigError
from wotbench.monitor.quiet import QuietGate
from wotbench.validation.study import run_study

ROOT = Path(__file__).resolve().parents[2]
NO_WAIT = QuietGate(wait=False)


def _manifest(tmp_path: Path) -> Path:
    base = "name: v\nduration_s: 10\ndevices:\n  - group: cpu\n    count: 5\n"
    (tmp_path / "clean.yaml").write_text(base)
    (tmp_path / "scale.yaml").write_text(base)
    m = tmp_path / "scenarios.yaml"
    m.write_text("scenarios:\n  - {name: V-clean, config: clean.yaml, expect: clean, repeats: 1}\n"
                 "  - name: V-scale\n    config: scale.yaml\n    expect: scale\n    repeats: 1\n"
                 "    vary: {key: 'devices[0].count', values: [5, 10, 20]}\n")
    return m


def test_study_runs_scenarios_in_process_and_writes_the_table(tmp_path):
    runner = FakeRunner()
    rc = run_study(_manifest(tmp_path), out_root=tmp_path / "reports", gate=NO_WAIT,
                   run_fn=runner, log=lambda m: None)
    assert rc == 0 and len(runner.calls) == 4
    [d] = (tmp_path / "reports").iterdir()
    res = json.loads((d / "results.json").read_text())
    assert [r["name"] for r in res["scenarios"]] == ["V-clean", "V-scale"]
    assert all(r["evaluation"]["passed"] for r in res["scenarios"])
    assert res["scenarios"][0]["load"]["before"] >= 0   # the gate recorded the load
    assert "| V-clean |" in (d / "table.md").read_text()
    sweep = json.loads((d / "scenarios" / "V-scale" / "sweep.json").read_text())
    assert [p["overrides"] for p in sweep["points"]] == [{"devices[0].count": v, "seed": 1}
                                                         for v in (5, 10, 20)]


def test_a_study_on_new_seeds_gives_every_scenario_the_same_ones(tmp_path):
    """--seed-base: the graded study rerun on seeds it was not tuned on; twins still pair
    (the same seeds in every scenario), and a resume cannot change them."""
    m = _manifest(tmp_path)
    runner = FakeRunner()
    assert run_study(m, out_root=tmp_path / "reports", gate=NO_WAIT, run_fn=runner,
                     log=lambda m: None, repeats_override=2, seed_base=500) == 0
    assert sorted({c["seed"] for c in runner.calls}) == [500, 501]
    [d] = (tmp_path / "reports").iterdir()
    assert json.loads((d / "study.json").read_text())["seed_base"] == 500
    for name in ("V-clean", "V-scale"):
        sweep = json.loads((d / "scenarios" / name / "sweep.json").read_text())
        assert sorted({p["overrides"]["seed"] for p in sweep["points"]}) == [500, 501]
    with pytest.raises(ConfigError, match="started with --seed-base 500"):
        run_study(resume=d, gate=NO_WAIT, run_fn=FakeRunner(), log=lambda m: None,
                  seed_base=7)


def test_study_json_keeps_what_was_asked_and_a_bad_one_names_the_key(tmp_path):
    assert run_study(_manifest(tmp_path), out_root=tmp_path / "reports", gate=NO_WAIT,
                     run_fn=FakeRunner(), log=lambda m: None) == 0
    [d] = (tmp_path / "reports").iterdir()
    meta = json.loads((d / "study.json").read_text())
    assert sorted(meta) == ["cpus", "gate", "host", "manifest", "only", "repeats_override",
                            "schema", "seed_base", "started_utc"]   # no finished_utc yet
    assert meta["gate"] == {"max_load": NO_WAIT.max_load, "timeout_s": NO_WAIT.timeout_s,
                            "wait": False}
    results_meta = json.loads((d / "results.json").read_text())["meta"]
    assert results_meta["finished_utc"] and results_meta["seed_base"] is None
    (d / "study.json").write_text(json.dumps({**meta, "seed_base": "five", "onl": None}))
    with pytest.raises(ConfigError) as e:
        run_study(resume=d, gate=NO_WAIT, run_fn=FakeRunner(), log=lambda m: None)
    msg = str(e.value)
    assert f"{d / 'study.json'}: seed_base: must be an integer" in msg
    assert "onl: unknown key, did you mean 'only'?" in msg
    # a study started by an older WoTbench (no repeats_override/seed_base/gate keys) resumes
    old = {k: v for k, v in meta.items() if k not in ("repeats_override", "seed_base", "gate")}
    (d / "study.json").write_text(json.dumps(old))
    assert run_study(resume=d, gate=NO_WAIT, run_fn=FakeRunner(), log=lambda m: None) == 0
    (d / "study.json").write_text("{")
    with pytest.raises(ConfigError, match="not a study directory"):
        run_study(resume=d, gate=NO_WAIT, run_fn=FakeRunner(), log=lambda m: None)


def test_a_killed_study_resumes_without_rerunning_finished_points(tmp_path):
    calls = []

    def dies_on_third(cfg):
        calls.append(1)
        return KeyboardInterrupt() if len(calls) == 3 else None
    with pytest.raises(KeyboardInterrupt):
        run_study(_manifest(tmp_path), out_root=tmp_path / "reports", gate=NO_WAIT,
                  run_fn=FakeRunner(fail_on=dies_on_third), log=lambda m: None)
    [d] = (tmp_path / "reports").iterdir()
    again = FakeRunner()
    assert run_study(resume=d, gate=NO_WAIT, run_fn=again, log=lambda m: None) == 0
    assert [c["devices"][0]["count"] for c in again.calls] == [10, 20]


def test_a_host_that_never_gets_quiet_skips_and_says_so(tmp_path, monkeypatch):
    from wotbench.monitor import quiet
    monkeypatch.setattr(quiet, "loadavg", lambda: 5.0)
    monkeypatch.setattr(quiet, "busy_processes", lambda *a, **k: ["42 pytest"])
    runner = FakeRunner()
    rc = run_study(_manifest(tmp_path), only=["V-clean"], out_root=tmp_path / "reports",
                   gate=QuietGate(max_load=0.5, timeout_s=0), run_fn=runner, log=lambda m: None)
    [d] = (tmp_path / "reports").iterdir()
    [entry] = json.loads((d / "results.json").read_text())["scenarios"]
    assert rc == 3 and runner.calls == []
    assert "host never quiet" in entry["skipped"] and entry["load"]["before"] == 5.0
    assert "not run: host never quiet" in (d / "table.md").read_text()


@pytest.mark.parametrize("only, bad_config, message", [
    (["V-nope"], False, "--only: no scenario named V-nope"),
    (None, True, "devices[0].count"),
])
def test_bad_input_stops_the_study_before_any_run_and_leaves_nothing(tmp_path, only, bad_config,
                                                                      message):
    m = _manifest(tmp_path)
    if bad_config:   # the second scenario's config is wrong: not even the first one runs
        (tmp_path / "scale.yaml").write_text("name: v\ndevices:\n  - group: cpu\n    count: -1\n")
    runner = FakeRunner()
    with pytest.raises(ConfigError, match=re.escape(message)):
        run_study(m, only=only, out_root=tmp_path / "reports", gate=NO_WAIT, run_fn=runner,
                  log=lambda m: None)
    assert runner.calls == [] and list((tmp_path / "reports").glob("*")) == []


def test_a_summary_this_version_cannot_read_is_a_table_row_not_a_crash(tmp_path):
    m = _manifest(tmp_path)
    assert run_study(m, only=["V-clean"], out_root=tmp_path / "reports", gate=NO_WAIT,
                     run_fn=FakeRunner(), log=lambda m: None) == 0
    [d] = (tmp_path / "reports").iterdir()
    [summary] = d.glob("scenarios/V-clean/runs/p000/*/summary.json")
    summary.write_text('{"schema": "something else"}')
    assert run_study(resume=d, evaluate_only=True, log=lambda m: None) == 3
    [entry] = json.loads((d / "results.json").read_text())["scenarios"]
    assert entry["evaluation"] is None and entry["error"].startswith(f"{summary}: ValidationError")
    row = next(r for r in (d / "table.md").read_text().splitlines() if r.startswith("| V-clean |"))
    assert "run failed:" in row and row.count("|") == 14    # one table row, whatever the message
