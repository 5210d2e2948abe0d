"""wot-rpcapp's open loop (docs/CONNECTED.md "Open-loop applications") against a scripted
server: RPCs on the configured schedule whatever the replies, each row stamped with its
scheduled time and its send, at most --window outstanding per application (the next one due
is not sent and ends as overflow), exactly one outcome per RPC; a cell's device ranges and
reply shards (--devices FIRST:COUNT,..., --first-shard)."""
import json
import re
import subprocess

import pandas as pd
import pytest

from testkit.connected import build, missing_prerequisite
from testkit.scripted_edge import ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

OUTCOMES = {"ok", "timeout", "rejected", "lost", "overflow"}


def _run(edge: ScriptedEdge, log_dir, *args: str) -> subprocess.CompletedProcess:
    binary = build("rpc-app", "wot-rpcapp-asan")
    return subprocess.run([str(binary), "--server", edge.server, "--log-dir", str(log_dir),
                           "--duration-s", "2", *args], capture_output=True, text=True,
                          timeout=60)


def _replying(edge_box: list) -> ScriptedEdge:
    """A server that relays every RPC's reply at once down the process's one subscription."""
    def on_post(req):
        rid = re.search(r'"id":"([0-9]+-[0-9]+)"', req.body.decode()).group(1)
        edge_box[0].conns[0].send(f'{{"id":"{rid}","reply":"pong"}}')
    edge_box.append(ScriptedEdge(on_post=on_post))
    return edge_box[0]


def test_open_loop_keeps_its_constant_schedule_and_every_rpc_is_answered(tmp_path):
    box: list = []
    with _replying(box) as edge:
        r = _run(edge, tmp_path, "--apps", "4", "--rate", "100", "--arrival", "constant",
                 "--window", "2", "--timeout-ms", "1000", "--devices", "100:3,200:2",
                 "--shards", "2", "--first-shard", "5")
        targets = sorted(q.target for q in edge.requests if q.method == "GET")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    log = pd.read_csv(tmp_path / "rpc-log.csv", dtype={"id": str})
    assert (s["loop"], s["arrival"], s["window"]) == ("open", "constant", 2)
    assert set(log["outcome"]) <= OUTCOMES and len(log) == s["rpcs"]
    assert sum(s[o] for o in OUTCOMES) == s["rpcs"]
    # 2 s at 100/s, constant: 200 scheduled (±1 for the random phase), 10 ms apart
    assert 199 <= s["rpcs"] <= 201, s
    gaps = log["sched_ns"].diff().dropna()
    assert (gaps - 10_000_000).abs().max() <= 1, gaps.describe()
    assert s["ok"] == s["rpcs"] and s["overflow"] == 0, s
    assert (log["send_ns"] >= log["sched_ns"]).all() and (log["reply_ns"] > log["send_ns"]).all()
    # the applications called only the given ranges and subscribed to shards 5 and 6
    assert set(log["device"]) <= {100, 101, 102, 200, 201} and len(set(log["device"])) == 5
    assert targets == ["/replies/5", "/replies/6"], targets
    assert s["send_lag_ns"]["p50"] < 50_000_000, s["send_lag_ns"]


def test_an_application_at_its_window_does_not_send_the_next_rpc(tmp_path):
    """Nobody answers (every POST 200, no reply): one application with --window 2 sends two
    RPCs, the ones due while both wait are overflow, two more once they time out."""
    with ScriptedEdge() as edge:
        r = _run(edge, tmp_path, "--apps", "1", "--rate", "50", "--window", "2",
                 "--timeout-ms", "300", "--devices", "0:4")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    log = pd.read_csv(tmp_path / "rpc-log.csv", dtype={"id": str})
    assert sum(s[o] for o in OUTCOMES) == s["rpcs"] == len(log)
    sent = log[log["send_ns"].notna()]
    assert s["overflow"] > 0 and s["ok"] == 0 and s["timeout"] == len(sent), s
    assert (log.loc[log["outcome"] == "overflow", "send_ns"].isna()).all()
    # at every send, at most 2 RPCs sent within the last timeout are still outstanding
    t = sent["send_ns"].to_numpy()
    window = [((t > x - 300_000_000) & (t <= x)).sum() for x in t]
    assert max(window) == 2, window
    assert len(set(log["id"])) == len(log)          # one id per scheduled RPC
    # nothing answered: the throughput is 0 whatever was offered, each rate by its own rows
    assert s["answered_per_s"] == 0 and s["measured_ok"] == 0, s
    assert s["offered_per_s"] == pytest.approx(s["measured"] / s["measured_s"], abs=1e-3)
    assert s["sent_per_s"] == pytest.approx(len(sent) / s["measured_s"], abs=1e-3)
    assert s["sent_per_s"] < s["offered_per_s"] and s["sent"] == len(sent) == s["measured_sent"]


def test_a_request_whose_write_fails_is_unsent_not_sent(tmp_path):
    """A server that never reads (its listening socket never accepts, a tiny receive buffer):
    the application's writes fill the socket, the first that does not go whole is not sent —
    no send_ns, counted unsent_write, never in sent — and its connection ends: the RPCs it had
    sent are lost (sent, reset), the later ones unsent_down."""
    import socket
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    with srv:
        binary = build("rpc-app", "wot-rpcapp-asan")
        r = subprocess.run([str(binary), "--server", f"127.0.0.1:{srv.getsockname()[1]}",
                            "--log-dir", str(tmp_path), "--duration-s", "1", "--apps", "1",
                            "--rate", "1000", "--arrival", "constant", "--window", "1024",
                            "--timeout-ms", "300", "--devices", "0:4",
                            "--body", '{"id":"{id}","pad":"' + "x" * 3000 + '"}'],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    log = pd.read_csv(tmp_path / "rpc-log.csv", dtype={"id": str})
    assert sum(s[o] for o in OUTCOMES) == s["rpcs"] == len(log)
    assert s["unsent_write"] == 1 and s["app_disconnects"] == 1, s
    sent = log["send_ns"].notna()
    assert s["sent"] == int(sent.sum()) > 0, s
    lost = log["outcome"] == "lost"
    assert int((lost & ~sent).sum()) == s["unsent_down"] + s["unsent_write"], s
    assert int((lost & sent).sum()) == s["lost"] - s["unsent_down"] - s["unsent_write"]


@pytest.mark.parametrize("args, message", [
    (["--rate", "0"], "bad --rate '0'"),
    (["--rate", "10", "--arrival", "gamma"], "bad --arrival 'gamma'"),
    (["--window", "3"], "--window is for the open loop"),
    (["--devices", "0:4,5:0"], "bad --devices '0:4,5:0'"),
])
def test_bad_open_loop_input_is_refused_naming_the_option(tmp_path, args, message):
    binary = build("rpc-app", "wot-rpcapp-asan")
    argv = [str(binary), "--server", "127.0.0.1:9", "--log-dir", str(tmp_path)]
    if "--devices" not in args:
        argv += ["--devices", "0:4"]
    r = subprocess.run(argv + args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and message in r.stderr, r.stderr
