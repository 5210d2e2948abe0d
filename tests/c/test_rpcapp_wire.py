"""wot-rpcapp's reply subscription on the wire: a server may send the first WebSocket frames in
the same segment as its 101 (nchan does when a message is published as the subscription
opens). Those bytes are read together with the handshake; they must reach the frame parser,
not be dropped (which desynchronised the stream and ended the subscription: a CI flake of
test_connected_nchan, every RPC to that shard then timing out). A scripted server makes that
segment deterministic."""
import json

import pytest

from testkit.connected import build, missing_prerequisite
from testkit.scripted_edge import ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


def _text_frame(payload: bytes) -> bytes:
    assert len(payload) < 126
    return bytes([0x81, len(payload)]) + payload       # FIN + text, unmasked (server side)


def _against_scripted_edge(binary, frames: bytes, log_dir, *args: str):
    """wot-rpcapp for 1 s against a server whose 101 carries ``frames`` and that answers
    every RPC's POST 202 (published, nobody subscribed)."""
    import subprocess
    edge = ScriptedEdge(first_frames=frames, post_status=202)
    try:
        return subprocess.run([str(binary), "--server", f"127.0.0.1:{edge.port}", "--devices",
                               "0:4", "--log-dir", str(log_dir), "--shards", "1", "--think-ms",
                               "100:200", "--timeout-ms", "200", "--duration-s", "1", *args],
                              capture_output=True, text=True, timeout=30)
    finally:
        edge.close()


def test_frames_in_the_101_segment_reach_the_parser(tmp_path):
    binary = build("rpc-app", "wot-rpcapp-asan")
    # an event (no id) and a reply whose RPC does not exist: counted as events_in and as a late
    # reply, so both frames were parsed; the subscription stays open to the end
    frames = _text_frame(b'{"event":"temp"}') + _text_frame(b'{"id":"0-999","reply":"x"}')
    r = _against_scripted_edge(binary, frames, tmp_path, "--apps", "1")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    assert s["events_in"] == 1 and s["late_replies"] == 1, s
    assert s["sub_disconnects"] == 0 and s["unmatched"] == 0, (s, r.stderr)
    assert s["rpcs"] >= 1 and s["timeout"] == s["rpcs"], s    # 202s: nobody answers


def test_one_of_several_processes_counts_the_others_replies_apart(tmp_path):
    """A connected run's cells share the reply channels: with --first-app 10 --apps 2
    --apps-total 20, a reply for application 3 is another process's (others), one for 25 names
    no application (unmatched), one for 11 is this process's (late: no such RPC pending); the
    RPCs it sends carry the global ids 10-, 11-."""
    binary = build("rpc-app", "wot-rpcapp-asan")
    frames = (_text_frame(b'{"id":"3-1","reply":"x"}') + _text_frame(b'{"id":"25-1","r":"x"}')
              + _text_frame(b'{"id":"11-999","reply":"x"}'))
    r = _against_scripted_edge(binary, frames, tmp_path, "--apps", "2", "--first-app", "10",
                               "--apps-total", "20")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    assert (s["others"], s["unmatched"], s["late_replies"], s["first_app"]) == (1, 1, 1, 10), s
    import pandas as pd
    log = pd.read_csv(tmp_path / "rpc-log.csv", dtype={"id": str})
    assert len(log) and set(log["app"]) <= {10, 11}
    assert all(i.split("-")[0] == str(a) for i, a in zip(log["id"], log["app"]))


def test_apps_total_below_this_processs_ids_is_bad_input(tmp_path):
    import subprocess
    binary = build("rpc-app", "wot-rpcapp-asan")
    r = subprocess.run([str(binary), "--server", "127.0.0.1:9", "--devices", "0:4", "--log-dir",
                        str(tmp_path), "--apps", "5", "--first-app", "10", "--apps-total", "12"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--apps-total 12 below --first-app + --apps (15)" in r.stderr
