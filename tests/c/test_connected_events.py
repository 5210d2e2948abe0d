"""Upstream events of connected devices (docs/CONNECTED.md "Upstream events: schedule and
stamps", CONTRACTS §3c): every event whose due time came is one row of events-log-<loop>.csv
(device, seq, due_ns, sent_ns, outcome) and counted in conn-summary.json "upstream"; the
schedule is open-loop (each event due an exponential gap after the previous one's DUE time),
so a stalled engine sends late instead of moving its schedule, and a device that is down gets
its events as `unsent_down`. Against the scripted edge server (testkit.scripted_edge)."""
import csv
import os
import signal
import socket
import time
from collections import Counter, defaultdict

import pytest

from testkit.connected import ConnFleet, ConnSpec, missing_prerequisite
from testkit.scripted_edge import ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

OUTCOMES = ("sent", "queued", "unsent_down", "backlog_full", "send_error")


def event_rows(fleet: ConnFleet) -> list[dict]:
    rows: list[dict] = []
    for f in sorted(fleet.out.glob("events-log-*.csv")):
        with f.open() as fp:
            rows += list(csv.DictReader(fp))
    return rows


def check_totals(rows: list[dict], s: dict) -> None:
    """Every scheduled event is one row (no row left unlogged here) with one outcome."""
    up = s["upstream"]
    assert up["unlogged"] == 0 and up["rows"] == len(rows) == up["scheduled"], up
    by = Counter(r["outcome"] for r in rows)
    assert set(by) <= set(OUTCOMES), by
    assert {k: up[k] for k in OUTCOMES} == {k: by.get(k, 0) for k in OUTCOMES}, (up, by)
    assert s["events"] == up["sent"] + up["queued"], s
    assert sum(n for _, n in up["lag_hist"]) == up["sent"], up
    for r in rows:                # a sent_ns exactly for the sent ones, never before its due
        assert (r["sent_ns"] != "") == (r["outcome"] == "sent"), r
        if r["sent_ns"]:
            assert int(r["due_ns"]) <= int(r["sent_ns"]), r
    per_dev = defaultdict(list)
    for r in rows:
        per_dev[r["device"]].append(int(r["seq"]))
    for dev, seqs in per_dev.items():  # one row per event, none missing
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), (dev, seqs[:20])


@pytest.mark.parametrize("protocol", ["websocket", "chunked", "chunked-post"])
def test_each_event_is_a_row_with_due_before_sent(tmp_path, conn_fleet_bin, protocol):
    specs = [ConnSpec(3, protocol, 10, 1, event_ms=25, reply_bytes=64)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        time.sleep(1.5)
        s = fleet.stop()
        # what reached the server: every event sent, identified by device and seq
        got = {m for m in (edge.ws_messages + edge.up_chunks +
                           [q.body.decode() for q in edge.requests if q.method == "POST"])
               if m.startswith('{"event":')}
    assert not edge.errors, edge.errors
    rows = event_rows(fleet)
    check_totals(rows, s)
    assert len(rows) >= 3 * 1.5 / 0.025 * 0.5, len(rows)   # about 180 expected
    sent = [r for r in rows if r["outcome"] == "sent"]
    assert len(sent) == len(rows), Counter(r["outcome"] for r in rows)
    import json
    seen = {(str(m["device"]), str(m["event"])) for m in map(json.loads, got)}
    assert {(r["device"], r["seq"]) for r in sent} <= seen, len(seen)


def test_the_inter_due_gaps_are_exponential_with_the_configured_mean(tmp_path, conn_fleet_bin):
    """4 devices, mean 10 ms, 3 s: ~1 200 gaps. The sample mean's standard error is mean /
    sqrt(n) (~3 %): the tolerance of 15 % is 5 of them; an exponential's coefficient of
    variation is 1 (tolerance 0.8..1.2) and 1 - e^-1 = 63.2 % of its gaps are below the mean
    (tolerance ±6 points, ~4 standard errors)."""
    specs = [ConnSpec(4, "websocket", 0, 1, event_ms=10, reply_bytes=32)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        time.sleep(3)
        s = fleet.stop()
    rows = event_rows(fleet)
    check_totals(rows, s)
    dues = defaultdict(list)
    for r in rows:
        dues[r["device"]].append((int(r["seq"]), int(r["due_ns"])))
    gaps = []
    for v in dues.values():
        d = [due for _, due in sorted(v)]
        gaps += [(b - a) / 1e6 for a, b in zip(d, d[1:])]
    n = len(gaps)
    mean = sum(gaps) / n
    sd = (sum((g - mean) ** 2 for g in gaps) / (n - 1)) ** 0.5
    below = sum(g < 10 for g in gaps) / n
    assert n > 800, n
    assert abs(mean - 10) < 1.5, (mean, n)
    assert 0.8 < sd / mean < 1.2, (sd, mean)
    assert abs(below - 0.632) < 0.06, below


def test_a_stalled_engine_sends_late_without_moving_the_schedule(tmp_path, conn_fleet_bin):
    """SIGSTOP for 0.6 s: the events due meanwhile go out late (their send lag shows the stall)
    and the due times keep their exponential gaps (mean 10 ms: a gap of 0.3 s has probability
    e^-30 per gap): the next event is due from the previous DUE time, not from its send."""
    specs = [ConnSpec(2, "websocket", 0, 1, event_ms=10, reply_bytes=32)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        time.sleep(0.5)
        os.kill(fleet.proc.pid, signal.SIGSTOP)
        time.sleep(0.6)
        os.kill(fleet.proc.pid, signal.SIGCONT)
        time.sleep(0.5)
        s = fleet.stop()
    rows = event_rows(fleet)
    check_totals(rows, s)
    lags = [int(r["sent_ns"]) - int(r["due_ns"]) for r in rows if r["sent_ns"]]
    assert sum(lag > 300e6 for lag in lags) >= 10, sorted(lags)[-5:]   # ~60 were due then
    assert s["upstream"]["lag_max_ns"] >= 500e6, s["upstream"]
    by_dev = defaultdict(list)
    for r in rows:
        by_dev[r["device"]].append((int(r["seq"]), int(r["due_ns"])))
    for v in by_dev.values():
        d = [due for _, due in sorted(v)]
        assert max(b - a for a, b in zip(d, d[1:])) < 300e6, "the schedule moved with the stall"


def test_events_due_while_the_server_closed_the_connection_are_unsent(tmp_path, conn_fleet_bin):
    """The server closes device 0's WebSocket; it reconnects after 0.8-1.6 s. Its events due
    while it was down end `unsent_down` (no sent_ns), before and after that `sent`; device 1,
    never closed, sends every one."""
    specs = [ConnSpec(2, "websocket", 0, 1, event_ms=20, reply_bytes=32, reconnect_ms=800)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        time.sleep(0.5)
        c = next(c for c in edge.conns if c.request.target.startswith("/dev/0/"))
        c.sock.shutdown(socket.SHUT_RDWR)
        assert edge.wait_for(lambda: sum(c.request.target.startswith("/dev/0/")
                                         for c in edge.conns) == 2, 5), "no reconnect"
        time.sleep(0.5)
        s = fleet.stop()
    rows = event_rows(fleet)
    check_totals(rows, s)
    assert s["disconnects"]["server_closed"] == 1, s
    dev0 = [r["outcome"] for r in sorted((r for r in rows if r["device"] == "0"),
                                         key=lambda r: int(r["seq"]))]
    # sent ... sent, unsent_down ... unsent_down, sent ... sent: one stretch down
    runs = [k for i, k in enumerate(dev0) if i == 0 or dev0[i - 1] != k]
    assert runs == ["sent", "unsent_down", "sent"], runs
    assert dev0.count("unsent_down") >= 0.8 / 0.02 * 0.5, Counter(dev0)   # ~40 to 80 expected
    assert {r["outcome"] for r in rows if r["device"] == "1"} == {"sent"}


def test_beyond_the_reserved_rows_events_are_counted_not_logged(tmp_path, conn_fleet_bin):
    specs = [ConnSpec(2, "websocket", 0, 1, event_ms=5, reply_bytes=32)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs, "--event-rows", "50"
                          ).start(attach_timeout=20)
        time.sleep(1)
        s = fleet.stop()
    rows = event_rows(fleet)
    up = s["upstream"]
    assert len(rows) == up["rows"] == up["rows_reserved"] == 50, up
    assert up["scheduled"] == 50 + up["unlogged"] and up["unlogged"] > 100, up
    assert sum(up[k] for k in OUTCOMES) == up["scheduled"], up
    assert sum(n for _, n in up["lag_hist"]) == up["sent"], up


@pytest.mark.parametrize("protocol", ["chunked-post", "websocket"])
def test_a_server_that_stops_reading_gives_queued_then_backlog_full_then_unsent(tmp_path,
                                                                                 conn_fleet_bin,
                                                                                 protocol):
    """The scripted server never reads a held-open POST's body or a WebSocket's frames
    (read_held=False): 64 KiB events every 2 ms fill the socket (later events `queued` in the
    device's backlog: the POST backlog, wslay's queue), then the backlog's 256 KiB bound (one
    `backlog_full`, the session ends as a protocol disconnect), then, never reconnecting,
    every later event is `unsent_down`."""
    specs = [ConnSpec(1, protocol, 0, 1, event_ms=2, reply_bytes=65536)]
    with ScriptedEdge(read_held=False) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        assert edge.wait_for(lambda: (fleet.out / "attached").exists(), 5)
        time.sleep(3)
        s = fleet.stop()
    rows = sorted(event_rows(fleet), key=lambda r: int(r["seq"]))
    check_totals(rows, s)
    seq = [r["outcome"] for r in rows]
    runs = [k for i, k in enumerate(seq) if i == 0 or seq[i - 1] != k]
    assert runs[-3:] == ["queued", "backlog_full", "unsent_down"], runs
    assert set(runs[:-3]) <= {"sent", "queued"}, runs
    assert s["upstream"]["backlog_full"] == 1 and s["disconnects"]["protocol"] == 1, s
