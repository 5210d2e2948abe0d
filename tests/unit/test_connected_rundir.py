"""A connected run's directory from its components' files (wotbench.connected.finish): the
files of CONTRACTS §3c/§3d are written here by hand, small, so every figure can be checked
against what they hold; the real components write them in tests/e2e/test_e2e_connected.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wotbench.connected.analysis import Inputs
from wotbench.connected.finish import write_run_dir
from wotbench.rundir import RunDir

MS = 1_000_000
T0 = 10_000 * MS


def _engine(d: Path, *, disconnects=None, late_ms=0.05, pool_full=0) -> Path:
    d.mkdir(parents=True)
    causes = {"server_closed": 0, "reset": 0, "testbed": 0, "protocol": 0}
    disc = {**causes, **(disconnects or {})}
    (d / "conn-summary.json").write_text(json.dumps({
        "name": d.name, "devices": 4, "loops": 1, "attached_at_exit": 4, "attached_once": 4,
        "attaches": 4 + sum(disc.values()), "msgs_in": 200, "rpcs_in": 200, "no_id": 0,
        "replies": 200, "replies_lost": 0, "events": 10, "heartbeats": 8, "pongs": 8,
        "posts_rejected": 0, "bytes_in": 20000, "bytes_out": 60000,
        "connect_failures": causes, "disconnects": disc,
        "loop": [{"loop": 0, "devices": 4, "log_entries": 200, "log_dropped": 0,
                  "pool_full": pool_full, "heap_full": 0, "wakeups": 1, "busy_ns": 1,
                  "cpu_ns": 2 * 10**8, "timer_late_ns": {"p50": 1000, "p99": 5000,
                                                         "max": 9000}}],
        "rss_bytes": 1 << 20}))
    rows = ["device,name,protocol,attached_at_exit,attaches,connect_failures,server_closed,"
            "reset,testbed,protocol_error,msgs_in,rpcs_in,no_id,replies,replies_lost,events,"
            "heartbeats,pongs,posts_rejected,bytes_in,bytes_out"]
    for i in range(4):
        sc = disc["server_closed"] if i == 0 else 0
        rows.append(f"{i},c{i},websocket,1,{1 + sc},0,{sc},0,0,0,50,50,0,50,0,2,2,2,0,5000,15000")
    (d / "conn-devices.csv").write_text("\n".join(rows) + "\n")
    log = ["device,id,arrival_ns,due_ns,end_ns,sent_ns,outcome"]
    for k in range(200):
        send = T0 + k * 50 * MS
        arr = send + MS
        late = int(late_ms * MS)
        sent = "" if k == 7 else str(arr + MS + late + 10_000)   # RPC 7: device never replied
        out = "lost_disconnect" if k == 7 else "sent"
        log.append(f"{k % 4},0-{k},{arr},{arr + MS},{arr + MS + late},{sent},{out}")
    (d / "conn-log-0.csv").write_text("\n".join(log) + "\n")
    return d


def _apps(d: Path, *, lag_ms=0.01, timeouts=(7, 9), overflow=(), down=()) -> Path:
    d.mkdir(parents=True)
    rows = ["app,id,device,sched_ns,send_ns,reply_ns,status,outcome"]
    rt = []
    for k in range(200):
        send = T0 + k * 50 * MS
        sched = send - int(lag_ms * MS)
        if k in timeouts:
            rows.append(f"0,0-{k},{k % 4},{sched},{send},,200,timeout")
            continue
        if k in overflow:          # open loop: never sent (no send_ns, no status)
            rows.append(f"0,0-{k},{k % 4},{sched},,,0,overflow")
            continue
        if k in down:              # open loop: due while its connection was down, never sent
            rows.append(f"0,0-{k},{k % 4},{sched},,,0,lost")
            continue
        reply = send + 4 * MS
        rt.append(reply - send)
        rows.append(f"0,0-{k},{k % 4},{sched},{send},{reply},200,ok")
    rows.append(f"0,0-200,1,{T0 + 10_001 * MS},{T0 + 10_001 * MS},,200,timeout")  # never arrived
    (d / "rpc-log.csv").write_text("\n".join(rows) + "\n")
    n_unsent = len(overflow) + len(down)
    n_ok = 198 - n_unsent
    pct = {"p50": 4 * MS, "p90": 4 * MS, "p99": 4 * MS, "p99.9": 4 * MS, "max": 4 * MS}
    (d / "rpc-summary.json").write_text(json.dumps({
        "apps": 1, "shards": 1, "devices": 4, "duration_s": 10.0, "rpcs": 201, "measured": 201,
        "measured_s": 10.0, "offered_per_s": 20.1, "sent_per_s": (201 - n_unsent) / 10,
        "answered_per_s": n_ok / 10, "ok": n_ok, "timeout": 3, "rejected": 0,
        "lost": len(down), "overflow": len(overflow), "unsent_down": len(down),
        "unsent_write": 0, "sent": 201 - n_unsent, "unmatched": 0,
        "late_replies": 0, "events_in": 10, "post_2xx": 201, "post_202": 0,
        "app_disconnects": 0, "sub_disconnects": 0, "bytes_out": 30000, "bytes_in": 50000,
        "rows_full": 0, "end_ns": T0 + 13_000 * MS, "latency_ns": pct, "send_lag_ns": pct}))
    return d


def _sched(path: Path, engine_wait_ms_per_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ["mono_ns,component,role,cpu_ns,runqueue_ns"]
    for s in range(0, 12):
        t = T0 + s * 1000 * MS
        rows.append(f"{t},e-conn0,testbed,{s * 20 * MS},{int(s * engine_wait_ms_per_s * MS)}")
        rows.append(f"{t},wot-rpcapp,testbed,{s * 10 * MS},{s * MS // 100}")
        rows.append(f"{t},edge-server,system,{s * 50 * MS},{s * 30 * MS}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _run(tmp_path: Path, **kw) -> tuple[RunDir, object]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    eng = _engine(run_dir / "engines" / "e-conn0" / "out", **kw.pop("engine", {}))
    apps = _apps(run_dir / "apps", **kw.pop("apps", {}))
    sched = _sched(run_dir / "monitor" / "connected-sched.csv", kw.pop("wait", 0.1))
    return _finish(run_dir, eng, apps, sched)


def _finish(run_dir: Path, eng: Path, apps: Path, sched: Path, warmup_end_ns: int = T0
            ) -> tuple[RunDir, object]:
    """The run directory of these files (also test_connected_event_figures.py)."""
    inp = Inputs(engine_dirs=[eng], app_dir=apps, sched_csv=sched, devices=4, test_start_ns=T0,
                 duration_s=10.0, warmup_end_ns=warmup_end_ns,
                 extra={"attached_all": True, "attach_s": 0.5, "engines_s": 20.0,
                        "load_before": [0.5, 0.4, 0.3], "load_after": [0.6, 0.4, 0.3]})
    s = write_run_dir(run_dir, "conn-test", inp, cfg=None, interrupted=False, tolerance=0.05,
                      think_min_ms=40, log=lambda *_: None)
    return RunDir(run_dir), s


def test_a_clean_run_is_a_full_run_directory_with_the_connected_figures(tmp_path):
    rd, s = _run(tmp_path)
    back = rd.read_summary()                      # summary.json validates as every run's does
    assert back.verdict.status == "trustworthy", back.verdict.reasons
    c = back.connected
    assert c.rpc.outcomes == {"ok": 198, "timeout": 3, "rejected": 0, "lost": 0, "overflow": 0}
    # 7: the device got it but never replied; 9: the device replied, the reply never came;
    # 200: never reached a device — each attributed
    assert c.rpc.replied_not_received == 1 and c.rpc.not_delivered == 1
    assert c.rpc.round_trip.p50_ms == pytest.approx(4.0)
    # the engine's part: timer lateness 0.05 ms + write 0.01 ms, of a 4 ms round trip
    assert c.rpc.engine_part.p50_ms == pytest.approx(0.06)
    assert c.rpc.testbed_share.p50 == pytest.approx(0.015)
    assert back.overall.outcomes.ok == 198 and back.overall.outcomes.timeout == 3
    assert c.devices_side.kbytes_out_per_s == pytest.approx(60000 / 20 / 1000)
    assert c.apps_side.messages_out_per_s == pytest.approx(20.1)
    eng = next(w for w in c.sched if w.component == "e-conn0")
    assert eng.cpu_s == pytest.approx(0.22) and eng.role == "testbed"
    html = rd.report_html.read_text()
    for part in ('id="connected"', 'id="table-connected-causes"', 'id="fig-connected-rpc"',
                 'id="fig-connected-sched"', "testbed share of the round trip"):
        assert part in html, part
    assert "could not be drawn" not in html
    assert json.loads((rd.path / "connected-summary.json").read_text())["verdict"]["status"] \
        == "trustworthy"


def test_an_engine_that_waits_on_its_run_queue_is_the_testbeds_contention(tmp_path):
    # 60 ms of run-queue wait per second against 20 RPCs/s of 4 ms: 3 ms per RPC > 50 %
    rd, s = _run(tmp_path, wait=60)
    assert s.verdict.status == "contention", s.verdict.reasons
    assert any("e-conn0 waited on a run queue" in r for r in s.verdict.reasons)
    assert s.contention.flagged_windows and "runqueue_wait" in s.contention.flagged_windows[0].shown_by
    assert not any("edge-server" in r for r in s.contention.reason.split(";"))


def test_an_engine_that_falls_behind_its_timers_is_the_testbeds_contention(tmp_path):
    _, s = _run(tmp_path, engine={"late_ms": 2.0})
    assert s.verdict.status == "contention"
    assert any("the engines fell behind" in r for r in s.verdict.reasons)


def test_a_little_run_queue_wait_is_within_the_tolerance(tmp_path):
    _, s = _run(tmp_path, wait=30)                # 1.5 ms per RPC < 50 % of 4 ms
    assert s.verdict.status == "trustworthy", s.verdict.reasons


def test_the_servers_disconnects_are_reported_not_flagged_the_testbeds_lost(tmp_path):
    _, s = _run(tmp_path, engine={"disconnects": {"server_closed": 3}})
    assert s.verdict.status == "trustworthy"
    assert any("the server ended connections" in r for r in s.verdict.reasons)
    assert s.connected.per_device.with_disconnects == 1
    assert s.connected.per_device.worst[0]["server_closed"] == 3
    _, s = _run(tmp_path / "b", engine={"disconnects": {"testbed": 1}})
    assert s.verdict.status == "testbed_loss"
    _, s = _run(tmp_path / "c", engine={"pool_full": 2})
    assert s.verdict.status == "testbed_loss"


def test_an_open_loop_rpc_never_sent_is_one_overflow_outside_the_send_lag(tmp_path):
    """Two open-loop RPCs not sent (their application at max_outstanding): each one outcome,
    overall's unsent, no send lag of its own, counted in its second of the series, a note."""
    rd, s = _run(tmp_path, apps={"overflow": (20, 21), "lag_ms": 0.5})
    back = rd.read_summary()
    assert back.connected.rpc.outcomes["overflow"] == 2
    assert back.overall.outcomes.unsent == 2 and back.overall.sent == back.overall.requests - 2
    assert back.connected.rpc.send_lag.p99_ms == pytest.approx(0.5)   # the sent RPCs' only
    assert any("2 RPC(s) of the open-loop schedule were not sent" in r
               for r in back.verdict.reasons)
    import pandas as pd
    series = pd.concat(pd.read_csv(f) for f in (rd.path / "series").glob("connected_rpc*.csv"))
    assert series["overflow"].sum() == 2 and series["sent"].sum() == 199


def test_an_rpc_due_while_its_connection_was_down_is_unsent_in_the_overall_and_the_slo(tmp_path):
    """Open loop, issue 30's accounting: two RPCs due while their connection was down (lost,
    no send_ns) and one overflow are the overall's unsent — not reset, not sent — as the SLO
    judges the same rows; the loss of the sent RPCs is over the sent ones."""
    from wotbench.connected.rpc_outcomes import judged_rows
    import pandas as pd
    rd, s = _run(tmp_path, apps={"overflow": (20,), "down": (30, 31)})
    o = rd.read_summary().overall
    assert o.outcomes.unsent == 3 and o.outcomes.reset == 0, o.outcomes
    assert o.sent == 201 - 3
    assert o.loss_rate_of_sent == pytest.approx((198 - 195) / 198)    # the 3 timeouts
    log = pd.read_csv(rd.path / "apps" / "rpc-log.csv")
    per_row = judged_rows(log["outcome"], log["send_ns"]).value_counts().to_dict()
    assert per_row == {k: v for k, v in o.outcomes.model_dump().items() if v}


def test_the_throughput_is_the_answered_rpcs_not_the_offered_rate(tmp_path):
    """A server that falls behind: fewer answered than scheduled; throughput_rps is the answered
    RPCs per second, offered_rps the scheduled ones, and the block gives the sent rate too."""
    rd, s = _run(tmp_path, apps={"overflow": tuple(range(20, 60))})
    o = rd.read_summary().overall
    r = rd.read_summary().connected.rpc
    assert o.throughput_rps == pytest.approx(158 / 10) and o.offered_rps == pytest.approx(20.1)
    assert r.sent_per_s == pytest.approx(161 / 10) and r.answered_per_s == o.throughput_rps


def test_the_components_summaries_are_read_once_for_the_figures_and_the_totals(tmp_path,
                                                                               monkeypatch):
    """conn-summary.json and rpc-summary.json feed summary.json's connected block and
    connected-summary.json's totals: each file is read (and validated) once."""
    from wotbench.connected import totals
    read, real = [], totals.read_model
    monkeypatch.setattr(totals, "read_model",
                        lambda path, model, what: read.append(path.name) or real(path, model,
                                                                                 what))
    rd, s = _run(tmp_path)
    assert sorted(read) == ["conn-summary.json", "rpc-summary.json"]
    legacy = json.loads(rd.connected_summary_json.read_text())
    assert legacy["engine_files"] == 1 and legacy["heartbeats"] == s.connected.heartbeats == 8
    assert legacy["rpc"]["ok"] == s.connected.rpc.outcomes["ok"] == 198
