"""The connected devices' upstream events in a connected run's analysis (wotbench.connected.events,
docs/CONNECTED.md "Upstream events: schedule and stamps"): an engine's events-log-*.csv and its
conn-summary.json ``upstream`` written here by hand (the engine writes them in
tests/c/test_connected_events.py), then summary.json ``connected.events``, the verdict's rule
on their send lag (p99 <= 1 ms, the open-loop applications' rule), connected-summary.json
``events``, the report; and the server → device → server figure of the RPCs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_connected_rundir import MS, T0, _apps, _engine, _finish, _sched   # the other files
from wotbench.analysis.errors import AnalysisError
from wotbench.connected.events import bucket_lo, hist_quantile_ns

WARM = T0 + 1000 * MS          # the warm-up ends 1 s into the test


def _events(out: Path, lags_ms: list[float], *, down: int = 0, unlogged: int = 0,
            hist_extra: list[tuple[int, int]] = (), bad_line: str | None = None) -> None:
    """One row per lag (device k % 4, due every 10 ms from T0), then ``down`` unsent_down rows;
    conn-summary.json gets the matching ``upstream`` (``unlogged`` events counted beyond the
    rows, their lags in ``hist_extra``)."""
    rows = ["device,seq,due_ns,sent_ns,outcome"]
    hist: dict[int, int] = {}
    for k, lag in enumerate(lags_ms):
        due = T0 + k * 10 * MS
        rows.append(f"{k % 4},{k // 4 + 1},{due},{due + int(lag * MS)},sent")
        lo = max(b for b in (bucket_lo(i) for i in range(96)) if b <= int(lag * MS))
        hist[lo] = hist.get(lo, 0) + 1
    for j in range(down):
        rows.append(f"{j % 4},{1000 + j},{T0 + (len(lags_ms) + j) * 10 * MS},,unsent_down")
    if bad_line is not None:
        rows.append(bad_line)
    (out / "events-log-0.csv").write_text("\n".join(rows) + "\n")
    for lo, n in hist_extra:
        hist[lo] = hist.get(lo, 0) + n
    s = json.loads((out / "conn-summary.json").read_text())
    sent = len(lags_ms) + sum(n for _, n in hist_extra)
    s["upstream"] = {"scheduled": sent + down, "sent": sent, "queued": 0, "unsent_down": down,
                     "backlog_full": 0, "send_error": 0,
                     "rows": len(rows) - 1, "rows_reserved": len(rows) - 1,
                     "unlogged": unlogged, "bytes": 64 * sent,
                     "lag_max_ns": int(max(lags_ms) * MS), "lag_hist": sorted(hist.items())}
    (out / "conn-summary.json").write_text(json.dumps(s))


def _run(tmp_path: Path, **ev):
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    eng = _engine(run_dir / "engines" / "e-conn0" / "out")
    _events(eng, **ev)
    return _finish(run_dir, eng, _apps(run_dir / "apps"),
                   _sched(run_dir / "monitor" / "connected-sched.csv", 0.1), WARM)


def test_events_on_schedule_are_counted_and_their_send_lag_stays_within_the_rule(tmp_path):
    lags = [0.02 + 0.001 * (k % 50) for k in range(400)]          # 20..69 µs
    rd, s = _run(tmp_path, lags_ms=lags, down=6)
    back = rd.read_summary()
    ev = back.connected.events
    assert back.verdict.status == "trustworthy", back.verdict.reasons
    assert ev.scheduled == 406 and ev.rows == 406 and ev.unlogged == 0
    assert ev.outcomes == {"sent": 400, "queued": 0, "unsent_down": 6, "backlog_full": 0,
                           "send_error": 0}
    assert ev.measured == 406 - 100 and ev.send_lag.n == 300   # due from 1 s on (the warm-up)
    assert ev.send_lag.max_ms == pytest.approx(0.069) and ev.send_lag.p99_ms < 0.07
    assert ev.bytes == 64 * 400 and ev.after_warmup
    assert any("events went out on their schedule" in r and "1 ms" in r
               for r in back.verdict.reasons), back.verdict.reasons
    assert any("6 upstream event(s) were due while" in r for r in back.verdict.reasons)
    legacy = json.loads(rd.connected_summary_json.read_text())["events"]
    assert legacy["scheduled"] == 406 and legacy["unsent_down"] == 6 and legacy["bytes"] == 25600
    assert legacy["send_lag_ns"]["max"] == pytest.approx(69_000)
    assert 'id="table-connected-events"' in (rd.path / "report.html").read_text()


def test_events_sent_late_beyond_1_ms_are_the_testbeds_contention(tmp_path):
    lags = [0.05] * 380 + [4.0] * 20                                # 5 % at 4 ms
    rd, s = _run(tmp_path, lags_ms=lags)
    assert s.verdict.status == "contention" and s.verdict.exit_code == 3
    why = [r for r in s.verdict.reasons if "upstream events late" in r]
    assert why and "p99 4.00 ms > 1 ms" in why[0], s.verdict.reasons
    assert "the open-loop applications' rule" in why[0]
    assert s.contention.status == "detected"


def test_events_beyond_the_rows_are_judged_by_the_engines_histogram(tmp_path):
    """The rows are on time, but 200 events beyond them went out 8-10 ms late: the
    histogram's p99 (the upper bound of its bucket) is what shows it."""
    lo8 = max(b for b in (bucket_lo(i) for i in range(96)) if b <= 8 * MS)
    rd, s = _run(tmp_path, lags_ms=[0.05] * 400, unlogged=200, hist_extra=[(lo8, 200)])
    ev = s.connected.events
    assert ev.unlogged == 200 and ev.send_lag.p99_ms == pytest.approx(0.05)
    assert 8 <= ev.send_lag_all_p99_ms <= 10.5
    assert s.verdict.status == "contention"
    assert any("histogram of every sent event" in r for r in s.verdict.reasons), s.verdict.reasons
    assert any("200 of the devices' 600 upstream events beyond the rows" in r
               for r in s.verdict.reasons)


def test_a_histogram_bucket_that_straddles_the_rule_is_not_held_against_the_run(tmp_path):
    """Beyond the rows, 200 events in the bucket [917.5 µs, 1 048.6 µs): its upper bound is
    above the 1 ms rule, its lower bound below it; the true p99 may be either side, so the
    verdict does not call the run contention for it (the figure still shows the bound)."""
    lo = max(b for b in (bucket_lo(i) for i in range(96)) if b <= 0.95 * MS)
    assert lo < 1 * MS < min(b for b in (bucket_lo(i) for i in range(96)) if b > lo)
    rd, s = _run(tmp_path, lags_ms=[0.05] * 400, unlogged=200, hist_extra=[(lo, 200)])
    assert s.connected.events.send_lag_all_p99_ms > 1.0
    assert not any("upstream events late" in r for r in s.verdict.reasons), s.verdict.reasons


def test_a_bad_row_is_named_by_file_and_line(tmp_path):
    with pytest.raises(AnalysisError) as e:      # sent before its due time
        _run(tmp_path, lags_ms=[0.05] * 10, bad_line=f"1,99,{T0 + 500 * MS},{T0},sent")
    assert "events-log-0.csv:12:" in str(e.value) and "at or after due_ns" in str(e.value)
    with pytest.raises(AnalysisError) as e:      # a value that is not an integer
        _run(tmp_path / "b", lags_ms=[0.05] * 10, bad_line="1,x,5,,unsent_down")
    assert "events-log-0.csv:12" in str(e.value) and "seq" in str(e.value)
    with pytest.raises(AnalysisError) as e:      # not an outcome
        _run(tmp_path / "c", lags_ms=[0.05] * 10, bad_line=f"1,99,{T0},,lost")
    assert "events-log-0.csv:12" in str(e.value) and "sent|queued" in str(e.value)


def test_the_server_device_server_figure_is_the_devices_write_minus_its_kernel_arrival(tmp_path):
    """_engine's rows: arrival = send + 1 ms, reply written 1 ms + 0.05 ms + 10 µs later."""
    rd, s = _run(tmp_path, lags_ms=[0.05] * 10)
    sds = s.connected.rpc.server_device_server
    assert sds.p50_ms == pytest.approx(1.06) and sds.p99_ms == pytest.approx(1.06)
    assert sds.n == s.connected.rpc.round_trip.n
    legacy = json.loads(rd.connected_summary_json.read_text())["rpc"]
    assert legacy["server_device_server_ns"]["p50"] == pytest.approx(1.06e6)
    assert "server → device → server" in (rd.path / "report.html").read_text()


def test_histogram_buckets_match_the_engines():
    """conn_events.c: 1.024 µs units, linear below 4, then 4 buckets per octave."""
    assert [bucket_lo(b) for b in range(9)] == [0, 1024, 2048, 3072, 4096, 5120, 6144, 7168,
                                               8192]
    assert bucket_lo(12) == 16 * 1024 and bucket_lo(13) == 20 * 1024
    assert hist_quantile_ns([(4096, 99), (8192, 1)], 0.99) == 5120
    assert hist_quantile_ns([], 0.99) is None


def test_the_engines_event_rows_follow_the_rate_and_lifetime_up_to_the_cap():
    from wotbench.connected.procs import EVENT_ROWS_CAP, event_rows
    assert event_rows(60, 100_000, 400) == -(-100_000 * 400 * 5 // (60 * 4)) + 64   # ×1.25
    assert event_rows(0.001, 100_000, 400) == EVENT_ROWS_CAP
    assert event_rows(0, 100_000, 400) == 0 and event_rows(1, 0, 400) == 0
