"""wotbench sweep --repeats: ids, interleaved order, seeds, mean ± 95 % CI per setting, the
verdict of every repeat, the results files, resume (also adding rounds) and bad input."""
from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from sweep_fakes import FakeRunner, write_base
from wotbench.errors import ConfigError
from wotbench.sweep import Sweep, run_sweep
from wotbench.sweep.aggregate import interval, t_quantile


def _run(tmp_path, varies, runner=None, **kw):
    runner = runner or FakeRunner()
    sweep = run_sweep(write_base(tmp_path), varies, out_root=tmp_path / "reports", run_fn=runner,
                      console=Console(file=io.StringIO()), progress=False, **kw)
    return sweep, runner


def _count(cfg):
    return cfg["devices"][0]["count"]


# ----------------------------------------------------------------------------- statistics
def test_interval_is_the_student_t_interval():
    iv = interval([1.0, 2.0, 3.0])
    # t(0.975, 2 df) = 4.302653 (tables); sd = 1
    assert t_quantile(3) == pytest.approx(4.302653, abs=1e-6)
    assert (iv.n, iv.mean, iv.sd) == (3, 2.0, pytest.approx(1.0))
    assert iv.half_width == pytest.approx(4.302653 / 3 ** 0.5, abs=1e-6)
    assert (iv.low, iv.high) == (pytest.approx(2 - iv.half_width), pytest.approx(2 + iv.half_width))
    one = interval([5.0, None])
    assert (one.n, one.mean, one.half_width) == (1, 5.0, None)
    assert interval([None]).n == 0 and interval([]).mean is None


# ----------------------------------------------------------------------------- planning
@pytest.mark.parametrize("bad", [0, -1, 101, 2.5, True])
def test_bad_repeats_is_an_error_naming_the_option_and_writes_nothing(tmp_path, bad):
    with pytest.raises(ConfigError, match="--repeats: must be a whole number from 1 to 100"):
        _run(tmp_path, ["devices[0].count=5,10"], repeats=bad)
    assert not (tmp_path / "reports").exists()


def test_repeats_run_in_interleaved_rounds_of_alternating_direction_with_seed_plus_r(tmp_path):
    sweep, runner = _run(tmp_path, ["devices[0].count=5,10,20"], repeats=3)
    assert [_count(c) for c in runner.calls] == [5, 10, 20, 20, 10, 5, 5, 10, 20]
    assert [c["seed"] for c in runner.calls] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [p.id for p in sweep.points] == ["p00", "p01", "p02", "p02-r1", "p01-r1", "p00-r1",
                                            "p00-r2", "p01-r2", "p02-r2"]
    assert runner.calls[3]["name"] == "t-p02-r1"
    assert {p.setting for p in sweep.points} == {"p00", "p01", "p02"}
    data = json.loads((sweep.dir / "sweep.json").read_text())
    assert (data["schema"], data["repeats"], data["order"]) == ("wotbench-sweep/2", 3, "interleaved")
    assert all(p["run_dir"].startswith(f"runs/{p['id']}/") for p in data["points"])


def test_any_vary_key_works_also_a_pseudo_key_and_a_word(tmp_path):
    sweep, runner = _run(tmp_path, ["devices[0].rate=5,10", "placement.affinity=pinned,shared"],
                         repeats=2)
    assert len(runner.calls) == 8
    res = json.loads((sweep.dir / "results.json").read_text())
    assert res["x_key"] == "devices[0].rate"
    assert res["varied"] == ["devices[0].rate", "placement.affinity"]
    assert [s["overrides"] for s in res["settings"]][:2] == [
        {"devices[0].rate": 5, "placement.affinity": "pinned"},
        {"devices[0].rate": 5, "placement.affinity": "shared"}]
    (tmp_path / "w").mkdir()
    words, _ = _run(tmp_path / "w", ["placement.affinity=pinned,shared"], repeats=2)
    res = json.loads((words.dir / "results.json").read_text())
    assert res["x_key"] is None                         # no numeric key: settings side by side
    assert (words.dir / "report.html").read_text().count("<svg") >= 2


# ----------------------------------------------------------------------------- results
def test_mean_and_interval_per_setting_and_every_repeats_verdict(tmp_path):
    # p01's second repeat (seed 2) is flagged by contention; the rest is trustworthy
    runner = FakeRunner(verdict=lambda c: "contention" if _count(c) == 10 and c["seed"] == 2
                        else "trustworthy")
    sweep, _ = _run(tmp_path, ["devices[0].count=5,10"], runner=runner, repeats=3)
    res = json.loads((sweep.dir / "results.json").read_text())
    assert res["schema"] == "wotbench-sweep-results/1" and res["confidence"] == 0.95
    assert len(res["points"]) == 6
    s0, s1 = res["settings"]
    assert (s0["done"], s0["flagged"], s0["verdicts"]) == (3, [], ["trustworthy"] * 3)
    assert s1["verdicts"] == ["trustworthy", "contention", "trustworthy"]
    assert (s1["flagged"], s1["contention"]) == (["p01-r1"], ["p01-r1"])
    # the fake's throughput is n * 1000 / rit * 0.99 whatever the seed: identical repeats
    tput = s0["metrics"]["throughput_rps"]
    assert tput["n"] == 3 and tput["mean"] == pytest.approx(5 * 10 * 0.99)
    assert tput["half_width"] == pytest.approx(0.0, abs=1e-9)
    html = (sweep.dir / "report.html").read_text()
    assert "1 of 3 repeats flagged (contention 1) — contention in p01-r1" in html
    assert "Throughput vs devices[0].count" in html and "Response time p95 vs devices[0].count" in html
    assert "1/3 flagged" in html                        # beside the point in the curves
    assert "SUT CPU" not in html                        # no server: no empty SUT columns
    with open(sweep.dir / "settings.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["devices[0].count"] for r in rows] == ["5", "10"]
    assert rows[1]["flagged"] == "1" and rows[1]["verdicts"] == "trustworthy;contention;trustworthy"
    assert float(rows[0]["throughput_rps_mean"]) == pytest.approx(49.5)
    with open(sweep.dir / "points.csv") as f:
        pts = list(csv.DictReader(f))
    assert [p["point"] for p in pts] == ["p00", "p01", "p01-r1", "p00-r1", "p00-r2", "p01-r2"]
    assert pts[2]["verdict"] == "contention"


def test_interval_from_values_that_differ(tmp_path, monkeypatch):
    """p95 differs by seed: the interval is the t interval of those values."""
    from sweep_fakes import make_summary
    import sweep_fakes

    def summary(**kw):
        kw["rt_p95_ms"] = {1: 10.0, 2: 12.0, 3: 14.0}[summary.seed]
        return make_summary(**kw)

    class Runner(FakeRunner):
        def __call__(self, config_path, out_root, backend=None, on_run_dir=None):
            import yaml
            from pathlib import Path
            summary.seed = yaml.safe_load(Path(config_path).read_text())["seed"]
            return super().__call__(config_path, out_root, backend, on_run_dir)

    monkeypatch.setattr(sweep_fakes, "make_summary", summary)
    sweep, _ = _run(tmp_path, ["devices[0].count=5"], runner=Runner(), repeats=3)
    p95 = json.loads((sweep.dir / "results.json").read_text())["settings"][0]["metrics"]["rt_p95_ms"]
    assert p95["mean"] == pytest.approx(12.0)
    assert p95["half_width"] == pytest.approx(4.302653 * 2 / 3 ** 0.5, abs=1e-5)


# ----------------------------------------------------------------------------- resume
def test_resume_runs_the_missing_repeats_and_can_add_rounds(tmp_path):
    calls = {"n": 0}

    def stop_fourth(cfg):
        calls["n"] += 1
        return KeyboardInterrupt() if calls["n"] == 4 else None

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, ["devices[0].count=5,10"], runner=FakeRunner(fail_on=stop_fourth), repeats=2)
    [d] = (tmp_path / "reports").iterdir()
    again = FakeRunner()
    sweep = run_sweep(resume=d, run_fn=again, console=Console(file=io.StringIO()), progress=False)
    assert [(_count(c), c["seed"]) for c in again.calls] == [(5, 2)]    # only p00-r1
    more = FakeRunner()
    sweep = run_sweep(resume=d, run_fn=more, console=Console(file=io.StringIO()), progress=False,
                      repeats=4)
    # rounds 2 (forward) and 3 (backward)
    assert [(_count(c), c["seed"]) for c in more.calls] == [(5, 3), (10, 3), (10, 4), (5, 4)]
    assert sweep.repeats == 4 and len(sweep.points) == 8
    res = json.loads((d / "results.json").read_text())
    assert [s["done"] for s in res["settings"]] == [4, 4]
    with pytest.raises(ConfigError, match="--repeats: this sweep already has 4 repeats"):
        run_sweep(resume=d, run_fn=FakeRunner(), console=Console(file=io.StringIO()),
                  progress=False, repeats=2)


def test_a_sweep_written_before_repeats_opens_as_one_repeat(tmp_path):
    sweep, _ = _run(tmp_path, ["devices[0].count=5"])
    f = sweep.dir / "sweep.json"
    data = json.loads(f.read_text())
    data["schema"] = "wotbench-sweep/1"
    for key in ("repeats", "order"):
        data.pop(key)
    for p in data["points"]:
        p.pop("setting")
        p.pop("repeat")
    f.write_text(json.dumps(data))
    old = Sweep.open(sweep.dir)
    assert old.repeats == 1 and old.points[0].setting == "p00" and old.points[0].repeat == 0
