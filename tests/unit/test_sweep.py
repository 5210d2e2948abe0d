"""wotbench sweep: key paths, point planning, derived configs, resumable runs, the report."""
import io
import json

import pytest
import yaml
from rich.console import Console

from sweep_fakes import FakeRunner, write_base
from wotbench.errors import ConfigError
from wotbench.sweep import Sweep, plan_points, run_sweep, sweep_exit_code
from wotbench.sweep.paths import get_path, parse_key, parse_vary, set_path


def _quiet():
    return Console(file=io.StringIO(), width=120)


def _run(tmp_path, varies, runner=None, **kw):
    runner = runner or FakeRunner()
    sweep = run_sweep(write_base(tmp_path), varies, out_root=tmp_path / "reports", run_fn=runner,
                      console=_quiet(), **kw)
    return sweep, runner


# ----------------------------------------------------------------------------- paths
def test_parse_key_and_set_path():
    assert parse_key("devices[0].rit.mean") == ["devices", 0, "rit", "mean"]
    for bad in ("", "[0]", "a..b", "a.[0]", "a-b", "devices[x]"):
        with pytest.raises(ValueError):
            parse_key(bad)
    raw = {"devices": [{"count": 1}]}
    out = set_path(raw, "placement.affinity", "shared")
    assert out["placement"] == {"affinity": "shared"} and "placement" not in raw
    assert get_path(set_path(raw, "devices[0].rit.mean", 50), "devices[0].rit.mean") == 50
    with pytest.raises(ValueError, match="devices\\[3\\] does not exist"):
        set_path(raw, "devices[3].count", 2)


def test_parse_vary_values_are_yaml_scalars():
    assert parse_vary("devices[0].count=5,10,20") == ("devices[0].count", [5, 10, 20])
    assert parse_vary("placement.affinity=pinned,shared") == ("placement.affinity", ["pinned", "shared"])
    assert parse_vary("placement.cpus=[0,1],all")[1] == [[0, 1], "all"]
    assert parse_vary("devices[0].rit.mean=100, 50.5")[1] == [100, 50.5]
    for bad in ("devices[0].count", "devices[0].count=", "devices[0].count=5,,6", "x=1,1"):
        with pytest.raises(ConfigError, match="--vary"):
            parse_vary(bad)


def test_cartesian_plan_and_matrix(tmp_path):
    pts, origins, vary = plan_points(["devices[0].count=5,10", "placement.affinity=pinned,shared"])
    assert pts == [{"devices[0].count": 5, "placement.affinity": "pinned"},
                   {"devices[0].count": 5, "placement.affinity": "shared"},
                   {"devices[0].count": 10, "placement.affinity": "pinned"},
                   {"devices[0].count": 10, "placement.affinity": "shared"}]
    assert origins[0]["devices[0].count"] == "--vary devices[0].count=5,10"
    m = tmp_path / "m.yaml"
    m.write_text("points:\n  - devices[0].count: 5\n    devices[0].rit.mean: 100\n  - {'devices[0].count': 20}\n")
    pts, _, _ = plan_points([], m)
    assert pts == [{"devices[0].count": 5, "devices[0].rit.mean": 100}, {"devices[0].count": 20}]
    m.write_text("points: 3\n")
    with pytest.raises(ConfigError, match="--matrix"):
        plan_points([], m)
    with pytest.raises(ConfigError, match="nothing to vary"):
        plan_points([])


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("arg,expect", [
    ("devices[0].cuont=5,10", "--vary devices[0].cuont=5,10: devices[0].cuont: unknown key, did you mean 'count'?"),
    ("devices[0].count=5,0", "--vary devices[0].count=5,0: devices[0].count: must be >= 1"),
    ("devices[2].count=5", "--vary devices[2].count=5: devices[2].count: devices[2] does not exist"),
    ("placement.affinity=pinned,loose", "--vary placement.affinity=pinned,loose: placement.affinity"),
])
def test_bad_key_or_value_names_the_vary_argument_and_writes_nothing(tmp_path, arg, expect):
    with pytest.raises(ConfigError) as e:
        _run(tmp_path, [arg])
    assert any(expect in p for p in e.value.problems), e.value.problems
    assert not (tmp_path / "reports").exists()


# ----------------------------------------------------------------------------- running
def test_sweep_runs_every_point_and_writes_sweep_json_and_report(tmp_path):
    sweep, runner = _run(tmp_path, ["devices[0].count=5,10,20", "devices[0].rit.mean=100,50"])
    assert len(runner.calls) == 6
    assert [c["devices"][0]["count"] for c in runner.calls] == [5, 5, 10, 10, 20, 20]
    assert runner.calls[0]["name"] == "t-p00"
    d = sweep.dir
    assert d.parent == tmp_path / "reports" and d.name.startswith("sweep-t-")
    data = json.loads((d / "sweep.json").read_text())
    assert data["schema"] == "wotbench-sweep/2" and data["kind"] == "sweep"
    assert [p["status"] for p in data["points"]] == ["done"] * 6
    for p in data["points"]:
        assert (d / p["run_dir"] / "summary.json").is_file()
        assert yaml.safe_load((d / p["config"]).read_text())["devices"][0]["count"] == p["overrides"]["devices[0].count"]
    html = (d / "report.html").read_text()
    assert html.count("<svg") >= 3                     # Fig 7, 8, 9
    assert "paper Fig 7" in html and "paper Table 1" in html
    assert "placement.affinity does not vary" in html  # Fig 5 not available, with the reason
    assert 'href="runs/p00/' in html and "report.html" in html
    assert sweep_exit_code(sweep) == 0


def test_affinity_series_draws_fig5(tmp_path):
    sweep, _ = _run(tmp_path, ["devices[0].count=5,10", "placement.affinity=pinned,shared"])
    html = (sweep.dir / "report.html").read_text()
    # the paper's four figures and the two curves with their intervals (throughput, p95)
    assert "placement.affinity does not vary" not in html and html.count("<svg") == 6


def test_missing_rd_is_reported_not_drawn(tmp_path):
    sweep, _ = _run(tmp_path, ["devices[0].count=5,10"], runner=FakeRunner(rd=False, cpu=False))
    html = (sweep.dir / "report.html").read_text()
    assert "not available because R_d" in html
    assert "not available because the CD node" in html


def test_resume_skips_completed_points(tmp_path):
    calls = {"n": 0}

    def interrupt_third(cfg):
        calls["n"] += 1
        return KeyboardInterrupt() if calls["n"] == 3 else None

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, ["devices[0].count=5,10,20,40"], runner=FakeRunner(fail_on=interrupt_third))
    [d] = (tmp_path / "reports").iterdir()
    data = json.loads((d / "sweep.json").read_text())
    assert [p["status"] for p in data["points"]] == ["done", "done", "interrupted", "pending"]
    assert (d / "report.html").is_file()               # partial report even when interrupted
    runner = FakeRunner()
    sweep = run_sweep(resume=d, run_fn=runner, console=_quiet(), report=False)
    assert [c["devices"][0]["count"] for c in runner.calls] == [20, 40]
    assert [p.status for p in sweep.points] == ["done"] * 4
    again = FakeRunner()
    run_sweep(resume=d, run_fn=again, console=_quiet(), report=False)
    assert again.calls == []


def test_a_sweep_killed_during_a_run_knows_that_runs_directory_on_resume(tmp_path):
    """The run tells its directory the moment it makes it (on_run_dir): a sweep process killed
    after the run's analysis but before it recorded the point finds that directory in
    sweep.json, not the newest summary.json under the point's runs/ (here a later one)."""
    class Killed(BaseException):   # the sweep's process dies: nothing of run_point goes on
        pass

    runner = FakeRunner()
    first = runner.__call__

    def run_then_die(config_path, out_root, backend=None, on_run_dir=None):
        result = first(config_path, out_root, backend, on_run_dir)
        if len(runner.calls) == 1:
            decoy = FakeRunner()
            decoy.calls = [{}] * 5           # (another name) a newer summary in the same runs/
            assert decoy(config_path, out_root).run_dir != result.run_dir
            raise Killed()
        return result
    with pytest.raises(Killed):
        _run(tmp_path, ["devices[0].count=5,10"], runner=run_then_die, report=False)
    [d] = (tmp_path / "reports").iterdir()
    [p0, p1] = json.loads((d / "sweep.json").read_text())["points"]
    assert p0["status"] == "running" and p0["run_dir"].startswith("runs/p00/")
    again = FakeRunner()
    sweep = run_sweep(resume=d, run_fn=again, console=_quiet(), report=False)
    assert [c["devices"][0]["count"] for c in again.calls] == [10]   # p00 was not run again
    assert sweep.points[0].status == "done" and sweep.points[0].run_dir == p0["run_dir"]


@pytest.mark.parametrize("code", [130, 143])
def test_a_run_stopped_by_a_signal_stops_the_series(tmp_path, code):
    """In process, the runner catches SIGINT/SIGTERM, cleans up and returns 128 + signal: the
    sweep stops there (exit with that code) instead of going on with the next point."""
    from wotbench.sweep.core import SweepInterrupted
    runner = FakeRunner(fail_on=lambda c: code if c["devices"][0]["count"] == 10 else 0)
    with pytest.raises(SweepInterrupted) as e:
        _run(tmp_path, ["devices[0].count=5,10,20"], runner=runner)
    assert e.value.exit_code == code and "--resume" in e.value.message
    assert [c["devices"][0]["count"] for c in runner.calls] == [5, 10]
    [d] = (tmp_path / "reports").iterdir()
    assert [p["status"] for p in json.loads((d / "sweep.json").read_text())["points"]] == \
        ["done", "interrupted", "pending"]
    assert (d / "report.html").is_file()
    again = FakeRunner()
    run_sweep(resume=d, run_fn=again, console=_quiet(), report=False)
    assert [c["devices"][0]["count"] for c in again.calls] == [10, 20]


def test_failed_point_does_not_stop_the_series_and_is_rerun_on_resume(tmp_path):
    runner = FakeRunner(fail_on=lambda c: 1 if c["devices"][0]["count"] == 10 else 0,
                        verdict=lambda c: "contention" if c["devices"][0]["count"] >= 20 else "trustworthy")
    sweep, _ = _run(tmp_path, ["devices[0].count=5,10,20"], runner=runner)
    assert [p.status for p in sweep.points] == ["done", "failed", "done"]
    assert "exited with 1" in sweep.points[1].error
    assert sweep_exit_code(sweep) == 1
    html = (sweep.dir / "report.html").read_text()
    assert "exited with 1" in html and "contention" in html
    fixed = FakeRunner(verdict=runner.verdict)
    sweep = run_sweep(resume=sweep.dir, run_fn=fixed, console=_quiet(), report=False)
    assert len(fixed.calls) == 1 and sweep_exit_code(sweep) == 3


def test_runner_exception_is_recorded(tmp_path):
    sweep, _ = _run(tmp_path, ["devices[0].count=5,10"], report=False,
                    runner=FakeRunner(fail_on=lambda c: RuntimeError("boom") if c["devices"][0]["count"] == 5 else 0))
    assert sweep.points[0].status == "failed" and "boom" in sweep.points[0].error
    assert sweep.points[1].status == "done"


def test_resume_rejects_a_non_sweep_dir(tmp_path):
    with pytest.raises(ConfigError, match="sweep.json: not found"):
        Sweep.open(tmp_path)


def test_report_rows_read_a_real_analysis_summary(tmp_path):
    """The sweep report reads the keys the analysis really writes: a run directory analysed by
    wotbench.analysis (not a hand-written summary) gives every figure's facts."""
    from analysis_fixtures import make_run
    from wotbench.analysis import analyze
    from wotbench.sweep.report import collect

    sweep = run_sweep(write_base(tmp_path), ["devices[0].count=3"], out_root=tmp_path,
                      run_fn=FakeRunner(), progress=False, report=False)
    point = sweep.points[0]
    run_dir = sweep.dir / point.run_dir
    for f in run_dir.iterdir():   # replace the fake's files with a synthetic run, really analysed
        if f.is_file():
            f.unlink()
    make_run(run_dir, duration_s=5, seed=3)
    analyze(run_dir)
    row = collect(sweep)[0]
    for fact in ("devices", "throughput_rps", "rt_p50_ms", "rt_p95_ms", "rd_devices", "rd_cd",
                 "cd_rt_ms", "late_share", "ks", "lag_p99_us", "ge_kept_up"):
        assert row.fact(fact) is not None, fact
    assert row.devices == 3 and 0 < row.rt_p50_ms < row.rt_p95_ms


# ----------------------------------------------------------------------------- quiet-host gate
def test_quiet_gate_skips_points_on_a_busy_host_and_a_resume_runs_them(tmp_path, monkeypatch):
    from wotbench.monitor import quiet
    monkeypatch.setattr(quiet, "loadavg", lambda: 3.0)
    monkeypatch.setattr(quiet, "busy_processes", lambda *a, **k: ["42 gcc x.c"])
    never = quiet.QuietGate(max_load=0.5, timeout_s=0)
    sweep, runner = _run(tmp_path, ["devices[0].count=5,10"], gate=never, report=False)
    assert runner.calls == [] and [p.status for p in sweep.points] == ["skipped", "skipped"]
    assert "host never quiet" in sweep.points[0].error and sweep.points[0].load["before"] == 3.0
    assert sweep_exit_code(sweep) == 1
    monkeypatch.setattr(quiet, "loadavg", lambda: 0.2)
    monkeypatch.setattr(quiet, "busy_processes", lambda *a, **k: [])
    sweep = run_sweep(resume=sweep.dir, run_fn=runner, console=_quiet(), report=False,
                      gate=quiet.QuietGate(max_load=0.5, timeout_s=0))
    assert len(runner.calls) == 2 and sweep_exit_code(sweep) == 0
    assert all(p.load == {"before": 0.2, "busy_before": [], "after": 0.2, "busy_after": []}
               for p in sweep.points)
