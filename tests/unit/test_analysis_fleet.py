"""The analysis of devices hosted by wot-fleet engines (docs/CONTRACTS.md §3b): the engines' logs
joined to the GE's requests like device logs, the engines' own lag (summary ``fleet``), the
evidence rule ``loop_lag`` and the strict reading of the engine's files."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fleet_fixtures import FleetSpec, make_fleet_run, truth
from wotbench.analysis import AnalysisError, analyze
from wotbench.rundir import AnalysisParams, RunDir


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = make_fleet_run(tmp_path_factory.mktemp("fleet"), FleetSpec(
        n_devices=60, fleets=2, loops=2, duration_s=30, loss_fraction=0.02))
    return root, analyze(root)


def test_every_request_is_joined_and_every_loss_placed(clean):
    root, s = clean
    t = truth(root)
    ok = int((s.overall.outcomes.ok))
    assert s.rd.join.log_rows == int(t["reached"].sum())
    assert s.rd.join.matched == s.rd.join.log_rows          # the tokens join exactly
    assert s.rd.join.ok_requests_matched == ok
    lost = s.overall.outcomes.timeout
    c = s.loss.by_cause
    assert lost > 0 and c.to_device + c.from_device == lost
    # lost before the device = the rows no engine logged
    assert c.to_device == int((~t["reached"]).sum())
    assert s.verdict.status == "testbed_loss"


def test_decomposition_recovers_the_engines_stamps(clean):
    root, s = clean
    t = truth(root)
    reached = t[t["reached"]]
    # device_in = start - kernel arrival = read lag + queueing (truth: exponential 20 + 30 µs)
    want = (reached["read_lag_ns"] + reached["queueing_ns"]).mean() / 1e3
    assert s.decomposition.overall.device_in.mean_us == pytest.approx(want, rel=0.05)
    assert s.decomposition.overall.service.mean_us == pytest.approx(
        reached["timer_late_ns"].mean() / 1e3, rel=0.05)
    assert len(s.per_device) == 60 and all(d.ge == "ge-0" for d in s.per_device.values())


def test_fleet_block_per_engine_and_loop(clean):
    root, s = clean
    t = truth(root)
    f = s.fleet
    assert [e.name for e in f.engines] == ["sensor-fleet0", "sensor-fleet1"]
    assert [e.devices for e in f.engines] == [30, 30]
    assert all(len(e.per_loop) == 2 for e in f.engines)
    got = sum(lp.requests for e in f.engines for lp in e.per_loop)
    assert got == int(t["reached"].sum())
    lp = f.engines[0].per_loop[1]
    rows = t[t["reached"] & (t["loop"] == 1) & (t["index"].isin(_rows_of_fleet(root, 0)))]
    assert lp.read_lag.p99_us == pytest.approx(np.quantile(rows["read_lag_ns"], 0.99) / 1e3)
    assert lp.timer_late.count == len(rows) and lp.busy_over.count == 0   # sleep service only
    assert lp.engine is not None and lp.engine.loop == 1
    assert f.engines[0].rss_per_device_bytes == 4096
    assert not f.behind and s.contention.status != "detected"
    series = pd.read_csv(RunDir(root).series("fleet_lag"))
    assert set(series["engine"]) == {"sensor-fleet0", "sensor-fleet1"}
    assert len(series) == 2 * 2 * 3      # engines x loops x 10 s windows


def _rows_of_fleet(root, fleet: int) -> set[int]:
    req = pd.read_csv(RunDir(root).ge_dir("ge-0") / "requests.csv")
    return set(req["index"][req["device"] // 30 == fleet])


def test_a_loop_that_falls_behind_flags_its_windows(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=40, loops=2, duration_s=30,
                                              late_loop=1, late_from_s=12.0))
    s = analyze(root)
    loops = s.fleet.engines[0].per_loop
    assert loops[0].windows_flagged == [] and loops[1].windows_flagged == [1, 2]
    assert s.fleet.behind
    assert s.contention.status == "detected" and s.verdict.status == "contention"
    flagged = {w.start_s: w.shown_by for w in s.contention.flagged_windows}
    assert flagged == {10.0: ["loop_lag"], 20.0: ["loop_lag"]}
    text = s.contention.flagged_windows[0].evidence[0]
    assert "fleet sensor-fleet0 loop 1" in text and "late" in text


def test_the_loops_lag_is_the_hosts_share_of_its_devices_response_time(tmp_path):
    # loop 1 reads every request 5 ms late from 12 s of a 30 s test: the host share's
    # loop_lag source says so per window (its level the lowest window's, not the late median),
    # and its devices carry it; loop 0 adds nothing
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=40, loops=2, duration_s=30,
                                              late_loop=1, late_from_s=12.0))
    s = analyze(root)
    late = "fleet sensor-fleet0 loop 1"
    by = {(pw.place, w.window): pw for w in s.evidence.windows for pw in w.places}
    assert by[(late, 2)].added_by == "loop_lag"
    assert by[(late, 2)].added_ms == pytest.approx(5.0, rel=0.05)
    assert by[(late, 1)].added_ms == pytest.approx(5.0 * 0.8, rel=0.1)    # late from 12 s of 10-20
    assert by[(late, 0)].added_ms < 0.05 and by[(late, 2)].beyond_tolerance
    assert by[("fleet sensor-fleet0 loop 0", 2)].added_ms < 0.05
    share = s.evidence.host_share
    loop_devices = {d for d, ps in share.per_device.items() if ps.added_ms and ps.added_ms > 1}
    assert loop_devices and share.per_place[late].windows_beyond == 2
    assert share.added_ms > 1 and share.grade == "severe"


def test_lag_below_the_limit_does_not_flag(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=40, duration_s=20, late_loop=0,
                                              late_extra_us=600.0))   # 0.6 ms < 1 ms
    s = analyze(root)
    assert not s.fleet.behind and s.contention.status != "detected"
    assert s.fleet.engines[0].per_loop[0].read_lag.p50_us > 600


def test_many_devices_go_to_the_per_device_table(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=300, duration_s=10, rate_total=600))
    s = analyze(root, AnalysisParams(per_device_max=100))
    assert s.per_device == {} and s.rd.per_device == {} and s.decomposition.per_device == {}
    assert s.ge_integrity.per_ge["ge-0"].per_device == {}
    assert any("per_device_max" in w for w in s.run.warnings)
    table = pd.read_csv(RunDir(root).series("per_device"))
    assert len(table) == 300 and table["requests"].sum() == s.overall.requests
    assert table["ok"].sum() == s.overall.outcomes.ok
    rt = pd.read_csv(RunDir(root).series("response_times"))
    assert set(rt["device"]) == {"all"}
    # the same figures as the per-device blocks of a run below the limit
    small = analyze(root)
    d = small.per_device["sensor-7"].response_time_ms.from_sent
    row = table[table["device"] == "sensor-7"].iloc[0]
    assert row["rt_p99_ms"] == pytest.approx(d.p99_ms, rel=1e-5)


def _rewrite_header(path, header):
    lines = path.read_text().splitlines()
    path.write_text("\n".join([header] + lines[1:]) + "\n")


def test_an_unknown_log_column_is_refused_naming_the_file(tmp_path):
    root = make_fleet_run(tmp_path, n_devices=10, duration_s=2)
    log = RunDir(root).fleet_log("sensor-fleet0", 0)
    header = log.read_text().splitlines()[0]
    _rewrite_header(log, header.replace("due_ns", "due_ns_x"))
    with pytest.raises(AnalysisError, match=r"fleet-log-0.csv:1: .*unknown column\(s\) due_ns_x"):
        analyze(root)


def test_a_bad_value_names_its_line(tmp_path):
    root = make_fleet_run(tmp_path, n_devices=10, duration_s=2)
    log = RunDir(root).fleet_log("sensor-fleet0", 1)
    lines = log.read_text().splitlines()
    lines[3] = "x" + lines[3]
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnalysisError, match=r"fleet-log-1.csv:4: column device"):
        analyze(root)


def test_an_unknown_summary_key_is_refused(tmp_path):
    root = make_fleet_run(tmp_path, n_devices=10, duration_s=2)
    path = RunDir(root).fleet_summary("sensor-fleet0")
    data = json.loads(path.read_text())
    data["loop"][0]["stalls"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(AnalysisError, match=r"fleet-summary.json: .*stalls"):
        analyze(root)


def test_a_log_row_of_an_unknown_device_is_refused(tmp_path):
    root = make_fleet_run(tmp_path, n_devices=10, duration_s=2)
    table = RunDir(root).fleet_device_table("sensor-fleet0")
    lines = table.read_text().splitlines()
    table.write_text("\n".join(lines[:-1]) + "\n")   # the last device is gone
    with pytest.raises(AnalysisError, match="not in fleet-devices.csv"):
        analyze(root)


def test_an_engine_that_died_leaves_its_losses_placed(tmp_path):
    root = make_fleet_run(tmp_path, n_devices=20, duration_s=5)
    rd = RunDir(root)
    for p in [rd.fleet_summary("sensor-fleet0"), rd.fleet_device_table("sensor-fleet0"),
              *rd.fleet_logs("sensor-fleet0")]:
        p.unlink()
    s = analyze(root)   # the harness's --devices input still names the fleet's devices
    assert s.rd.join.log_rows == 0 and s.fleet.engines[0].devices == 20
    assert any("no fleet-log" in w for w in s.run.warnings)
    assert any("did not stop cleanly" in w for w in s.run.warnings)


def test_the_fixtures_devices_file_is_what_the_runner_writes(tmp_path):
    from wotbench.rundir.fleet_files import read_devices
    root = make_fleet_run(tmp_path, n_devices=12, duration_s=1)
    rows = read_devices(RunDir(root).fleet_devices_file("sensor-fleet0"))
    assert [r.index for r in rows] == list(range(12)) and rows[3].name == "sensor-3"


def test_busy_service_is_an_overrun_not_timer_lateness(tmp_path):
    root = make_fleet_run(tmp_path, FleetSpec(n_devices=20, duration_s=5, mode="busy"))
    s = analyze(root)
    lp = s.fleet.engines[0].per_loop[0]
    t = truth(root)
    rows = t[t["reached"] & (t["loop"] == 0)]
    assert lp.timer_late.count == 0 and lp.busy_over.count == len(rows)
    assert lp.busy_over.mean_us == pytest.approx(rows["timer_late_ns"].mean() / 1e3)
    assert lp.engine.timer_late_ns.p50 is None      # the engine reports no sleep sample either
