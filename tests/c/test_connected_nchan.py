"""Connected devices against a real third-party edge server (docs/CONNECTED.md): wot-fleet's
WebSocket and chunked-HTTP device connections held by Debian's nginx + nchan, RPCs from
wot-rpcapp relayed through it and matched by id, and disconnects attributed to their cause.
Skips, saying why, without nginx / libnginx-mod-nchan / libwslay-dev (make build installs
them)."""
import json
import subprocess
import time

import pytest

from testkit.connected import (CONN_HEADER, ConnFleet, ConnSpec, NchanServer,
                               missing_prerequisite, run_rpcapp)

why = missing_prerequisite()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


def test_rpcs_round_trip_over_websocket_and_chunked_devices(tmp_path, conn_fleet_bin, rpcapp_bin):
    shards = 2
    specs = [ConnSpec(30, "websocket", 0, shards, heartbeat_ms=300, event_ms=700,
                      service_us=2000, reply_bytes=256),
             ConnSpec(30, "chunked", 30, shards, heartbeat_ms=300, event_ms=700,
                      service_us=2000, reply_bytes=1024)]
    with NchanServer() as srv:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, srv.server, specs, "--conn-loops", "2").start()
        app = run_rpcapp(rpcapp_bin, tmp_path / "app", srv.server, (0, 60), apps=30,
                         shards=shards, duration_s=3, think_ms=(20, 60), timeout_ms=3000)
        s = fleet.stop()
    # every RPC answered, through the server, by the device it was sent to
    assert app["rpcs"] > 300, json.dumps({"app": app, "fleet": s})
    outcomes = {k: app.get(k) for k in ("rpcs", "ok", "timeout", "lost", "rejected", "unmatched",
                                        "overflow", "unsent_down", "unsent_write",
                                        "late_replies", "post_202", "app_disconnects",
                                        "sub_disconnects")}
    assert app["ok"] == app["rpcs"], (outcomes, s.get("replies"), s.get("rpcs_in"))
    assert app["timeout"] == app["lost"] == app["rejected"] == app["unmatched"] == 0, outcomes
    assert s["rpcs_in"] == app["rpcs"] and s["replies"] == app["rpcs"], s
    assert s["replies_lost"] == 0 and s["no_id"] == 0
    # held for the whole run: nothing dropped, every device still attached once
    assert s["attached_at_exit"] == 60 and s["attaches"] == 60, s
    assert sum(s["disconnects"].values()) == 0 and sum(s["connect_failures"].values()) == 0, s
    # heartbeats (ping frames answered by pongs for WebSocket, POSTs for chunked) and events
    assert s["heartbeats"] >= 60 * 5 and s["pongs"] >= 30 * 5, s
    assert s["events"] > 60 and app["events_in"] > 0, (s, app)
    assert s["posts_rejected"] == 0
    # the device log and the application's log meet by id: device arrival after the send,
    # reply after the device sent it, and the device's service time in between
    dev = {r["id"]: r for r in fleet.log_rows()}
    import csv
    with (tmp_path / "app" / "rpc-log.csv").open() as fp:
        rows = list(csv.DictReader(fp))
    assert len(rows) == app["rpcs"]
    for r in rows:
        d = dev[r["id"]]
        assert d["outcome"] == "sent" and int(d["device"]) == int(r["device"])
        assert int(r["send_ns"]) < int(d["arrival_ns"]) <= int(d["due_ns"]) <= int(d["end_ns"])
        assert int(d["due_ns"]) - int(d["arrival_ns"]) == 2_000_000
        assert int(d["sent_ns"]) < int(r["reply_ns"])


def test_server_restart_is_counted_as_the_servers_and_devices_reconnect(tmp_path, conn_fleet_bin):
    specs = [ConnSpec(10, "websocket", 0, 1, reconnect_ms=100),
             ConnSpec(10, "chunked", 10, 1, reconnect_ms=100)]
    srv = NchanServer().start()
    try:
        fleet = ConnFleet(conn_fleet_bin, tmp_path, srv.server, specs).start()
        srv.stop()                       # every connection ends on the server's side
        time.sleep(0.5)
        srv.start()
        time.sleep(2.0)                  # reconnects every 100-200 ms, refused while it was down
        s = fleet.stop()
    finally:
        srv.__exit__()
    d = s["disconnects"]
    assert d["server_closed"] + d["reset"] >= 20 and d["testbed"] == 0 and d["protocol"] == 0, s
    assert s["connect_failures"]["testbed"] == 0, s
    assert s["attached_at_exit"] == 20 and s["attaches"] >= 40, s


BAD = {
    "header": ("index,name\n0,a\n", 1, "header"),
    "protocol": (CONN_HEADER + "\n0,a,mqtt,127.0.0.1:80,,/d,,0,0,0,32,0,,\n", 2, "bad protocol"),
    "server": (CONN_HEADER + "\n0,a,websocket,127.0.0.1,,/d,,0,0,0,32,0,,\n", 2, "bad server"),
    "reply_path on websocket": (CONN_HEADER + "\n0,a,websocket,127.0.0.1:80,,/d,/r,0,0,0,32,0,,\n",
                                2, "bad reply_path"),
    "reply_bytes": (CONN_HEADER + "\n0,a,websocket,127.0.0.1:80,,/d,,0,0,0,8,0,,\n", 2,
                    "bad reply_bytes"),
    "attach_headers": (CONN_HEADER + "\n0,a,websocket,127.0.0.1:80,,/d,,0,0,0,32,0,"
                       "X-A:%201%0D%0Abad,\n", 2, "bad attach_headers"),
    "attach_body": (CONN_HEADER + "\n0,a,websocket,127.0.0.1:80,,/d,,0,0,0,32,0,,a%00b\n", 2,
                    "bad attach_body"),
    "reply_path {id} without --reply-id path": (
        CONN_HEADER + "\n0,a,chunked,127.0.0.1:80,,/d,/up/{id},0,0,0,32,0,,\n", 2,
        "bad reply_path"),
    "duplicate index": (CONN_HEADER + "\n0,a,websocket,127.0.0.1:80,,/d,,0,0,0,32,0,,\n"
                        "0,b,websocket,127.0.0.1:80,,/d,,0,0,0,32,0,,\n", 3,
                        "index already used on line 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_connections_file_names_file_and_line(tmp_path, conn_fleet_bin, case):
    text, line, words = BAD[case]
    f = tmp_path / "c.csv"
    f.write_text(text)
    r = subprocess.run([str(conn_fleet_bin), "--connections", str(f), "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert f"{f}:{line}:" in r.stderr and words in r.stderr and "expected" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
