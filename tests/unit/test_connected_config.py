"""Connected devices through config and layout (wotbench.config.connected,
wotbench.connected.layout): the study's config loads, what connected groups cannot have is
refused naming the key, engines and the edge server's workers are sized by the descriptor
limit, and the connections file rows are what wot-fleet reads (CONTRACTS §3c)."""
from pathlib import Path

import pytest

from wotbench.config.connected import connection_rows, connections_header, reply_size_of
from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.connected.layout import make_layout
from wotbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EDGE = {"command": ["nginx", "-c", "{config}"],
        "config_template": str(ROOT / "configs" / "attached-devices-nchan.conf")}
WS = {"group": "m", "count": 10, "protocol": "websocket", "connection": {}}


def cfg(*groups, **top):
    top.setdefault("edge_server", EDGE)
    return config_from_dict({"name": "t", "devices": list(groups), **top})


def problems(*groups, **top) -> str:
    with pytest.raises(ConfigError) as e:
        cfg(*groups, **top)
    return "\n".join(e.value.problems)


def test_the_study_config_loads():
    c = load_config(ROOT / "configs" / "attached-devices.yaml")
    assert c.devices[0].protocol == "websocket" and c.devices[0].count == 100000
    assert c.applications.count == 2000 and c.applications.think_ms == (1000, 3000)
    assert Path(c.edge_server.config_template).is_file()


@pytest.mark.parametrize("group,top,key", [
    ({**WS, "connection": None}, {}, "devices[0].connection: protocol websocket needs"),
    ({**WS, "engine": "process"}, {}, "devices[0].engine: connected devices run in wot-fleet"),
    ({**WS, "connection": {"reply_path": "/r"}}, {}, "devices[0].connection.reply_path"),
    ({**WS, "observe": {"resources": 1, "period_ms": 100}}, {}, "devices[0].observe: not with"),
    ({"group": "c", "count": 1, "connection": {}}, {}, "devices[0].connection: only for"),
    (WS, {"edge_server": None}, "edge_server: connected device groups need"),
    ({"group": "c", "count": 1}, {"applications": {}}, "applications: needs connected"),
    ({**WS, "connection": {"path": "/d/{dev}"}}, {}, "unknown placeholder"),
    ({**WS, "connection": {"reply_bytes": {8: 1}}}, {}, "size 8"),
    (WS, {"applications": {"body_template": "{}"}}, "body_template must hold"),
    (WS, {"applications": {"think_ms": [3000, 1000]}}, "think_ms"),
    # the open loop: a rate with it, none without it, known arrivals, a bounded window
    (WS, {"applications": {"loop": "open"}}, "applications: loop: open needs rate"),
    (WS, {"applications": {"rate": 100}}, "rate (100) is for loop: open"),
    (WS, {"applications": {"loop": "open", "rate": 0}}, "applications.rate"),
    (WS, {"applications": {"loop": "open", "rate": 10, "arrival": "gamma"}},
     "applications.arrival"),
    (WS, {"applications": {"loop": "open", "rate": 10, "max_outstanding": 0}},
     "applications.max_outstanding"),
    (WS, {"applications": {"loop": "ring"}}, "applications.loop"),
    # attach headers and message: names, reserved headers, one-line values, placeholders
    ({**WS, "connection": {"attach_headers": {"Bad Name": "x"}}}, {},
     "devices[0].connection.attach_headers: header name 'Bad Name': expected an HTTP token"),
    ({**WS, "connection": {"attach_headers": {"Host": "x"}}}, {},
     "devices[0].connection.attach_headers: header 'Host': set by the engine"),
    ({**WS, "connection": {"attach_headers": {"X-A": "a\r\nB: c"}}}, {},
     "devices[0].connection.attach_headers: header 'X-A': expected a one-line text value"),
    ({**WS, "connection": {"attach_headers": {"X-A": "{dev}"}}}, {},
     "devices[0].connection.attach_headers: '{dev}': unknown placeholder {dev}"),
    ({**WS, "connection": {"attach_body": '{"d":{id}}'}}, {},
     "devices[0].connection.attach_body: '{\"d\":{id}}': unknown placeholder {id}"),
    ({**WS, "connection": {"attach_body": ""}}, {},
     "devices[0].connection.attach_body: expected a non-empty message"),
    # where the id travels: the request's place must hold {id}, and only that place
    (WS, {"applications": {"rpc_id": "path"}}, "rpc_path: with rpc_id path, expected {id}"),
    (WS, {"applications": {"rpc_id": "header", "body_template": '{"id":"{id}"}'}},
     "body_template: with rpc_id header the id is not in the body"),
    (WS, {"applications": {"rpc_path": "/rpc/{device}/{id}"}}, "rpc_path: {id} only with rpc_id path"),
    (WS, {"applications": {"rpc_id": "path", "rpc_path": "/p/{device}/{id}", "rpc_method": "GET",
                           "body_template": "x"}}, "rpc_method: GET sends no body"),
    (WS, {"applications": {"rpc_id": "place"}}, "applications.rpc_id"),
    (WS, {"applications": {"id_header": "X Rpc"}}, "applications.id_header: header name"),
    (WS, {"applications": {"reply_id": "header"}},
     "applications.reply_id: header needs chunked devices (a reply POST); devices[0] replies in "
     "WebSocket frames"),
    ({**WS, "protocol": "chunked"}, {"applications": {"reply_id": "path"}},
     "devices[0].connection.reply_path: with applications.reply_id path, expected {id} in it"),
    ({**WS, "protocol": "chunked", "connection": {"reply_path": "/up/{id}"}}, {"applications": {}},
     "devices[0].connection.reply_path: {id} only with applications.reply_id path"),
    ({**WS, "connection": {"reply_method": "PUT"}}, {}, "devices[0].connection.reply_method"),
    # the study's attach (one POST held open): replies are chunks of it, the id in their body
    ({**WS, "protocol": "chunked-post", "connection": {"reply_path": "/up"}}, {},
     "devices[0].connection.reply_path: a chunked-post device replies on its own connection"),
    ({**WS, "protocol": "chunked-post"}, {"applications": {"reply_id": "header"}},
     "applications.reply_id: header needs chunked devices (a reply POST); devices[0] replies in "
     "chunks of its held-open POST"),
    (WS, {"applications": {"reply_subscribe": "50%"}}, "applications.reply_subscribe: expected no '%'"),
    # the binaries' own limits, judged before the run (placeholders at their longest value)
    (WS, {"applications": {"reply_subscribe": '["SUBSCRIBE","a.{shard}","b.{shard}"]'}},
     "applications.reply_subscribe: expected {shard} at most once"),
    (WS, {"applications": {"reply_subscribe": "s" * 600}},
     "applications.reply_subscribe: expected a message of fewer than 502 bytes"),
    (WS, {"applications": {"reply_headers": {"X-A": "v" * 1100}}},
     "applications.reply_headers: expected at most 1023 bytes"),
    ({**WS, "connection": {"attach_body": "{device}" * 130}}, {},
     "devices[0].connection.attach_body: expected at most 8128 bytes, each placeholder"),
    ({**WS, "connection": {"delimiter": "\n"}}, {},
     "devices[0].connection.delimiter: a websocket device's frame is one message"),
    ({**WS, "protocol": "chunked", "connection": {"delimiter": "123456789"}}, {},
     "devices[0].connection.delimiter: expected 1..8 bytes"),
    ({**WS, "protocol": "chunked", "connection": {"delimiter": ""}}, {},
     "devices[0].connection.delimiter: expected 1..8 bytes"),
])
def test_refusals_name_the_key(group, top, key):
    assert key in problems(group, **top)


def test_engines_and_server_workers_are_sized_by_the_descriptor_limit():
    c = cfg({**WS, "count": 100000}, {"group": "h", "count": 30000, "protocol": "chunked",
                                       "connection": {}}, applications={"count": 2000})
    lay = make_layout(c, fds=20000)
    ws = [e for e in lay.engines if e.group == "m"]
    ch = [e for e in lay.engines if e.group == "h"]
    assert len(ws) == 6 and sum(e.count for e in ws) == 100000 and max(e.count for e in ws) <= 19936
    # a chunked device holds two connections: half as many per engine
    assert len(ch) == 4 and max(e.count for e in ch) <= 19936 // 2
    assert ch[0].first_id == 100000 and ws[1].offset == ws[0].count
    conns = 100000 + 2 * 30000 + 2000 + 16
    assert lay.server_workers * lay.worker_connections >= conns
    assert len(lay.sources) * 20000 >= 160000


def test_connection_rows_are_the_engines_file():
    c = cfg({**WS, "count": 6, "connection": {"reply_bytes": {32: 1, 1024: 2}, "heartbeat_s": 60,
                                              "service_time_ms": 1.5}})
    rows = list(connection_rows(c.devices[0], 100, "127.0.0.1:8080", 4, ("127.0.1.1",),
                                offset=2, count=3))
    assert rows[0] == ("102,m-2,websocket,127.0.0.1:8080,127.0.1.1,/dev/102/2,,60000,0,1500,1024,"
                       "1000,,")
    assert len(rows) == 3
    assert [reply_size_of({32: 1, 1024: 2}, k, 6) for k in range(6)] == [32, 32, 1024, 1024, 1024,
                                                                         1024]


def test_a_chunked_post_group_is_one_connection_per_device_without_a_reply_path():
    c = cfg({**WS, "protocol": "chunked-post", "count": 3,
             "connection": {"reply_bytes": {32: 1}, "heartbeat_s": 60}})
    (row,) = connection_rows(c.devices[0], 0, "127.0.0.1:8080", 2, offset=1, count=1)
    assert row == "1,m-1,chunked-post,127.0.0.1:8080,,/dev/1/1,,60000,0,1000,32,1000,,"
    lay = make_layout(cfg({**WS, "protocol": "chunked-post", "count": 30000}), fds=20000)
    assert max(e.count for e in lay.engines) > 19936 // 2      # not two connections each


def test_sizes_written_back_as_strings_load_again():
    """A sweep's or --set's rewritten config (YAML/JSON) carries mapping keys as strings."""
    c = cfg({**WS, "connection": {"reply_bytes": {"32": 1, "1024": 1}}})
    assert c.devices[0].connection.reply_bytes == {32: 1, 1024: 1}


def test_capacity_and_a_sweep_on_docker_refuse_connected_configs_naming_the_backend(capsys,
                                                                                 tmp_path):
    """(On this host, and across hosts with --backend swarm, they run: tests/e2e,
    tests/cluster.) On docker both refuse before anything runs or is created."""
    from wotbench.cli import main
    path = str(ROOT / "configs" / "attached-devices.yaml")
    assert main(["capacity", path, "--backend", "docker", "--out-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "connected device groups" in err and "--backend docker" in err
    assert main(["sweep", path, "--vary", "devices[0].count=100,200", "--backend", "docker",
                 "--out-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "connected device groups" in err and "wotbench sweep" in err
    assert not any(tmp_path.iterdir())


def test_a_cells_share_of_the_layout_keeps_global_ids_and_offsets():
    c = cfg({**WS, "count": 1000}, {"group": "h", "count": 300, "protocol": "chunked",
                                    "connection": {}})
    lay = make_layout(c, fds=264, share={0: (500, 500), 1: (0, 150)})
    ws = [e for e in lay.engines if e.group == "m"]
    ch = [e for e in lay.engines if e.group == "h"]
    # 200 connections per engine: 3 websocket engines for 500 devices, 2 chunked for 150
    assert [(e.first_id, e.count, e.offset) for e in ws] == [(500, 167, 500), (667, 167, 667),
                                                            (834, 166, 834)]
    assert [(e.first_id, e.count) for e in ch] == [(1000, 75), (1075, 75)]
    assert lay.attached == 650 and lay.devices == 1300   # the applications reach every device
    assert make_layout(c, fds=264, share={}).engines == []


def test_attach_headers_and_message_are_rendered_per_device_and_percent_encoded():
    c = cfg({"group": "h", "count": 3, "protocol": "chunked", "connection": {
        "attach_headers": {"Origin": "http://e", "X-Device": "{device}/{shard}"},
        "attach_body": '["SUBSCRIBE","rpc.{device}"] 100%',
        "reply_path": "/up/{device}/{id}"}}, applications={"reply_id": "path"})
    (row,) = connection_rows(c.devices[0], 7, "127.0.0.1:8080", 4, offset=1, count=1)
    f = row.split(",")
    assert len(f) == 14 and f[0] == "8" and f[6] == "/up/8/{id}"   # {id}: the engine's, per reply
    # a row is one line without commas: CRLF, blanks, commas and % are escaped
    assert f[12] == "Origin:%20http://e%0D%0AX-Device:%208/0"
    assert f[13] == '["SUBSCRIBE"%2C"rpc.8"]%20100%25'


def test_the_id_placements_resolve_their_defaults():
    a = cfg(WS, applications={}).applications
    assert a.body_template == '{"id":"{id}","method":"ping"}' and a.reply_id_marker == a.id_marker
    h = cfg(WS, applications={"rpc_id": "header", "reply_id_marker": "id\\\":\\\""}).applications
    assert h.body_template == '{"method":"ping"}' and h.reply_id_marker == 'id\\":\\"'
    g = cfg(WS, applications={"rpc_id": "path", "rpc_method": "GET",
                              "rpc_path": "/PUBLISH/rpc.{device}/rpc:{id}"}).applications
    assert g.body_template is None
    # a resolved config (config.resolved.yaml, a sweep's points) loads again unchanged
    again = cfg(WS, applications=g.model_dump(mode="json")).applications
    assert again == g


def test_the_webdis_config_loads():
    c = load_config(ROOT / "configs" / "attached-devices-webdis.yaml")
    g, a = c.devices[0], c.applications
    assert g.protocol == "chunked" and g.connection.reply_method == "PUT"
    assert a.rpc_id == "path" and a.rpc_method == "GET" and a.reply_id_marker == 'id\\":\\"'
    assert Path(c.edge_server.config_template).is_file()


def test_an_open_loop_gives_each_process_its_devices_share_of_the_rate():
    from wotbench.connected.procs import rpcapp_argv
    c = cfg(WS, applications={"count": 2000, "loop": "open", "rate": 1000, "arrival": "constant",
                              "max_outstanding": 3})
    argv = rpcapp_argv(c.applications, "127.0.0.1:8080", 10, Path("/tmp"), 60, 1, None,
                       first_app=500, count=500, device_ranges=[(0, 5), (100, 2)],
                       first_shard=16, devices_total=28)   # 7 of 28 devices: a quarter
    opt = dict(zip(argv[1::2], argv[2::2]))
    assert (opt["--rate"], opt["--arrival"], opt["--window"]) == ("250", "constant", "3")
    assert (opt["--devices"], opt["--first-shard"]) == ("0:5,100:2", "16")
    with pytest.raises(ValueError, match="devices_total"):   # a cell's rate needs the run's
        rpcapp_argv(c.applications, "e:1", 7, Path("/tmp"), 60, 1, None,
                    device_ranges=[(0, 7)])
    assert c.applications.send_lag_scale_ms == 0
    closed = rpcapp_argv(cfg(WS, applications={}).applications, "127.0.0.1:8080", 10,
                         Path("/tmp"), 60, 1, None)
    assert "--rate" not in closed and dict(zip(closed[1::2], closed[2::2]))["--devices"] == "0:10"


def test_connection_rows_put_a_cells_devices_on_its_own_shards():
    c = cfg({**WS, "count": 4})
    rows = list(connection_rows(c.devices[0], 0, "127.0.0.1:8080", 4, first_shard=8))
    assert [r.split(",")[5] for r in rows] == ["/dev/0/8", "/dev/1/9", "/dev/2/10", "/dev/3/11"]


def test_a_delimiter_adds_its_column_percent_encoded():
    c = cfg({**WS, "protocol": "chunked-post", "count": 2,
             "connection": {"reply_bytes": {32: 1}, "delimiter": "\r\n"}},
            {**WS, "group": "n", "protocol": "chunked", "count": 1})
    (row,) = connection_rows(c.devices[0], 0, "127.0.0.1:8080", 2, offset=1, count=1)
    assert row == "1,m-1,chunked-post,127.0.0.1:8080,,/dev/1/1,,60000,0,1000,32,1000,,,%0D%0A"
    assert connections_header(c.devices[0]).endswith(",attach_body,delimiter")
    assert connections_header(c.devices[1]).endswith(",attach_body")   # unframed: as before


# ---- applications on their own WebSockets (applications.transport: websocket) ----

WSAPP = {"transport": "websocket", "rpc_ws_path": "/.json"}


@pytest.mark.parametrize("apps,key", [
    ({"transport": "websocket"}, "applications: rpc_ws_path: transport: websocket needs"),
    ({**WSAPP, "rpc_method": "GET"}, "applications: rpc_method: GET is an HTTP request's"),
    ({**WSAPP, "rpc_id": "path"}, "applications: rpc_id: path cannot apply with transport: "
     "websocket"),
    ({**WSAPP, "rpc_id": "header"}, "applications: rpc_id: header cannot apply"),
    ({**WSAPP, "rpc_path": "/p/{device}"}, "applications: rpc_path: an HTTP request's"),
    ({**WSAPP, "body_template": '{"id":"{id}"}'}, "applications: body_template: an HTTP"),
    ({**WSAPP, "rpc_frame": '["PUBLISH","rpc.{device}"]'},
     "applications.rpc_frame: expected {id} in the frame"),
    ({**WSAPP, "rpc_frame": '{"id":"{id}"}'}, "applications.rpc_frame: expected {device}"),
    ({**WSAPP, "rpc_frame": '{"id":"{id}","d":{dev}}'},
     "applications.rpc_frame: '{\"id\":\"{id}\",\"d\":{dev}}': unknown placeholder {dev}"),
    ({**WSAPP, "rpc_frame": '["P","{device}","rpc:{id}"]'},
     "applications: rpc_frame must hold id_marker followed by {id}"),
    ({**WSAPP, "rpc_frame": '{"id":"{id}","d":{device},"p":"' + "x" * 4100 + '"}'},
     "applications.rpc_frame: expected at most 4095 bytes once every {id}"),
    # short, but 150 ids of up to 31 bytes each would not fit wot-rpcapp's frame once filled
    ({**WSAPP, "rpc_frame": '{"id":"{id}","d":{device},"x":"' + "{id}" * 150 + '"}'},
     "applications.rpc_frame: expected at most 4095 bytes once every {id} (up to 31 bytes) and "
     "{device} (up to 10) is filled (wot-rpcapp's limit), got up to 4"),
    ({**WSAPP, "rpc_ws_path": "no-slash"}, "applications.rpc_ws_path: expected a request target"),
    ({**WSAPP, "rpc_ws_path": "/a/{device}"}, "applications.rpc_ws_path: '/a/{device}': unknown"),
    ({**WSAPP, "rpc_ws_headers": {"Host": "x"}}, "applications.rpc_ws_headers: header 'Host'"),
    ({**WSAPP, "rpc_acks": False, "rpc_ack_unheard": "0"},
     "applications: rpc_ack_unheard: classifies the server's acks; rpc_acks is false"),
    ({**WSAPP, "rpc_ack_rejected": "a\nb"}, "applications.rpc_ack_rejected: expected a one-line"),
    ({**WSAPP, "transport": "ws"}, "applications.transport"),
    # the WebSocket's keys with the HTTP transport
    ({"rpc_ws_path": "/.json"}, "applications: rpc_ws_path: for transport: websocket"),
    ({"rpc_frame": '{"id":"{id}","d":{device}}'}, "applications: rpc_frame: for transport"),
    ({"rpc_ws_headers": {"Origin": "x"}}, "applications: rpc_ws_headers: for transport"),
    ({"rpc_acks": False}, "applications: rpc_acks: for transport: websocket"),
    ({"rpc_ack_unheard": "0"}, "applications: rpc_ack_unheard: for transport: websocket"),
])
def test_websocket_applications_refusals_name_the_key(apps, key):
    assert key in problems(WS, applications=apps)


def test_websocket_applications_resolve_and_load_again_and_reach_wot_rpcapp():
    from wotbench.connected.procs import rpcapp_argv
    a = cfg(WS, applications={**WSAPP, "rpc_ws_headers": {"Origin": "http://e"},
                              "rpc_ack_unheard": '{"PUBLISH":0}'}).applications
    assert a.rpc_frame == '{"id":"{id}","device":{device},"method":"ping"}'
    assert a.body_template is None and a.reply_id_marker == a.id_marker
    assert cfg(WS, applications=a.model_dump(mode="json")).applications == a
    argv = rpcapp_argv(a, "127.0.0.1:8080", 10, Path("/tmp"), 60, 1, None)
    opt = dict(zip(argv[1::2], argv[2::2]))
    assert (opt["--transport"], opt["--ws-path"], opt["--frame"], opt["--ws-header"],
            opt["--ack-unheard"]) == ("websocket", "/.json", a.rpc_frame, "Origin: http://e",
                                      '{"PUBLISH":0}')
    # nothing of the HTTP request: wot-rpcapp refuses those options with --transport websocket
    assert not {"--rpc-path", "--body", "--method", "--id-header"} & set(argv)
    assert "--ack-rejected" not in argv and "--no-acks" not in argv
    quiet = cfg(WS, applications={**WSAPP, "rpc_acks": False}).applications
    assert "--no-acks" in rpcapp_argv(quiet, "127.0.0.1:8080", 10, Path("/tmp"), 60, 1, None)
    # the HTTP transport's command line carries no WebSocket option
    http = rpcapp_argv(cfg(WS, applications={}).applications, "127.0.0.1:8080", 10,
                       Path("/tmp"), 60, 1, None)
    assert "--transport" not in http and "--body" in http and "--method" in http


def test_the_webdis_websocket_applications_config_loads():
    c = load_config(ROOT / "configs" / "attached-devices-webdis-wsapps.yaml")
    a = c.applications
    assert a.transport == "websocket" and a.count == 2000 and a.rpc_ws_path == "/.json"
    assert a.rpc_frame == '["PUBLISH","rpc.{device}","rpc:{id}"]' and a.id_marker == "rpc:"
    assert a.rpc_ws_headers == a.reply_headers == {"Origin": "http://wotbench.invalid"}
    assert c.devices[0].protocol == "chunked" and Path(c.edge_server.config_template).is_file()
