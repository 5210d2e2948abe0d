"""The run-directory contract: run.json and summary.json are written and read through one
model each, so a writer and a reader cannot disagree silently."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from analysis_fixtures import make_run
from wotbench.analysis import analyze
from wotbench.rundir import RunDir, RunRecord, Summary
from wotbench.rundir.notify import NotifyBlock, NotifyLatency, NotifySubscriber
from wotbench.sweep.report import _facts
from wotbench.validation.facts import load_run


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("contract"), duration_s=10, seed=5)
    return RunDir(d), analyze(d)


def test_summary_round_trips_through_its_model(analysed):
    rd, s = analysed
    assert rd.read_summary() == s
    assert json.loads(rd.summary_json.read_text()) == s.model_dump(mode="json")


def test_an_unknown_key_is_an_error_not_a_silent_gap(analysed, tmp_path):
    rd, _ = analysed
    data = json.loads(rd.summary_json.read_text())
    data["overall"]["p95"] = 1.0        # a key no writer produces
    with pytest.raises(ValidationError, match="overall.p95"):
        Summary.model_validate(data)
    run = json.loads(rd.run_json.read_text())
    run["host"]["cores"] = 2            # an alias that no writer produces (cpus is the key)
    with pytest.raises(ValidationError, match="cores"):
        RunRecord.model_validate(run)


def test_every_reader_gets_its_facts_from_a_genuinely_analysed_run(analysed):
    rd, s = analysed
    facts = _facts(s)                   # the sweep report
    for k in ("devices", "throughput_rps", "rt_p50_ms", "rd_devices", "rd_cd", "late_share",
              "ks", "lag_p99_us", "ge_kept_up"):
        assert facts.fact(k) is not None, k
    assert facts.notify_p99_ms is None             # no notification sink in this run
    sub = lambda name, p99, lost, rate: NotifySubscriber(   # noqa: E731
        name=name, kind="webhook", updates=100, notified=100 - lost, lost=lost,
        lost_share=lost / 100, duplicates=0, unknown_ids=0, notifications_per_s=rate,
        latency_ms=NotifyLatency(p50=p99 / 4, p99=p99))
    notified = s.model_copy(update={"notify": NotifyBlock(marker="id", subscribers=[
        sub("a", 4.0, 0, 30.0), sub("b", 9.0, 3, 20.0)])})
    f = _facts(notified)                # the worst subscriber's latency and loss, rates summed
    assert (f.notify_p50_ms, f.notify_p99_ms, f.notify_per_s,
            f.notify_lost_share) == (2.25, 9.0, 50.0, 0.03)
    v = load_run(rd.path)               # the validation study
    assert v["verdict"] == s.verdict.status and v["dev_windows"] and v["rd_cd_cal_p50"] is not None
