"""Where requests were lost (wotbench.analysis.loss): fake runs where requests vanish on each
leg, configured impairments that must never count against the testbed, and the verdict."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import make_run, truth
from wotbench.analysis import analyze
from wotbench.analysis import loss as L
from wotbench.rundir import RunDir


def test_each_cause_from_the_outcome_and_the_device_log():
    # rows: ok, lost before the device, answered but lost back, answered after the timeout,
    # 5.03, 4.04, RST, local send failure, interrupted in flight, unsent, no device log
    req = pd.DataFrame({
        "outcome": ["ok", "timeout", "timeout", "timeout", "error", "error", "reset", "error",
                    "error", "unsent", "timeout"],
        "code": ["2.05", None, None, None, "5.03", "4.04", None, None, None, None, None],
        "sent": [0.0, 1e6, 2e6, 3e6, 4e6, 5e6, 6e6, np.nan, 8e6, np.nan, 9e6],
        "sched": np.arange(11) * 1e6})
    codes = np.array([0] * 10 + [1])
    matched = pd.DataFrame({"row": [0, 2, 3, 4], "arrival": [1e5, 2.1e6, 3.1e6, 4.1e6],
                            "end": [2e5, 2.5e6, 3e6 + 200e6, np.nan]})
    cause = L.classify(req, matched, np.array([True, False]), codes, timeout_ms=100)
    got = [L.CAUSES[c] if c >= 0 else None for c in cause]
    assert got == [None, "to_device", "from_device", "device_late", "refused_503", "sut_error",
                   "sut_reset", "local_send", "interrupted", None, "no_device_log"]


def test_requests_vanishing_on_each_leg_are_the_testbeds(tmp_path):
    d = make_run(tmp_path, duration_s=10, loss_fraction=0.2, cd=False, seed=21)
    s = analyze(d)
    t = truth(d)
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv")
    lost = (req["outcome"] == "timeout").to_numpy()
    before = int((lost & ~t["reached"].to_numpy()).sum())
    after = int((lost & t["reached"].to_numpy()).sum())
    c = s.loss.by_cause
    assert s.loss.testbed == before + after and s.loss.configured == 0 and before and after
    # which leg: the device log is joined to the requests by path and time; a request sent
    # within microseconds of an earlier one to the same path can take that one's log row
    assert abs(c.to_device - before) <= max(1, 0.01 * before), (c.to_device, before)
    assert c.to_device + c.from_device == before + after
    assert s.verdict.status == "testbed_loss" and s.verdict.exit_code == 3
    assert s.verdict.checks.loss == "testbed_loss"
    assert f"the testbed lost {before + after} of " in s.verdict.reasons[0]
    assert sum(v["testbed"] for v in s.loss.per_device.values()) == before + after
    series = pd.read_csv(RunDir(d).series("loss_over_time"))
    assert series["to_device"].sum() == c.to_device and series["from_device"].sum() == c.from_device


def test_with_the_request_tokens_every_loss_is_on_its_exact_leg(tmp_path):
    """wot-device logs each request's token and the GE its token salt: the join is exact."""
    d = make_run(tmp_path, duration_s=10, loss_fraction=0.2, cd=False, seed=21, tokens=True)
    s = analyze(d)
    t = truth(d)
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv")
    lost = (req["outcome"] == "timeout").to_numpy()
    c = s.loss.by_cause
    assert c.to_device == int((lost & ~t["reached"].to_numpy()).sum())
    assert c.from_device == int((lost & t["reached"].to_numpy()).sum())
    assert s.rd.join.unmatched_log_rows == 0 and s.rd.join.matched == int(t["reached"].sum())


def test_a_clean_run_has_no_testbed_loss(tmp_path):
    s = analyze(make_run(tmp_path, duration_s=5, cd=False, seed=22))
    assert s.loss.testbed == 0 and s.verdict.checks.loss == "none"
    assert s.verdict.status == "trustworthy"


def _impair(d, device: str, counters: dict | None, impairment: dict) -> None:
    """Record a configured impairment of ``device`` in run.json as the runner would."""
    rd = RunDir(d)
    run = json.loads(rd.run_json.read_text())
    dev = {"describe": "x", "impairment": impairment, "applied": []}
    if counters is not None:
        dev["counters"] = {"dir": impairment.get("direction", "egress"), "seed": 1, **counters}
    run["network"] = {"backend": "app" if counters is not None else "netem", "devices": {device: dev}}
    rd.run_json.write_text(json.dumps(run))


@pytest.mark.parametrize("backend", ["app", "netem"])
def test_a_configured_loss_never_counts_against_the_testbed(tmp_path, backend):
    d = make_run(tmp_path, n_devices=1, duration_s=10, loss_fraction=0.2, cd=False, seed=23)
    t = truth(d)
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv")
    lost = (req["outcome"] == "timeout").to_numpy()
    before = int((lost & ~t["reached"].to_numpy()).sum())
    after = int((lost & t["reached"].to_numpy()).sum())
    counters = {"dropped_in": before, "dropped_out": after} if backend == "app" else None
    _impair(d, "cpu-0", counters, {"loss": {"percent": 20}, "direction": "both"})
    s = analyze(d)
    assert s.loss.testbed == 0 and s.loss.configured == before + after
    assert s.verdict.status == "trustworthy"


def test_the_app_backend_counts_only_what_it_dropped(tmp_path):
    """More losses on a leg than the impairment dropped there: the rest is the testbed's."""
    d = make_run(tmp_path, n_devices=1, duration_s=10, loss_fraction=0.2, cd=False, seed=24)
    t = truth(d)
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv")
    before = int(((req["outcome"] == "timeout").to_numpy() & ~t["reached"].to_numpy()).sum())
    _impair(d, "cpu-0", {"dropped_in": before - 3, "dropped_out": 0},
            {"loss": {"percent": 5}, "direction": "ingress"})
    s = analyze(d)
    assert s.loss.by_cause.impairment == before - 3 and s.loss.by_cause.to_device == 3
    assert s.verdict.status == "testbed_loss"


def test_losses_of_a_failed_device_after_its_failure_are_component_failed():
    import numpy as np
    import pandas as pd
    from wotbench.analysis import loss as lossm
    s = 1_000_000_000
    req = pd.DataFrame({"sent": [1 * s, 5 * s, 9 * s, 9 * s, np.nan],
                        "sched": [1 * s, 5 * s, 9 * s, 9 * s, 9.5 * s]})
    codes = np.array([0, 0, 0, 1, 0])
    to_dev = lossm.CAUSES.index("to_device")
    cause = np.array([to_dev, to_dev, to_dev, to_dev, lossm.NOT_A_CAUSE])
    # dev-0 failed, seen at 8 s: it died between 7 and 8 s; the timeout is 0.5 s
    out = lossm.attribute_failures(cause, req, codes, ["dev-0", "dev-1"], {"dev-0": 8 * s}, 500)
    failed = lossm.CAUSES.index("component_failed")
    # 1 s and 5 s: lost before it died; 9 s: after; dev-1 untouched; unsent is no loss
    assert list(out) == [to_dev, to_dev, failed, to_dev, lossm.NOT_A_CAUSE]
