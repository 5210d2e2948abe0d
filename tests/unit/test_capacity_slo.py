"""wotbench capacity --slo: the three answers (about the system, about the host, inconclusive)
against a fake runner whose p95 grows with the per-device rate, and resume."""
import io
import json

import pytest
from rich.console import Console

from slo_fakes import SloFakeRunner, rate_of
from sweep_fakes import write_base
from wotbench.capacity.command import capacity_exit_code, run_capacity
from wotbench.errors import ConfigError

KEY = "devices[0].rate"
NOISE = {1: 0.0, 2: 8.0, 3: -8.0}        # ms added to the p95 per seed (repeat)


def _search(tmp_path, runner, slo=("p95<=35ms",), out=None, **kw):
    """The search's typed result; what it printed goes to ``out`` when given."""
    kw = {"key": KEY, "start": 10, "maximum": 60, "step": 10, **kw}
    return run_capacity(write_base(tmp_path), out_root=tmp_path / "reports", run_fn=runner,
                        console=Console(file=out or io.StringIO(), width=160), slo=list(slo), **kw)


def test_answer_about_the_system(tmp_path):
    runner = SloFakeRunner(rt=lambda c: rate_of(c))                   # p95 (ms) = rate (req/s)
    out = io.StringIO()
    res = _search(tmp_path, runner, out=out)
    o = res.outcome
    assert o.kind == "system" and capacity_exit_code(res) == 0
    assert o.sentence == (f"Up to {KEY} = 30 meets the SLOs; at {KEY} = 40 the system misses "
                             "p95 (40 ms); the host was faithful throughout.")
    assert [rate_of(c) for c in runner.calls] == [10, 20, 30, 40]
    assert "one run per setting" in o.confidence
    assert o.sentence in out.getvalue()
    d = tmp_path / "reports"
    [cap] = d.iterdir()
    saved = json.loads((cap / "capacity.json").read_text())
    assert saved["outcome"]["kind"] == "system" and saved["slo"] == {"p95_ms": 35.0}
    assert [s["slo"]["class"] for s in saved["steps"]] == ["meets"] * 3 + ["misses"]
    html = (cap / "report.html").read_text()
    assert html.index("the system misses") < html.index("Capacity search evidence")


def test_every_setting_meets_up_to_max(tmp_path):
    res = _search(tmp_path, SloFakeRunner(rt=lambda c: 1.0), maximum=30)
    assert res.outcome.kind == "system" and "raise --max" in res.outcome.sentence


def test_answer_about_the_host(tmp_path):
    runner = SloFakeRunner(rt=lambda c: rate_of(c),
                           verdict=lambda c: "contention" if rate_of(c) >= 30 else "trustworthy")
    res = _search(tmp_path, runner)
    o = res.outcome
    assert o.kind == "host" and capacity_exit_code(res) == 3
    assert o.sentence.startswith(f"The host stopped being faithful at {KEY} = 30 before the SLO "
                                    f"was missed (up to {KEY} = 20 the SLOs were met on a faithful host): "
                                    "use more cores, fewer devices per core, or more hosts.")
    assert any("contention" in e for e in o.evidence)


def test_inconclusive_when_noise_across_repeats_exceeds_the_margin(tmp_path):
    runner = SloFakeRunner(rt=lambda c: rate_of(c) + NOISE[c["seed"] if "seed" in c else 1])
    res = _search(tmp_path, runner, repeats=3)
    o = res.outcome
    assert o.kind == "inconclusive" and capacity_exit_code(res) == 5
    # at 30 req/s: 30, 38, 22 ms -> median 30, spread 16 ms > its 5 ms margin to 35 ms
    assert o.sentence.startswith(f"Inconclusive: at {KEY} = 30 p95 varied by 16 ms across 3 runs, "
                                    "more than its 5 ms distance to the 35 ms limit")
    assert "p95 22 ms–38 ms over 3 runs" in o.confidence


def test_quiet_repeats_give_a_confident_answer(tmp_path):
    runner = SloFakeRunner(rt=lambda c: rate_of(c) + 0.1 * ((c.get("seed", 1)) - 2))
    res = _search(tmp_path, runner, repeats=3)
    assert res.outcome.kind == "system"
    assert "spread 0.2 ms" in res.outcome.confidence


def test_resume_reuses_finished_points(tmp_path):
    broken = SloFakeRunner(rt=lambda c: rate_of(c), fail_on=lambda c: 1 if rate_of(c) == 30 else 0)
    res = _search(tmp_path, broken)
    assert res.outcome.kind == "incomplete" and capacity_exit_code(res) == 1
    fixed = SloFakeRunner(rt=lambda c: rate_of(c))
    res2 = run_capacity(resume=res.sweep_dir, run_fn=fixed, report=False)
    assert [rate_of(c) for c in fixed.calls] == [30, 40]       # 10 and 20 were reused
    assert res2.outcome.kind == "system" and res2.answer == 30


def test_what_if_set_reaches_every_run_and_bad_flags_fail_before_any_run(tmp_path):
    runner = SloFakeRunner(rt=lambda c: rate_of(c))
    _search(tmp_path, runner, maximum=10, fixed={"devices[*].network.loss.percent": 2})
    assert runner.calls[0]["devices"][0]["network"] == {"loss": {"percent": 2.0}}
    assert runner.calls[0]["slo"] == {"p95_ms": 35.0}
    (tmp_path / "bad").mkdir()
    for kw, msg in (({"slo": ["p95>=5"]}, "--slo 'p95>=5'"),
                    ({"slo": ["radio:p95<=5ms"]}, "slo.groups.radio: no device group"),
                    ({"fixed": {"network.loss": 2}}, "network impairments are per device group"),
                    ({"fixed": {KEY: 5}}, "also given with --set")):
        with pytest.raises(ConfigError) as e:
            _search(tmp_path / "bad", SloFakeRunner(rt=lambda c: 1.0), **kw)
        assert msg in str(e.value), str(e.value)
    assert not (tmp_path / "bad" / "reports").exists()
