"""Message framing of chunked connections that does not depend on HTTP chunk boundaries
(docs/CONNECTED.md "Framing"): with `delimiter` set, a chunked body is one stream cut into
messages at the delimiter, so several messages in one chunk and one message split over two
chunks are each answered exactly once, and every chunk the device sends ends with it. Checked
on the scripted edge server's wire and through nginx, which re-chunks what it reads at once."""
import json
import subprocess
import time

import pytest

from testkit.connected import ConnFleet, ConnSpec, missing_prerequisite
from testkit.nginx import Nginx, nginx_path
from testkit.scripted_edge import ScriptedEdge
from tests.c.test_connected_stream import PROXY

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

# one chunk with three messages, then one message split over two chunks, then an empty message
CHUNKS = ['{"id":"1-1"}\n{"method":"status"}\n{"id":"1-2"}\n', '{"id":"1-', '3"}\n', "\n"]


def _replies(edge, protocol):
    bodies = (edge.up_chunks if protocol == "chunked-post"
              else [q.body.decode() for q in edge.requests if q.method == "POST"])
    return [b for b in bodies if b.startswith('{"id"')]


def _run(binary, tmp_path, server, specs, done, timeout=10.0):
    """The fleet attached to `server` until done() or timeout: its conn-summary."""
    fleet = ConnFleet(binary, tmp_path, server, specs).start(attach_timeout=20)
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return fleet.stop()


@pytest.mark.parametrize("protocol", ["chunked-post", "chunked"])
def test_messages_are_cut_at_the_delimiter_not_at_chunks(tmp_path, conn_fleet_bin, protocol):
    def on_open(c):
        for chunk in CHUNKS:
            c.send(chunk)

    specs = [ConnSpec(2, protocol, 8, 1, reply_bytes=32, delimiter="\n")]
    with ScriptedEdge(on_open=on_open) as edge:
        s = _run(conn_fleet_bin, tmp_path, edge.server, specs,
                 lambda: len(_replies(edge, protocol)) >= 6)
    assert not edge.errors, edge.errors
    replies = _replies(edge, protocol)
    ids = sorted((json.loads(r)["device"], json.loads(r)["id"]) for r in replies)
    assert ids == [(d, f"1-{k}") for d in (8, 9) for k in (1, 2, 3)], replies
    if protocol == "chunked-post":            # each chunk up is one message and its delimiter
        assert {len(r) for r in replies} == {33} and all(r.endswith("\n") for r in replies)
    assert s["msgs_in"] == 8 and s["rpcs_in"] == 6 and s["no_id"] == 2, s
    assert s["replies"] == 6 and sum(s["disconnects"].values()) == 0, s


def test_a_message_that_never_ends_is_a_protocol_disconnect(tmp_path, conn_fleet_bin):
    def on_open(c):               # 1 MiB + 64 KiB without the delimiter, in 64 KiB chunks
        for _ in range(17):
            c.send("x" * 65536)

    specs = [ConnSpec(1, "chunked-post", 3, 1, delimiter="\r\n")]
    with ScriptedEdge(on_open=on_open) as edge:
        s = _run(conn_fleet_bin, tmp_path, edge.server, specs, lambda: False, timeout=2)
    assert s["disconnects"]["protocol"] == 1 and s["msgs_in"] == 0, s


@pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")
def test_rpcs_nginx_merges_into_one_chunk_are_all_answered(tmp_path, conn_fleet_bin):
    def on_open(c):               # three RPCs at once: nginx may pass them as one chunk
        for i in range(3):
            c.send('{"id":"5-%d"}\n' % i)

    specs = [ConnSpec(2, "chunked-post", 8, 2, reply_bytes=32, delimiter="\n")]
    proxy = Nginx()
    with ScriptedEdge(on_open=on_open) as edge:
        proxy.conf = PROXY % edge.server
        with proxy:
            s = _run(conn_fleet_bin, tmp_path, f"127.0.0.1:{proxy.port}", specs,
                     lambda: len(_replies(edge, "chunked-post")) >= 6)
    assert not edge.errors, edge.errors
    assert s["rpcs_in"] == 6 and s["replies"] == 6, s
    assert sum(s["disconnects"].values()) == 0, s


def test_a_websocket_row_refuses_a_delimiter(tmp_path, conn_fleet_bin):
    f = ConnFleet(conn_fleet_bin, tmp_path, "127.0.0.1:9",
                  [ConnSpec(1, "websocket", delimiter="\n")]).file
    r = subprocess.run([str(conn_fleet_bin), "--connections", str(f), "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"{f}:2:" in r.stderr and "bad delimiter" in r.stderr, r.stderr
