"""What connected devices (wot-fleet-conn) and applications (wot-rpcapp) put on the wire
beyond the path, checked on the bytes a scripted server receives (testkit.scripted_edge;
docs/CONNECTED.md): a device group's attach headers and attach message, rendered per device,
for WebSocket and chunked devices; the RPC's id where the config places it, in the
application's request (body, path or a header) and in a chunked device's reply (body, header
or the reply POST's target); an id found after a marker in a message the server wrapped and
escaped (webdis's JSON)."""
import json
import subprocess

import pytest

from testkit.connected import ConnFleet, ConnSpec, missing_prerequisite
from testkit.scripted_edge import ScriptedEdge

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

HEADERS = {"Origin": "http://edge.test", "X-Device": "{device}/{shard}"}
ATTACH = '["SUBSCRIBE","rpc.{device}"]'


def posts(edge: ScriptedEdge) -> list:
    return [r for r in edge.requests if r.method == "POST"]


def test_attach_headers_and_message_are_on_the_wire(tmp_path, conn_fleet_bin):
    specs = [ConnSpec(1, "websocket", 5, 2, attach_headers=HEADERS, attach_body=ATTACH),
             ConnSpec(1, "chunked", 6, 2, attach_headers=HEADERS, attach_body=ATTACH)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        edge.wait_for(lambda: edge.ws_messages and posts(edge))
        s = fleet.stop()
    assert not edge.errors, edge.errors
    ws = next(r for r in edge.requests if "upgrade" in r.headers)
    assert ws.target == "/dev/5/1"
    assert ws.head.endswith("\r\nOrigin: http://edge.test\r\nX-Device: 5/1"), ws.head
    assert edge.ws_messages == ['["SUBSCRIBE","rpc.5"]']          # the first frame, once
    sub = next(r for r in edge.requests if r.method == "GET" and "upgrade" not in r.headers)
    assert sub.target == "/dev/6/0" and sub.headers["x-device"] == "6/0", sub.head
    assert sub.headers["origin"] == "http://edge.test"
    (attach,) = posts(edge)                       # a chunked device's first POST, once
    assert attach.target == "/up/6/0" and attach.body == b'["SUBSCRIBE","rpc.6"]', attach
    assert "x-device" not in attach.headers       # the headers are the attach request's
    assert s["attaches"] == 2 and sum(s["disconnects"].values()) == 0, s


def test_without_attach_settings_nothing_extra_is_sent(tmp_path, conn_fleet_bin):
    specs = [ConnSpec(1, "websocket", 5, 1), ConnSpec(1, "chunked", 6, 1)]
    with ScriptedEdge() as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs).start(attach_timeout=20)
        edge.wait_for(lambda: len(edge.requests) >= 2)
        s = fleet.stop()
    assert edge.ws_messages == [] and posts(edge) == [], edge.requests
    ws = next(r for r in edge.requests if "upgrade" in r.headers)
    assert ws.head.endswith("Sec-WebSocket-Version: 13"), ws.head
    assert s["attaches"] == 2


@pytest.mark.parametrize("place", ["body", "header", "path"])
def test_a_chunked_reply_carries_the_id_where_configured(tmp_path, conn_fleet_bin, place):
    # the RPC as a relay that wraps it delivers it (webdis: the PUBLISH's message in JSON);
    # the device finds the id after the marker and copies it into its reply
    rpc = '{"SUBSCRIBE":["message","rpc.6","rpc:3-9"]}'
    reply_path = "/up/{device}/{shard}/{id}" if place == "path" else "/up/{device}/{shard}"
    specs = [ConnSpec(1, "chunked", 6, 1, reply_path=reply_path, service_us=1000)]
    with ScriptedEdge(on_open=lambda c: c.send(rpc)) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server, specs, "--id-marker", "rpc:",
                          "--reply-id", place, "--id-header", "X-Rpc-Id").start(attach_timeout=20)
        edge.wait_for(lambda: posts(edge))
        s = fleet.stop()
    assert not edge.errors, edge.errors
    (reply,) = posts(edge)
    in_body, in_target = b"3-9" in reply.body, "3-9" in reply.target
    if place == "body":
        assert b'"id":"3-9"' in reply.body and not in_target and "x-rpc-id" not in reply.headers
    elif place == "header":
        assert reply.headers["x-rpc-id"] == "3-9" and not in_body and not in_target, reply
    else:
        assert reply.target == "/up/6/0/3-9" and not in_body and "x-rpc-id" not in reply.headers
    assert len(reply.body) == 256, reply.body       # the configured reply size either way
    assert s["rpcs_in"] == 1 and s["replies"] == 1 and s["no_id"] == 0, s


def test_a_websocket_reply_carries_the_id_in_its_frame(tmp_path, conn_fleet_bin):
    with ScriptedEdge(on_open=lambda c: c.send('{"id":"4-2","method":"ping"}')) as edge:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, edge.server,
                          [ConnSpec(1, "websocket", 5, 1)]).start(attach_timeout=20)
        edge.wait_for(lambda: edge.ws_messages)
        s = fleet.stop()
    (reply,) = edge.ws_messages
    assert reply.startswith('{"id":"4-2","device":5,') and len(reply) == 256, reply
    assert s["replies"] == 1


def test_a_websocket_device_refuses_a_reply_id_outside_the_body(tmp_path, conn_fleet_bin):
    f = ConnFleet(conn_fleet_bin, tmp_path, "127.0.0.1:9", [ConnSpec(1, "websocket")]).file
    r = subprocess.run([str(conn_fleet_bin), "--connections", str(f), "--log-dir", str(tmp_path),
                        "--reply-id", "header"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"{f}:2:" in r.stderr and "--reply-id body" in r.stderr, r.stderr


def _rpcapp(binary, edge: ScriptedEdge, out, *args: str) -> dict:
    r = subprocess.run([str(binary), "--server", edge.server, "--devices", "3:1", "--log-dir",
                        str(out), "--apps", "2", "--shards", "1", "--think-ms", "20:40",
                        "--timeout-ms", "1000", "--duration-s", "2", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "rpc-summary.json").read_text())


APP_PLACES = {
    # where the id goes: the application's options, and the id as the server reads it there
    "body": (["--body", '{"id":"{id}","method":"ping"}'],
             lambda q: json.loads(q.body)["id"]),
    "path": (["--rpc-path", "/PUBLISH/rpc.%u/rpc:{id}", "--body", '{"method":"ping"}'],
             lambda q: q.target.rsplit(":", 1)[1]),
    "header": (["--id-header", "X-Rpc-Id", "--body", '{"method":"ping"}'],
               lambda q: q.headers["x-rpc-id"]),
}


@pytest.mark.parametrize("place", sorted(APP_PLACES))
def test_the_application_puts_the_id_where_configured(tmp_path, rpcapp_bin, place):
    args, id_of = APP_PLACES[place]
    subs, seen = [], []

    def on_post(q):
        rid = id_of(q)
        others = [q.body.decode(), q.target, q.headers.get("x-rpc-id", "")]
        where = {"body": 0, "path": 1, "header": 2}[place]
        assert all(rid not in t for i, t in enumerate(others) if i != where), q
        seen.append(rid)
        # the reply as webdis relays it: the device's JSON inside its own, quotes escaped
        subs[0].send('{"SUBSCRIBE":["message","reply.0","{\\"id\\":\\"%s\\",\\"device\\":3}"]}'
                      % rid)

    with ScriptedEdge(on_open=subs.append, on_post=on_post) as edge:
        s = _rpcapp(rpcapp_bin, edge, tmp_path, *args, "--id-marker", 'id\\":\\"')
    assert not edge.errors, edge.errors
    assert s["rpcs"] >= 4 and s["ok"] == s["rpcs"] == len(seen), s
    assert s["unmatched"] == 0 and s["late_replies"] == 0, s
    assert sorted(seen) == sorted(set(seen))                    # one id per RPC


def test_an_rpc_without_an_id_is_refused(tmp_path, rpcapp_bin):
    r = subprocess.run([str(rpcapp_bin), "--server", "127.0.0.1:9", "--devices", "0:1",
                        "--log-dir", str(tmp_path), "--body", '{"method":"ping"}'],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "carries no id" in r.stderr, r.stderr
