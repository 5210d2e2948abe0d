"""The devices' own test requests (devices[].push) in the run's figures: overall, per device,
loss attribution and SLOs count them like the GEs' requests; setup and teardown stay in the
``push`` block (issue 23 item 4)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import make_run
from push_fixtures import Push, add_push, readings
from wotbench.analysis import analyze
from wotbench.analysis import loss as L

SLO = "slo: {p99_ms: 20}\n"
CPU0 = ([Push("setup", "register", "ok", 0, code="2.01", method="POST", path="rd", retx=1)]
        + readings(40, 100.0)
        + [Push("test", "reading", "timeout", 5050, lag_ms=0.01, r_ms=None, retx=2),  # on time
           Push("test", "reading", "timeout", 6050, lag_ms=5.0, r_ms=None),    # sent 5 ms late
           Push("test", "reading", "error", 7050, code="4.04"),
           Push("test", "reading", "unsent", 19990, lag_ms=None, r_ms=None)]
        + [Push("teardown", "deregister", "ok", 0, code="2.02", method="DELETE")])
CPU1 = ([Push("setup", "register", "ok", 0, code="2.01", method="POST", path="rd")]
        + readings(120, 150.0, r_ms=50.0)     # slow answers: 120 of ~3100 requests at 50 ms
        + [Push("teardown", "deregister", "timeout", 0, r_ms=None, method="DELETE")])


def _run(root, push: bool):
    d = make_run(root, duration_s=20, seed=5)
    (d / "config.resolved.yaml").write_text(SLO)
    if push:
        add_push(d, "cpu-0", 0, CPU0)
        add_push(d, "cpu-1", 1, CPU1)
    return analyze(d)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same GE run without and with the devices' own requests."""
    return (_run(tmp_path_factory.mktemp("ge"), False),
            _run(tmp_path_factory.mktemp("push"), True))


def test_test_phase_pushes_count_in_overall_and_per_device(pair):
    base, s = pair
    assert s.overall.requests == base.overall.requests + 44 + 120   # not setup/teardown
    b, o = base.overall.outcomes, s.overall.outcomes
    assert (o.ok - b.ok, o.timeout - b.timeout, o.error - b.error, o.unsent - b.unsent) == \
        (160, 2, 1, 1)
    assert s.overall.throughput_rps == pytest.approx(o.ok / 20)
    assert s.overall.response_codes["2.04"] == 160
    assert s.per_device["cpu-0"].requests == base.per_device["cpu-0"].requests + 44
    assert s.per_device["cpu-1"].outcomes.ok == base.per_device["cpu-1"].outcomes.ok + 120
    assert s.per_device["cpu-2"] == base.per_device["cpu-2"]
    # the slow push answers are in the device's and the run's response times
    assert s.per_device["cpu-1"].response_time_ms.from_sent.max_ms == pytest.approx(50.0)
    assert s.overall.response_time_ms.from_sent.count == \
        base.overall.response_time_ms.from_sent.count + 160
    # the device-log join counts the GEs' requests only (a push has no device log to match)
    assert s.rd.join == base.rd.join


def test_the_push_block_keeps_every_phase(pair):
    _, s = pair
    ops = s.push.by_op
    assert (ops["register"].phase, ops["register"].requests) == ("setup", 2)
    assert (ops["reading"].phase, ops["reading"].requests) == ("test", 164)
    assert ops["deregister"].outcomes.timeout == 1
    assert s.push.teardown_failed == ["cpu-1: deregister timeout"]
    # RFC 7252 retransmissions per op, as the GE's block-wise table has them
    assert (ops["register"].retransmissions, ops["register"].with_retransmissions) == (1, 1)
    assert (ops["reading"].retransmissions, ops["reading"].with_retransmissions) == (2, 1)
    assert ops["deregister"].retransmissions == 0
    from wotbench.report.push_section import push as report_push
    rows = {r["op"]: r for r in report_push(s)["rows"]}
    assert (rows["reading"]["retransmissions"], rows["reading"]["with_retransmissions"]) == (2, 1)


def test_push_timeouts_are_attributed(pair):
    base, s = pair
    c = s.loss.by_cause
    assert (c.push_timeout, c.push_late_send) == (1, 1)
    assert c.sut_error == base.loss.by_cause.sut_error + 1
    assert s.loss.sut == base.loss.sut + 2 and s.loss.testbed == base.loss.testbed + 1
    assert s.loss.per_device["cpu-0"]["push_late_send"] == 1
    assert s.loss.requests_not_ok == base.loss.requests_not_ok + 3     # unsent is no loss
    # the late device send is the testbed's: the run is not trustworthy, and says where
    assert s.verdict.status == "testbed_loss"
    assert any("sent late by starved pushing devices" in r for r in s.verdict.reasons)


def test_slo_sees_the_pushes(pair):
    base, s = pair
    assert base.slo.status == "met"
    p99 = s.slo.objectives[0]
    assert s.slo.status == "missed" and p99.measured == pytest.approx(50.0, abs=1.0)
    assert [o.device for o in p99.offenders] == ["cpu-1"]
    assert p99.samples == s.overall.response_time_ms.from_sent.count


def _push_frame(outcome, lag_us, code=""):
    n = len(outcome)
    sched = np.arange(n) * 1e6
    return pd.DataFrame({"outcome": outcome, "code": code or [""] * n, "sched": sched,
                         "sent": sched + np.asarray(lag_us, float) * 1e3})


def test_classify_push_places_each_outcome():
    f = _push_frame(["timeout", "timeout", "error", "error", "reset", "ok"],
                    [10, 1500, 10, np.nan, 10, 10], ["", "", "4.00", "", "", "2.04"])
    got = [L.CAUSES[i] if i >= 0 else None for i in L.classify_push(f, 1000.0)]
    assert got == ["push_timeout", "push_late_send", "sut_error", "local_send", "sut_reset", None]
    assert "push_timeout" in L.SUT and "push_late_send" in L.TESTBED


# ----------------------------------------------------------------------------- send lag
def _lag_run(root, late_every: int):
    """cpu-0 and cpu-1 (both pinned to core 1) push 10 readings/s (tolerance: 5 % of 100 ms);
    every ``late_every``-th send of the first 10 s is 8 ms late, all others 4 ms (0: none late,
    4 ms each: within the tolerance)."""
    d = make_run(root, duration_s=20, seed=7)
    for name, dev_id in (("cpu-0", 0), ("cpu-1", 1)):
        rows = readings(200, 100.0, start_ms=0.0, lag_ms=4.0)
        if late_every:
            rows = [Push(r.phase, r.op, r.outcome, r.at_ms, 8.0 if r.at_ms < 10_000 and
                         i % late_every == 0 else r.lag_ms, r.r_ms) for i, r in enumerate(rows)]
        add_push(d, name, dev_id, rows)
    return analyze(d)


def test_late_device_sends_are_contention_named_by_device_and_core(tmp_path):
    s = _lag_run(tmp_path, late_every=5)
    c = s.contention
    assert c.status == "detected" and s.verdict.status == "contention"
    assert all("send_lag" in w.shown_by for w in c.flagged_windows)
    assert [w.start_s for w in c.flagged_windows] == [0.0]   # the late sends' window only
    assert "pushing device(s) cpu-0, cpu-1 on core 1 sent 40 of their 200 own requests later than their tolerance" in c.reason
    place = next(pw for w in s.evidence.windows[:1] for pw in w.places
                 if pw.place == "push core 1")
    assert place.requests == 2 * 100 and place.late_share == pytest.approx(0.2)
    assert place.lag_p99_ms == pytest.approx(8.0, abs=0.01)


def test_device_sends_within_their_tolerance_flag_nothing(tmp_path):
    s = _lag_run(tmp_path, late_every=0)
    assert s.contention.status == "none" and s.verdict.status == "trustworthy"
    places = {pw.place: pw for pw in s.evidence.windows[0].places}
    assert places["push core 1"].late_share == 0.0


# ----------------------------------------------------------------------------- report
def test_the_report_has_a_push_section(tmp_path):
    from wotbench.report import render_html
    d = make_run(tmp_path / "run", duration_s=20, seed=5)
    add_push(d, "cpu-0", 0, CPU0)
    add_push(d, "cpu-1", 1, CPU1)
    s = analyze(d)
    html = render_html(d)
    sec = html[html.index('<section class="card" id="push">'):]
    sec = sec[:sec.index("</section>")]
    rows = [r for r in sec.split("<tr>")[2:]]
    assert [r.split("</td>")[0].removeprefix("<td>") for r in rows] == \
        ["register", "reading", "deregister"]        # setup, test, teardown order
    reading = rows[1]
    assert "<td class=\"n\">164</td><td class=\"n\">160</td>" in reading
    assert f"{s.push.by_op['reading'].throughput_per_s:,.2f}" in reading
    assert f"{s.push.by_op['reading'].response_ms.p99_ms:,.3f}" in reading
    assert "Send lag of the 163 test sends" in sec
    assert "Teardowns that failed" in sec and "cpu-1: deregister timeout" in sec
    assert "Setups that failed" not in sec
    # the loss table names the push causes
    assert "push_late_send" in html and "push_timeout" in html


def test_no_push_section_without_pushes(tmp_path):
    from wotbench.report import render_html
    d = make_run(tmp_path / "run", duration_s=5, seed=2)
    analyze(d)
    assert 'id="push"' not in render_html(d)


def test_a_run_of_pushing_devices_only(tmp_path):
    """No main GE at all: the devices' own requests are the run's figures."""
    import json
    import shutil
    d = make_run(tmp_path / "run", duration_s=20, seed=5, cd=False)
    shutil.rmtree(d / "ge")
    r = json.loads((d / "run.json").read_text())
    r["ges"] = []
    (d / "run.json").write_text(json.dumps(r))
    for i in range(3):
        add_push(d, f"cpu-{i}", i, readings(100, 150.0) +
                 [Push("test", "reading", "timeout", 19000, r_ms=None)])
    s = analyze(d)
    assert s.overall.requests == 303 and s.overall.outcomes.ok == 300
    assert s.overall.response_time_ms.from_sent.p50_ms == pytest.approx(2.0)
    assert {n: (b.requests, b.ge) for n, b in s.per_device.items()} == \
        {f"cpu-{i}": (101, "push") for i in range(3)}
    assert s.loss.by_cause.push_timeout == 3 and s.loss.sut == 3 and s.loss.testbed == 0
    assert s.verdict.status == "trustworthy"


def test_an_impaired_devices_push_timeouts_are_the_impairments(tmp_path):
    """netem/pumba impair a device's own requests too: its push timeouts are ``impairment``;
    another device's stay the SUT's."""
    import json
    from wotbench.rundir import RunDir
    d = make_run(tmp_path / "run", duration_s=10, seed=9, cd=False)
    lost = [Push("test", "reading", "timeout", 1000 + 500 * i, r_ms=None) for i in range(4)]
    late = [Push("test", "reading", "timeout", 3100, lag_ms=5.0, r_ms=None)]   # sent late
    add_push(d, "cpu-0", 0, readings(10, 500.0) + lost + late)
    add_push(d, "cpu-1", 1, readings(10, 500.0) + lost[:1])
    rd = RunDir(d)
    run = json.loads(rd.run_json.read_text())
    run["network"] = {"backend": "netem", "devices": {"cpu-0": {
        "describe": "x", "impairment": {"loss": {"percent": 20}, "direction": "egress"},
        "applied": []}}}
    rd.run_json.write_text(json.dumps(run))
    s = analyze(d)
    assert s.loss.per_device["cpu-0"] == {"impairment": 5, "testbed": 0}
    assert s.loss.per_device["cpu-1"] == {"push_timeout": 1, "testbed": 0}
    assert s.loss.configured == 5 and s.loss.testbed == 0
