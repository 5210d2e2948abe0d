"""wot-rpcapp's applications on their own WebSockets (`--transport websocket`, docs/CONNECTED.md
"Applications on their own WebSockets") against the scripted server: each application opens
one WebSocket to --ws-path with the --ws-header lines, sends every RPC as ONE masked text frame
(the --frame template with the RPC's device and id), the server's frames on that socket are
in-order acks (as the HTTP path's responses: --ack-unheard = nobody subscribed, --ack-rejected
= rejected, an RPC whose ack has not come still counts as outstanding), replies come back on
the reply subscriptions matched by id; closed and open loop, the same outcome accounting."""
import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from testkit.connected import build
from testkit.scripted_edge import Conn, ScriptedEdge

pytestmark = pytest.mark.skipif(not Path("/usr/include/wslay/wslay.h").exists(),
                                reason="wslay is not installed (apt-get install libwslay-dev)")

OUTCOMES = ("ok", "timeout", "rejected", "lost", "overflow")
FRAME = '["PUBLISH","rpc.{device}","rpc:{id}"]'      # webdis's command, as a template
FRAME_RE = re.compile(r'\["PUBLISH","rpc\.([0-9]+)","rpc:([0-9]+-[0-9]+)"\]')
APP_PATH = "/.json"


def _run(edge: ScriptedEdge, log_dir, *args: str, transport=True) -> subprocess.CompletedProcess:
    binary = build("rpc-app", "wot-rpcapp-asan")
    ws = ["--transport", "websocket", "--ws-path", APP_PATH, "--ws-header",
          "Origin: http://t.invalid", "--frame", FRAME] if transport else []
    return subprocess.run([str(binary), "--server", edge.server, "--log-dir", str(log_dir),
                           "--duration-s", "2", *ws, *args], capture_output=True, text=True,
                          timeout=60)


def _relay(acks=lambda rid: '{"PUBLISH":1}', reply=lambda rid: True, close=lambda rid: False,
           ping=lambda rid: False):
    """A server that, for each RPC frame on an application's WebSocket, sends that socket the
    ack `acks(id)` (None: none), relays the reply down the first reply subscription when
    `reply(id)`, or ends the application's connection when `close(id)` (nothing else); a
    ping "hb-<id>" before the ack when `ping(id)`."""
    box: list[ScriptedEdge] = []

    def on_ws_message(conn: Conn, text: str) -> None:
        if conn.request.target != APP_PATH:
            return
        rid = FRAME_RE.fullmatch(text).group(2)
        if close(rid):
            conn.close()
            return
        if ping(rid):
            conn.send(f"hb-{rid}", opcode=0x9)
        ack = acks(rid)
        if ack is not None:
            conn.send(ack)
        if reply(rid):
            sub = next(c for c in box[0].conns if c.request.target.startswith("/replies"))
            sub.send(f'{{"id":"{rid}","reply":"pong"}}')
    box.append(ScriptedEdge(on_ws_message=on_ws_message))
    return box[0]


def _read(d) -> tuple[dict, pd.DataFrame]:
    s = json.loads((d / "rpc-summary.json").read_text())
    log = pd.read_csv(d / "rpc-log.csv", dtype={"id": str})
    assert set(log["outcome"]) <= set(OUTCOMES) and len(log) == s["rpcs"]
    assert sum(s[o] for o in OUTCOMES) == s["rpcs"], s      # exactly one outcome per RPC
    return s, log


def test_every_rpc_is_one_masked_frame_on_its_applications_websocket_and_is_answered(tmp_path):
    """Open loop at a constant 100/s: the schedule is kept to the nanosecond, each RPC is one
    masked text frame on its own application's WebSocket with the template filled with that
    row's device and id, acked and answered; the Upgrades carry the configured path and header."""
    with _relay() as edge:
        r = _run(edge, tmp_path, "--apps", "3", "--rate", "100", "--arrival", "constant",
                 "--window", "2", "--timeout-ms", "1000", "--devices", "100:3,200:2")
        frames = [f for f in edge.ws_frames if f.target == APP_PATH]
        upgrades = [q for q in edge.requests if q.target == APP_PATH]
        errors = list(edge.errors)
    assert r.returncode == 0, r.stderr
    assert errors == []
    s, log = _read(tmp_path)
    assert 199 <= s["rpcs"] <= 201, s
    gaps = log["sched_ns"].diff().dropna()
    assert (gaps - 10_000_000).abs().max() <= 1, gaps.describe()
    assert s["ok"] == s["rpcs"] == s["sent"] and s["overflow"] == 0, s
    assert (log["send_ns"] >= log["sched_ns"]).all() and (log["reply_ns"] > log["send_ns"]).all()
    # one Upgrade per application, to the path, with the header; no HTTP request at all
    assert len(upgrades) == 3 and len(edge.requests) == 3 + 1, [q.target for q in edge.requests]
    assert all(q.headers["origin"] == "http://t.invalid" for q in upgrades)
    # one masked text frame per RPC sent, carrying that row's device and id
    assert len(frames) == s["sent"] and all(f.masked and f.opcode == 1 for f in frames)
    sent = {m.group(2): int(m.group(1)) for m in (FRAME_RE.fullmatch(f.text) for f in frames)}
    assert sent == dict(zip(log["id"], log["device"])), "a frame is not its row's RPC"
    assert set(log["device"]) <= {100, 101, 102, 200, 201}
    # every ack counted as the HTTP path counts its responses
    assert s["post_2xx"] == s["rpcs"] and s["post_202"] == 0 and set(log["status"]) == {200}, s
    assert s["app_disconnects"] == 0 and s["unmatched"] == 0 and s["late_replies"] == 0, s
    assert s["replies_kernel_stamped"] + s["replies_user_stamped"] == s["ok"], s


def test_a_closed_loop_waits_for_the_reply_and_thinks(tmp_path):
    """... and a ping from the server (before some acks) is answered with a masked pong of its
    payload, the acks after it still taken in order."""
    with _relay(ping=lambda rid: rid.endswith("-1")) as edge:
        r = _run(edge, tmp_path, "--apps", "4", "--think-ms", "20:40", "--timeout-ms", "500",
                 "--devices", "0:10")
    assert r.returncode == 0, r.stderr
    s, log = _read(tmp_path)
    assert s["loop"] == "closed" and s["rpcs"] > 100 and s["ok"] == s["rpcs"], s
    assert s["post_2xx"] == s["rpcs"] and s["app_disconnects"] == 0, s
    pongs = sorted(f.text for f in edge.ws_frames if f.opcode == 0xA)
    assert pongs == [f"hb-{a}-1" for a in range(4)], pongs
    assert all(f.masked for f in edge.ws_frames if f.opcode == 0xA)
    # one RPC in flight per application: each sent after the previous one's reply
    for _, g in log.sort_values("send_ns").groupby("app"):
        assert (g["send_ns"].iloc[1:].to_numpy() > g["reply_ns"].iloc[:-1].to_numpy()).all()


def test_an_application_at_its_window_overflows_and_unanswered_rpcs_time_out(tmp_path):
    """Acked, never answered: one application with --window 2 sends two RPCs, the ones due
    while both wait are overflow (never sent), two more once they time out."""
    with _relay(reply=lambda rid: False) as edge:
        r = _run(edge, tmp_path, "--apps", "1", "--rate", "50", "--window", "2",
                 "--timeout-ms", "300", "--devices", "0:4")
    assert r.returncode == 0, r.stderr
    s, log = _read(tmp_path)
    sent = log[log["send_ns"].notna()]
    assert s["overflow"] > 0 and s["ok"] == 0 and s["timeout"] == len(sent) == s["sent"], s
    assert log.loc[log["outcome"] == "overflow", "send_ns"].isna().all()
    t = sent["send_ns"].to_numpy()
    assert max(((t > x - 300_000_000) & (t <= x)).sum() for x in t) == 2
    assert s["answered_per_s"] == 0 and s["sent_per_s"] < s["offered_per_s"], s


def test_an_rpc_whose_ack_has_not_come_is_outstanding_unless_there_are_no_acks(tmp_path):
    """Answered but never acked: with acks expected the first --window RPCs are answered and
    every later one overflows (their acks are still outstanding, as an HTTP request without its
    response); with --no-acks every RPC is sent and answered."""
    runs = {}
    for name, extra in (("acks", []), ("no-acks", ["--no-acks"])):
        d = tmp_path / name
        d.mkdir()
        with _relay(acks=lambda rid: None) as edge:
            r = _run(edge, d, "--apps", "1", "--rate", "50", "--window", "3",
                     "--timeout-ms", "300", "--devices", "0:4", *extra)
        assert r.returncode == 0, r.stderr
        runs[name] = _read(d)[0]
    a, n = runs["acks"], runs["no-acks"]
    assert a["ok"] == a["sent"] == 3 and a["overflow"] == a["rpcs"] - 3, a
    assert n["ok"] == n["rpcs"] == n["sent"] and n["overflow"] == 0 and n["post_2xx"] == 0, n


def test_unheard_and_rejected_acks_are_counted_as_the_http_path_counts_202_and_refusals(tmp_path):
    """The ack text decides: even seq -> {"PUBLISH":0} (nobody subscribed: counted post_202,
    nothing relayed, the RPC times out), seq 1 mod 4 -> an error (rejected at once), the rest
    accepted and answered."""
    def seq(rid: str) -> int:
        return int(rid.split("-")[1])

    def ack(rid: str) -> str:
        return ('{"PUBLISH":0}' if seq(rid) % 2 == 0 else
                '{"PUBLISH":[false,"ERR refused"]}' if seq(rid) % 4 == 1 else '{"PUBLISH":1}')
    with _relay(acks=ack, reply=lambda rid: seq(rid) % 4 == 3) as edge:
        r = _run(edge, tmp_path, "--apps", "2", "--rate", "40", "--window", "8",
                 "--timeout-ms", "200", "--devices", "0:4",
                 "--ack-unheard", '{"PUBLISH":0}', "--ack-rejected", "[false")
    assert r.returncode == 0, r.stderr
    s, log = _read(tmp_path)
    n = log["id"].str.split("-").str[1].astype(int)
    assert (log.loc[n % 2 == 0, "outcome"] == "timeout").all()
    assert (log.loc[n % 2 == 0, "status"] == 202).all()
    assert (log.loc[n % 4 == 1, "outcome"] == "rejected").all()
    assert (log.loc[n % 4 == 1, "status"] == 400).all()
    assert (log.loc[n % 4 == 3, "outcome"] == "ok").all()
    assert s["post_202"] == int((n % 2 == 0).sum()) and s["rejected"] == int((n % 4 == 1).sum())
    assert s["post_2xx"] == s["rpcs"] - s["rejected"], s


def test_a_server_that_closes_an_applications_websocket_loses_that_applications_rpcs(tmp_path):
    """Application 0's WebSocket is closed by the server on its RPC seq 2: that RPC was sent
    and ends lost; application 0's later RPCs are lost unsent (unsent_down); application 1's are
    answered."""
    with _relay(close=lambda rid: rid == "0-2") as edge:
        r = _run(edge, tmp_path, "--apps", "2", "--rate", "100", "--arrival", "constant",
                 "--window", "4", "--timeout-ms", "500", "--devices", "0:4")
    assert r.returncode == 0, r.stderr
    s, log = _read(tmp_path)
    a0, a1 = log[log["app"] == 0], log[log["app"] == 1]
    assert (a1["outcome"] == "ok").all() and len(a1) > 50
    assert list(a0["outcome"].iloc[:2]) == ["ok", "ok"]
    closed = a0[a0["id"] == "0-2"].iloc[0]
    assert closed["outcome"] == "lost" and pd.notna(closed["send_ns"])
    later = a0[a0["sched_ns"] > closed["sched_ns"]]
    assert len(later) > 10 and (later["outcome"] == "lost").all() and later["send_ns"].isna().all()
    assert s["app_disconnects"] == 1 and s["unsent_down"] == len(later) and s["unsent_write"] == 0


@pytest.mark.parametrize("args, message", [
    (["--transport", "ws"], "bad --transport 'ws'"),
    (["--transport", "websocket"], "--transport websocket needs --ws-path"),
    (["--transport", "websocket", "--ws-path", "/a", "--frame", '{"d":{device}}'],
     "bad --frame"),
    (["--transport", "websocket", "--ws-path", "/a", "--frame", '{"id":"{id}"}'], "bad --frame"),
    (["--transport", "websocket", "--ws-path", "/a", "--frame",
      '{"id":"{id}","d":{device},"x":"' + "{id}" * 150 + '"}'], "once every {id} (31)"),
    (["--transport", "websocket", "--ws-path", "/a", "--method", "GET"],
     "--method is for --transport http"),
    (["--transport", "websocket", "--ws-path", "/a", "--body", "x{id}"],
     "--body is for --transport http"),
    (["--ws-path", "/a"], "--ws-path is for --transport websocket"),
    (["--frame", "{id}{device}"], "--frame is for --transport websocket"),
    (["--transport", "websocket", "--ws-path", "a b"], "bad --ws-path"),
    (["--transport", "websocket", "--ws-path", "/a", "--no-acks", "--ack-unheard", "x"],
     "with --no-acks there are none"),
    (["--transport", "websocket", "--ws-path", "/a", "--ws-header", "Bad Name: x"],
     "bad --ws-header"),
])
def test_bad_websocket_options_are_refused_naming_the_option(tmp_path, args, message):
    binary = build("rpc-app", "wot-rpcapp-asan")
    r = subprocess.run([str(binary), "--server", "127.0.0.1:9", "--log-dir", str(tmp_path),
                        "--devices", "0:4", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and message in r.stderr, r.stderr
