"""The study's attach (Cometa; docs/CONNECTED.md), protocol chunked-post: each device holds ONE
HTTP/1.1 POST open, its chunked request body carrying the attach message, heartbeats, events and
replies upstream as chunks, its chunked response body the RPCs downstream. Checked on the bytes
the scripted edge server (testkit.scripted_edge) reads, the only server here that takes a
streamed request body: nchan and webdis read a publish's whole body before they act on it."""
import json
import subprocess
import threading
import time

import pytest

from testkit.connected import ConnFleet, ConnSpec, missing_prerequisite
from testkit.nginx import HEAD, Nginx, nginx_path
from testkit.scripted_edge import ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

HEADERS = {"Origin": "http://edge.test", "X-Device": "{device}/{shard}"}


def test_one_held_open_post_carries_everything(tmp_path, conn_fleet_bin):
    rpcs = ['{"id":"7-1","method":"ping"}', '{"method":"status"}', '{"id":"7-2"}']

    def on_open(c):
        for m in rpcs:
            c.send(m)

    specs = [ConnSpec(2, "chunked-post", 8, 2, heartbeat_ms=100, event_ms=100, reply_bytes=32,
                      attach_headers=HEADERS, attach_body='{"attach":"{device}"}')]
    with ScriptedEdge(on_open=on_open) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        # events are Poisson (mean 100 ms per device): wait for one too, rather than hope that
        # one came while the replies and heartbeats did (none did once in a fresh-clone run)
        edge.wait_for(lambda: sum('"id":' in m for m in edge.up_chunks) >= 4
                      and sum('"hb":1' in m for m in edge.up_chunks) >= 4
                      and any('"event":' in m for m in edge.up_chunks))
        s = fleet.stop()
    assert not edge.errors, edge.errors
    assert len(edge.requests) == 2, edge.requests         # one request per device, nothing else
    for q in edge.requests:
        dev = q.target.split("/")[2]
        assert q.method == "POST" and q.target == f"/dev/{dev}/{int(dev) % 2}", q.head
        assert q.headers["transfer-encoding"] == "chunked" and "content-length" not in q.headers
        assert q.headers["x-device"] == f"{dev}/{int(dev) % 2}", q.head
    attaches = [m for m in edge.up_chunks if m.startswith('{"attach"')]
    assert sorted(attaches) == ['{"attach":"8"}', '{"attach":"9"}'], edge.up_chunks
    replies = [json.loads(m) for m in edge.up_chunks if m.startswith('{"id"')]
    assert sorted((r["device"], r["id"]) for r in replies) == \
        [(8, "7-1"), (8, "7-2"), (9, "7-1"), (9, "7-2")], replies
    sizes = {len(m) for m in edge.up_chunks if not m.startswith('{"attach"')}
    assert sizes == {32}, sizes                          # replies, heartbeats, events: the size
    assert s["attaches"] == 2 and s["rpcs_in"] == 4 and s["no_id"] == 2, s
    assert s["replies"] == 4 and s["heartbeats"] >= 4 and s["events"] >= 1, s
    assert sum(s["disconnects"].values()) == 0, s


# nginx as a reverse proxy that streams both ways (it relays nothing: the scripted server
# behind it answers); %s: that server, then Nginx fills {host}/{port} ({{ }}: braces)
PROXY = HEAD + """  server {{
    listen {host}:{port};
    location / {{ proxy_pass http://%s; proxy_http_version 1.1; proxy_request_buffering off;
                  proxy_buffering off; proxy_read_timeout 60s; }}
  }}
}}
"""


@pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")
def test_the_held_open_post_passes_a_streaming_nginx_proxy(tmp_path, conn_fleet_bin):
    def on_open(c):               # RPCs apart in time: nginx re-chunks what it reads at once
        def rpcs():
            for i in range(3):
                time.sleep(0.3)
                c.send('{"id":"5-%d"}' % i)
        threading.Thread(target=rpcs, daemon=True).start()

    specs = [ConnSpec(2, "chunked-post", 8, 2, heartbeat_ms=200, reply_bytes=32,
                      attach_body='{"attach":"{device}"}')]
    with ScriptedEdge(on_open=on_open) as edge:
        proxy = Nginx()
        proxy.conf = PROXY % edge.server
        with proxy:
            fleet = ConnFleet(conn_fleet_bin, tmp_path, f"127.0.0.1:{proxy.port}", specs)
            fleet.start(attach_timeout=20)
            edge.wait_for(lambda: sum(m.startswith('{"id"') for m in edge.up_chunks) >= 6)
            s = fleet.stop()
    assert not edge.errors, edge.errors
    assert sorted(q.headers["transfer-encoding"] for q in edge.requests) == ["chunked"] * 2
    assert sorted(m for m in edge.up_chunks if m.startswith('{"attach"')) == \
        ['{"attach":"8"}', '{"attach":"9"}'], edge.up_chunks     # each chunk passed as it came
    assert {len(m) for m in edge.up_chunks if not m.startswith('{"attach"')} == {32}
    assert s["rpcs_in"] == 6 and s["replies"] == 6 and s["heartbeats"] >= 2, s
    assert sum(s["disconnects"].values()) == 0, s


def test_a_server_close_is_attributed_and_the_device_reattaches(tmp_path, conn_fleet_bin):
    opened = []

    def on_open(c):
        opened.append(c)
        if len(opened) == 1:      # the first session: closed by the server after the attach
            threading.Timer(0.2, c.sock.close).start()

    specs = [ConnSpec(1, "chunked-post", 3, 1, reconnect_ms=100, attach_body="hello")]
    with ScriptedEdge(on_open=on_open) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        edge.wait_for(lambda: len(opened) >= 2)
        s = fleet.stop()
    assert len(opened) >= 2 and edge.up_chunks.count("hello") == len(opened), edge.up_chunks
    assert s["attaches"] == len(opened), s
    assert s["disconnects"]["server_closed"] + s["disconnects"]["reset"] >= 1, s
    assert s["disconnects"]["testbed"] == 0 and s["disconnects"]["protocol"] == 0, s


@pytest.mark.parametrize("edge_args", [{"held_status": 403}, {"read_held": False}])
def test_a_refused_or_stalled_attach_is_the_servers_protocol_disconnect(tmp_path, conn_fleet_bin,
                                                                         edge_args):
    # 403: not a chunked 200; a server that never reads the body: the device's unsent chunks
    # pass its backlog's cap (256 KiB; 64 KiB events every 1 ms) and it gives up
    specs = [ConnSpec(1, "chunked-post", 4, 1, event_ms=1, reply_bytes=65536)]
    with ScriptedEdge(**edge_args) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(wait=False)
        edge.wait_for(lambda: edge.requests)
        time.sleep(3)             # 403: at once; stalled: ~200 MB offered, far past the cap
        s = fleet.stop()
    assert len(edge.requests) == 1, edge.requests     # no reconnect (reconnect_ms 0)
    assert s["disconnects"]["protocol"] == 1 and s["disconnects"]["testbed"] == 0, s
    assert s["replies_lost"] == 0 and s["attaches"] == (0 if "held_status" in edge_args else 1), s


def test_a_chunked_post_device_refuses_a_reply_id_outside_the_body(tmp_path, conn_fleet_bin):
    f = ConnFleet(conn_fleet_bin, tmp_path, "127.0.0.1:9", [ConnSpec(1, "chunked-post")]).file
    r = subprocess.run([str(conn_fleet_bin), "--connections", str(f), "--log-dir", str(tmp_path),
                        "--reply-id", "header"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"{f}:2:" in r.stderr and "chunked-post" in r.stderr, r.stderr
