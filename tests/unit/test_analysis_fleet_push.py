"""Devices in wot-fleet engines that talk first (docs/CONTRACTS.md §3b "Push"): the engine's one
``fleet-push.csv`` and its summary's ``push`` are read into the same figures as a process
device's ``push-requests.csv`` — the ``push`` block, the test rows in ``overall`` and per
device, their losses attributed, the send lag judged on the engine's cores."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis_fixtures import TEST_START_NS
from fleet_fixtures import FleetSpec, make_fleet_run
from wotbench.analysis import AnalysisError, analyze
from wotbench.rundir import RunDir

MS = 1_000_000


def _add_engine_push(root, fleet: str, rows: list[dict], lag_ms: float = 0.02) -> pd.DataFrame:
    """fleet-push.csv and the summary's push of one engine; rows: device, op, phase, at_ms,
    outcome (an answer 2 ms after the send when ok)."""
    rd = RunDir(root)
    out, seen = [], {}
    for r in rows:
        i = seen.get(r["device"], 0)
        seen[r["device"]] = i + 1
        due = int(r["at_ms"] * MS)
        sent = due + int(r.get("lag_ms", lag_ms) * MS) if r["outcome"] != "unsent" else None
        rx = sent + 2 * MS if r["outcome"] == "ok" else None
        out.append({"index": i, "device": r["device"], "method": "PUT", "path": "example_data",
                    "scheduled_ns": due, "sent_ns": sent,
                    "received_ns": None if rx is None else rx + 20_000,
                    "code": "2.04" if rx else "", "outcome": r["outcome"], "retransmissions": 0,
                    "received_kernel_ns": rx, "phase": r["phase"], "op": r["op"]})
    df = pd.DataFrame(out)
    for c in ("sent_ns", "received_ns", "received_kernel_ns"):
        df[c] = df[c].astype("Int64")
    df.to_csv(rd.fleet_push_requests(fleet), index=False)
    s = json.loads(rd.fleet_summary(fleet).read_text())
    counts = df["outcome"].value_counts()
    s["push"] = {"devices": len(seen), "requests": len(df),
                 "outcomes": {o: int(counts.get(o, 0))
                              for o in ("ok", "error", "timeout", "reset", "unsent")},
                 **{ph: int((df["phase"] == ph).sum()) for ph in ("setup", "test", "teardown")},
                 "started": True, "start_mono_ns": TEST_START_NS, "timeout_ms": 4000,
                 "retransmissions": 0, "late_answers_acked": 0, "send_errors": 0,
                 "location_too_long": 0,
                 "send_lag_us": {"sent": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0,
                                 "max": 0.0}}
    rd.fleet_summary(fleet).write_text(json.dumps(s))
    return df


@pytest.fixture()
def run_dir(tmp_path):
    return make_fleet_run(tmp_path / "run", FleetSpec(n_devices=20, fleets=2, loops=1,
                                                      duration_s=10, rate_total=40))


def _names(root, fleet: str) -> dict[int, str]:
    d = pd.read_csv(RunDir(root).fleet_devices_file(fleet))
    return dict(zip(d["index"], d["name"]))


def test_engine_push_rows_count_like_a_process_devices(run_dir):
    before = analyze(run_dir)
    names = _names(run_dir, "sensor-fleet0")
    devs = sorted(names)[:3]
    rows = [{"device": d, "op": "register", "phase": "setup", "at_ms": -500, "outcome": "ok"}
            for d in devs]
    rows += [{"device": d, "op": "reading", "phase": "test", "at_ms": 100 + 400 * k,
              "outcome": "ok"} for d in devs for k in range(20)]
    rows += [{"device": devs[0], "op": "reading", "phase": "test", "at_ms": 9000,
              "outcome": "timeout"}]
    _add_engine_push(run_dir, "sensor-fleet0", rows)
    s = analyze(run_dir)
    p = s.push
    assert p.devices == 3
    assert p.by_op["register"].phase == "setup" and p.by_op["register"].outcomes.ok == 3
    assert p.by_op["reading"].requests == 61 and p.by_op["reading"].outcomes.ok == 60
    assert p.by_op["reading"].response_ms.p50_ms == pytest.approx(2.0)
    assert p.send_lag.p50_us == pytest.approx(20.0)        # µs
    assert s.overall.requests == before.overall.requests + 61
    assert s.loss.by_cause.push_timeout == before.loss.by_cause.push_timeout + 1
    mine = s.per_device[names[devs[0]]]
    assert mine.requests == before.per_device[names[devs[0]]].requests + 21


def test_late_engine_sends_are_named_on_the_engines_core(run_dir):
    names = _names(run_dir, "sensor-fleet1")
    d = sorted(names)[0]
    rows = [{"device": d, "op": "reading", "phase": "test", "at_ms": 100 + 50 * k,
             "outcome": "ok", "lag_ms": 30.0 if 40 <= k < 80 else 0.01} for k in range(150)]
    _add_engine_push(run_dir, "sensor-fleet1", rows)
    s = analyze(run_dir)
    assert s.push.late_share == pytest.approx(40 / 150, abs=1e-6)
    text = json.dumps(s.model_dump(mode="json"))
    assert "push core 0,1" in text and "push devices" not in text   # the engine's cpuset


def test_a_row_naming_another_engines_device_is_refused(run_dir):
    other = sorted(_names(run_dir, "sensor-fleet1"))[0]
    _add_engine_push(run_dir, "sensor-fleet0", [{"device": other, "op": "reading",
                                                 "phase": "test", "at_ms": 100,
                                                 "outcome": "ok"}])
    with pytest.raises(AnalysisError, match=r"fleet-push.csv:2: column device: .* is not a "
                                            r"device of sensor-fleet0"):
        analyze(run_dir)
