"""wotbench capacity: probe + bisect against a fake runner with a known threshold."""
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from sweep_fakes import FakeRunner, write_base
from wotbench.capacity.command import capacity_exit_code, run_capacity
from wotbench.capacity.result import CapacityResult, CapacityStep
from wotbench.errors import ConfigError


def _count(cfg):
    return cfg["devices"][0]["count"]


def _threshold(limit, status="contention"):
    return FakeRunner(verdict=lambda c: status if _count(c) >= limit else "trustworthy")


def _cap(tmp_path, runner, report=False, out=None, **kw):
    """The search's typed result; what it printed goes to ``out`` when given."""
    return run_capacity(write_base(tmp_path), out_root=tmp_path / "reports", run_fn=runner,
                        console=Console(file=out or io.StringIO(), width=140), report=report, **kw)


def test_doubling_then_bisection_finds_36(tmp_path):
    runner = _threshold(37)
    out = io.StringIO()
    res = _cap(tmp_path, runner, report=True, out=out)
    assert res.status == "found" and res.answer == 36 and res.first_flagged == 37
    assert [_count(c) for c in runner.calls] == [5, 10, 20, 40, 30, 35, 37, 36]
    assert res.runs == 8 and capacity_exit_code(res) == 0
    assert [s.phase for s in res.steps] == ["probe"] * 4 + ["bisect"] * 4
    d = tmp_path / "reports"
    [cap_dir] = d.iterdir()
    assert cap_dir.name.startswith("capacity-t-")
    saved = json.loads((cap_dir / "capacity.json").read_text())
    assert saved["answer"] == 36 and saved["schema"] == "wotbench-capacity/1"
    assert saved["steps"][3]["verdicts"] == ["contention"] and saved["steps"][3]["rd_cd"] is not None
    html = (cap_dir / "report.html").read_text()
    assert "Largest contention-free setting" in html and "36" in html and "Capacity search evidence" in html
    assert "largest setting with a trustworthy verdict" in out.getvalue()


def test_step_without_bisect_answers_at_step_resolution(tmp_path):
    runner = _threshold(37)
    res = _cap(tmp_path, runner, step=5)
    assert res.answer == 35 and res.first_flagged == 40
    assert [_count(c) for c in runner.calls] == [5, 10, 15, 20, 25, 30, 35, 40]


def test_step_with_bisect(tmp_path):
    runner = _threshold(37)
    res = _cap(tmp_path, runner, step=5, bisect=True)
    assert res.answer == 36 and res.runs == 10
    assert [_count(c) for c in runner.calls][-2:] == [37, 36]


def test_ge_bottleneck_counts_as_flagged(tmp_path):
    res = _cap(tmp_path, _threshold(12, "ge_bottleneck"), start=4, maximum=50)
    assert res.answer == 11


def test_nothing_clean(tmp_path):
    runner = _threshold(1)
    res = _cap(tmp_path, runner)
    assert res.status == "none_clean" and res.answer is None and len(runner.calls) == 1
    assert capacity_exit_code(res) == 3


def test_max_clean(tmp_path):
    runner = _threshold(1000)
    res = _cap(tmp_path, runner, maximum=30)
    assert res.status == "max_clean" and res.answer == 30
    assert [_count(c) for c in runner.calls] == [5, 10, 20, 30]


def test_repeats_majority_vote_absorbs_a_noisy_flag(tmp_path):
    # count 20 is flagged once out of three (noise) -> clean; 37+ always flagged
    def verdict(c):
        if _count(c) >= 37 or (_count(c) == 20 and c.get("seed", 1) == 1):
            return "contention"
        return "trustworthy"
    runner = FakeRunner(verdict=verdict)
    res = _cap(tmp_path, runner, repeats=3)
    assert res.answer == 36
    step20 = next(s for s in res.steps if s.value == 20)
    assert step20.flagged is False and step20.verdicts.count("contention") == 1
    seeds = sorted({c.get("seed", 1) for c in runner.calls})
    assert seeds == [1, 2, 3]


def test_rate_pseudo_key(tmp_path):
    # per-device rate in req/s; flagged from 30 req/s (rit.mean <= 33.3 ms)
    runner = FakeRunner(verdict=lambda c: "contention" if 1000 / c["devices"][0]["rit"]["mean"] >= 30 - 1e-6
                        else "trustworthy")
    res = _cap(tmp_path, runner, key="devices[0].rate", start=4, maximum=100)
    assert res.answer == 29 and res.first_flagged == 30


def test_failed_run_stops_and_resume_reuses_evidence(tmp_path):
    broken = FakeRunner(fail_on=lambda c: 1 if _count(c) == 20 else 0,
                        verdict=lambda c: "contention" if _count(c) >= 37 else "trustworthy")
    res = _cap(tmp_path, broken)
    assert res.status == "failed" and res.answer == 10 and capacity_exit_code(res) == 1
    fixed = _threshold(37)
    res2 = _cap(tmp_path, fixed, resume=res.sweep_dir)
    assert res2.answer == 36
    assert [_count(c) for c in fixed.calls] == [20, 40, 30, 35, 37, 36]   # 5 and 10 reused


@pytest.mark.parametrize("kw,msg", [
    ({"key": "devices[0].cuont"}, "--key devices[0].cuont: devices[0].cuont: unknown key"),
    ({"start": 0}, "--start"),
    ({"start": 10, "maximum": 5}, "below --start"),
    ({"repeats": 0}, "--repeats"),
])
def test_bad_parameters(tmp_path, kw, msg):
    with pytest.raises(ConfigError) as e:
        _cap(tmp_path, FakeRunner(), **kw)
    assert any(msg in p for p in e.value.problems), e.value.problems
    assert not (tmp_path / "reports").exists()


def test_quiet_gate_records_the_load_of_every_run_and_a_busy_host_stops_the_search(tmp_path,
                                                                                  monkeypatch):
    from wotbench.monitor import quiet
    monkeypatch.setattr(quiet, "loadavg", lambda: 0.1)
    monkeypatch.setattr(quiet, "busy_processes", lambda *a, **k: [])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    res = _cap(tmp_path / "a", _threshold(37), gate=quiet.QuietGate(max_load=0.5, timeout_s=0))
    sweep = json.loads((Path(res.sweep_dir) / "sweep.json").read_text())
    assert res.answer == 36 and all(p["load"]["before"] == 0.1 for p in sweep["points"])
    monkeypatch.setattr(quiet, "loadavg", lambda: 4.0)
    res = _cap(tmp_path / "b", _threshold(37), gate=quiet.QuietGate(max_load=0.5, timeout_s=0))
    assert res.status == "failed" and "host never quiet" in res.error
    assert capacity_exit_code(res) == 1


def test_a_run_stopped_by_a_signal_stops_the_search_and_keeps_what_was_found(tmp_path):
    from wotbench.sweep.core import SweepInterrupted
    runner = FakeRunner(fail_on=lambda c: 143 if _count(c) == 20 else 0,
                        verdict=lambda c: "contention" if _count(c) >= 37 else "trustworthy")
    with pytest.raises(SweepInterrupted) as e:
        _cap(tmp_path, runner)
    assert e.value.exit_code == 143 and [_count(c) for c in runner.calls] == [5, 10, 20]
    [d] = (tmp_path / "reports").iterdir()
    res = CapacityResult.model_validate_json((d / "capacity.json").read_text())
    assert res.status == "interrupted" and res.answer == 10 and "--resume" in res.conclusion
    fixed = _threshold(37)
    assert _cap(tmp_path, fixed, resume=d).answer == 36
    assert [_count(c) for c in fixed.calls] == [20, 40, 30, 35, 37, 36]


def _step(value, **measured):
    """A clean probe step at ``value`` with what was measured (else nothing)."""
    return CapacityStep(**{"phase": "probe", "value": value, "points": ["p"], "flagged": False,
                           "verdicts": ["trustworthy"], "reasons": [], "run_dirs": [None],
                           "hosts": [None], "rd_devices": None, "testbed_ms": None,
                           "testbed_share": None, "testbed_worst_share": None, "rd_cd": None,
                           **measured})


def test_the_answer_says_how_much_of_the_latency_was_the_testbeds():
    from wotbench.capacity.search import testbed_note
    steps = [_step(16, testbed_ms=0.05, testbed_share=0.008, testbed_worst_share=0.02),
             _step(32, testbed_ms=1.2, testbed_share=0.2, testbed_worst_share=0.4)]
    assert testbed_note(steps, "devices[0].count", 16) == (
        " At devices[0].count = 16 the host added 0.05 ms per request (0.8 % of the devices' "
        "response time; the worst window 2.0 %).")
    # no amount measured at the answer (a summary before the host share): nothing claimed
    assert testbed_note([_step(16)], "k", 16) == ""
    assert testbed_note(steps, "k", None) == ""
