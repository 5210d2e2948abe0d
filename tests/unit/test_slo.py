"""SLOs: the config block and --slo expressions (slo_spec), the evaluator (analysis.slo) with
its edge cases, the analysis writing summary.json slo and the exit code, the report's table."""
import numpy as np
import pytest

from analysis_fixtures import make_run
from slo_fakes import frame
from wotbench.analysis import analyze
from wotbench.analysis import slo_judge as sloa
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.report import render_html
from wotbench.config.slo_spec import Slo, merge_exprs, objectives, parse_expr

BASE = {"name": "t", "devices": [{"group": "sensor", "count": 2}]}


def _cfg(slo):
    return config_from_dict({**BASE, "slo": slo})


# ----------------------------------------------------------------------------- schema
def test_the_issue_form_and_shares_as_percentages():
    s = _cfg({"p95_ms": 50, "p99_ms": 200, "loss_max": 0.02}).slo
    assert (s.p95_ms, s.p99_ms, s.loss_max, s.window_s) == (50, 200, 0.02, 10)
    assert _cfg({"success_min": "98%"}).slo.success_min == pytest.approx(0.98)
    assert [o.key for o in objectives(s)] == ["p95_ms", "p99_ms", "loss_max"]


@pytest.mark.parametrize("slo,problem", [
    ({"p95_ms": -1}, "slo.p95_ms: must be > 0, got -1"),
    ({"loss_max": 2}, "slo.loss_max: must be a share between 0 and 1 (2 % is 0.02 or '2%'), got 2"),
    ({"p95ms": 50}, "slo.p95ms: unknown key, did you mean 'p95_ms'?"),
    ({}, "slo: no objective given"),
    ({"groups": {"radio": {"p95_ms": 5}}}, "slo.groups.radio: no device group named 'radio' (groups: sensor)"),
    ({"window_s": 0, "p95_ms": 5}, "slo.window_s: must be > 0"),
])
def test_bad_slo_names_the_key(slo, problem):
    with pytest.raises(ConfigError) as e:
        _cfg(slo)
    assert any(p.startswith(problem) for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("text,expect", [
    ("p95<=50ms", (None, "p95_ms", 50.0)),
    ("p99 <= 0.2s", (None, "p99_ms", 200.0)),
    ("p95_sched<=60", (None, "p95_sched_ms", 60.0)),
    ("loss<=2%", (None, "loss_max", 0.02)),
    ("loss<=0.02", (None, "loss_max", 0.02)),
    ("success>=98%", (None, "success_min", 0.98)),
    ("throughput>=100/s", (None, "throughput_min_rps", 100.0)),
    ("sensor:p50<=10ms", ("sensor", "p50_ms", 10.0)),
])
def test_parse_expr(text, expect):
    g, k, v = parse_expr(text)
    assert (g, k) == expect[:2] and v == pytest.approx(expect[2])


@pytest.mark.parametrize("text,msg", [
    ("p95>=50ms", "upper limit, write p95<=50ms"), ("p95<50ms", "use <= or >="),
    ("loss<=3", "a share must be 0..1"), ("success<=0.9", "lower limit"),
    ("p95<=50kg", "unit 'kg'"), ("latency<=5", "unknown metric 'latency'"), ("p95", "cannot read"),
])
def test_parse_expr_errors(text, msg):
    with pytest.raises(ValueError, match=msg):
        parse_expr(text)


def test_merge_sets_cli_objectives_over_the_config():
    m = merge_exprs({"p95_ms": 80, "p99_ms": 200}, ["p95<=50ms", "sensor:loss<=1%"])
    assert m == {"p95_ms": 50.0, "p99_ms": 200, "groups": {"sensor": {"loss_max": 0.01}}}


# ----------------------------------------------------------------------------- evaluator
def _eval(slo: dict, f, duration_s=10.0):
    return sloa.evaluate(Slo.model_validate(slo), f, duration_s)


def test_a_percentile_exactly_at_the_limit_passes_and_just_above_fails():
    at = _eval({"p95_ms": 40}, frame(40.0))
    assert at.status == "met" and at.objectives[0].margin == 0 and at.objectives[0].state == "pass"
    above = _eval({"p95_ms": 40}, frame(40.001))
    assert above.status == "missed" and above.objectives[0].margin == pytest.approx(-0.001)
    assert "p95 40 ms > 40 ms" in above.text


def test_percentile_matches_numpy_linear_interpolation():
    f = frame(1.0, per_s=10)
    f.rt_sent_ms = np.arange(len(f.rt_sent_ms), dtype=float)
    r = _eval({"p95_ms": 1000}, f).objectives[0]
    assert r.measured == pytest.approx(np.quantile(f.rt_sent_ms, 0.95)) and r.samples == 100


def test_no_successful_request_is_no_data_for_a_percentile_and_a_full_loss():
    f = frame(5.0, loss=1.0)
    b = _eval({"p95_ms": 50, "loss_max": 0.02, "success_min": 0.5}, f)
    p95, loss, success = b.objectives
    assert p95.state == "no_data" and p95.measured is None and p95.margin is None
    assert loss.state == "fail" and loss.measured == 1.0
    assert success.state == "fail" and success.measured == 0.0
    assert b.status == "missed"
    only_p95 = _eval({"p95_ms": 50}, f)
    assert only_p95.status == "no_data" and "no data" in only_p95.text
    assert sloa.exit_code("trustworthy", only_p95) == 4     # not shown met = not met


def test_a_window_without_samples_is_no_data_not_pass():
    f = frame(5.0, duration_s=10.0)
    b = _eval({"p95_ms": 50, "throughput_min_rps": 1}, f, duration_s=30.0)   # nothing after 10 s
    p95, tput = b.objectives
    assert p95.windows_total == 3 and p95.windows_pass == 1 and p95.windows_no_data == 2
    assert tput.windows_no_data == 2 and tput.windows_fail == 0
    assert p95.state == "pass"       # the whole test decides; the windows are reported


def test_windows_offenders_and_groups():
    f = frame(10.0, n_devices=4, per_s=40)
    slow = (f.device == 3) & (f.t_s >= 5)
    f.rt_sent_ms = np.where(slow, 90.0, f.rt_sent_ms)
    f.group_of = {"cpu-0": "a", "cpu-1": "a", "cpu-2": "b", "cpu-3": "b"}
    b = _eval({"p95_ms": 50, "window_s": 5, "groups": {"a": {"p95_ms": 50}}}, f)
    run, group_a = b.objectives
    assert run.state == "fail" and run.windows_fail == 1 and run.worst_window.start_s == 5
    assert [o.device for o in run.offenders] == ["cpu-3"] and run.offenders_total == 1
    assert run.devices_judged == 4
    assert group_a.state == "pass" and group_a.group == "a" and group_a.devices_judged == 2


def test_throughput_and_loss_are_judged_against_inclusive_limits():
    f = frame(5.0, per_s=20, loss=0.05)          # 19 ok/s, 5 % timeouts
    b = _eval({"throughput_min_rps": 19, "loss_max": 0.05}, f)
    assert b.status == "met" and [o.margin for o in b.objectives] == [pytest.approx(0), pytest.approx(0)]


def test_the_testbed_wins_over_an_slo_miss():
    b = _eval({"p95_ms": 1}, frame(5.0))
    assert sloa.exit_code("trustworthy", b) == 4 and sloa.exit_code("contention", b) == 3
    assert sloa.exit_code("trustworthy", None) == 0
    c = sloa.with_verdict(b, "contention")
    assert "may be the testbed's" in c.testbed_caveat and sloa.with_verdict(b, "trustworthy") is b


# ----------------------------------------------------------------------------- analysis + report
def _run_with_slo(tmp_path, slo_yaml, **kw):
    d = make_run(tmp_path / "run", **kw)
    (d / "config.resolved.yaml").write_text(slo_yaml)
    return d, analyze(d)


def test_analysis_writes_the_slo_block_and_the_exit_code(tmp_path):
    d, s = _run_with_slo(tmp_path, "slo: {p95_ms: 0.5, p50_ms: 100}\n")
    assert s.verdict.status == "trustworthy" and s.verdict.exit_code == 4
    p95 = next(o for o in s.slo.objectives if o.key == "p95_ms")
    assert p95.measured == pytest.approx(s.overall.response_time_ms.from_sent.p95_ms)
    assert s.slo.status == "missed" and p95.offenders_total == 3
    html = render_html(d)
    assert 'id="slo"' in html and "SLO missed" in html and "p95 response time (from send)" in html
    assert html.index('id="slo"') < html.index('id="headline"')


def test_analysis_without_slo_keeps_exit_0(tmp_path):
    d, s = _run_with_slo(tmp_path, "name: t\n")
    assert s.slo is None and s.verdict.exit_code == 0 and 'id="slo"' not in render_html(d)


def test_a_flagged_run_keeps_exit_3_and_says_the_miss_may_be_the_testbeds(tmp_path):
    d, s = _run_with_slo(tmp_path, "slo: {p95_ms: 0.5}\n", late_fraction=0.2, late_ms=5.0)
    assert s.verdict.status != "trustworthy" and s.verdict.exit_code == 3
    assert s.slo.status == "missed" and "may be the testbed's" in s.slo.testbed_caveat
    assert "Caution:" in render_html(d)
