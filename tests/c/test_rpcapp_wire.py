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


def test_frames_in_the_101_segment_reach_the_parser(tmp_path):
    binary = build("rpc-app", "wot-rpcapp-asan")
    # an event (no id) and a reply whose RPC does not exist: counted as events_in and as a late
    # reply, so both frames were parsed; the subscription stays open to the end
    frames = _text_frame(b'{"event":"temp"}') + _text_frame(b'{"id":"0-999","reply":"x"}')
    edge = ScriptedEdge(first_frames=frames, post_status=202)   # 202: published, nobody subscribed
    try:
        import subprocess
        r = subprocess.run([str(binary), "--server", f"127.0.0.1:{edge.port}", "--devices", "0:4",
                            "--log-dir", str(tmp_path), "--apps", "1", "--shards", "1",
                            "--think-ms", "100:200", "--timeout-ms", "200", "--duration-s", "1"],
                           capture_output=True, text=True, timeout=30)
    finally:
        edge.close()
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "rpc-summary.json").read_text())
    assert s["events_in"] == 1 and s["late_replies"] == 1, s
    assert s["sub_disconnects"] == 0 and s["unmatched"] == 0, (s, r.stderr)
    assert s["rpcs"] >= 1 and s["timeout"] == s["rpcs"], s    # 202s: nobody answers
