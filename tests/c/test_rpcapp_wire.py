"""wot-rpcapp's reply subscription on the wire: a server may send the first WebSocket frames in
the same segment as its 101 (nchan does when a message is published as the subscription
opens). Those bytes are read together with the handshake; they must reach the frame parser,
not be dropped (which desynchronised the stream and ended the subscription: a CI flake of
test_connected_nchan, every RPC to that shard then timing out). A scripted server makes that
segment deterministic."""
import base64
import hashlib
import json
import socket
import threading

import pytest

from testkit.connected import build, missing_prerequisite
from testkit.nginx import free_tcp_port

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _text_frame(payload: bytes) -> bytes:
    assert len(payload) < 126
    return bytes([0x81, len(payload)]) + payload       # FIN + text, unmasked (server side)


class ScriptedEdge:
    """Accepts the reply subscription (answers its Upgrade with the 101 and two frames in one
    send) and the applications' POSTs (202: published, nobody subscribed)."""

    def __init__(self, first_frames: bytes):
        self.first_frames = first_frames
        self.port = free_tcp_port("127.0.0.1")
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket):
        conn.settimeout(0.2)
        buf = b""
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(4096)
                except socket.timeout:
                    continue
                if not data:
                    return
                buf += data
                while b"\r\n\r\n" in buf:
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    lines = head.decode().split("\r\n")
                    fields = {k.lower(): v.strip() for k, _, v in
                              (line.partition(":") for line in lines[1:])}
                    if fields.get("upgrade", "").lower() == "websocket":
                        key = fields["sec-websocket-key"]
                        accept = base64.b64encode(
                            hashlib.sha1((key + GUID).encode()).digest()).decode()
                        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
                                     + accept.encode() + b"\r\n\r\n" + self.first_frames)
                    else:
                        buf = buf[int(fields.get("content-length", "0")):]
                        conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(2)
        self.sock.close()


def test_frames_in_the_101_segment_reach_the_parser(tmp_path):
    binary = build("rpc-app", "wot-rpcapp-asan")
    # an event (no id) and a reply whose RPC does not exist: counted as events_in and as a late
    # reply, so both frames were parsed; the subscription stays open to the end
    frames = _text_frame(b'{"event":"temp"}') + _text_frame(b'{"id":"0-999","reply":"x"}')
    edge = ScriptedEdge(frames)
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
