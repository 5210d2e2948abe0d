"""Things whose forms are HTTP (issue 34): the forms map onto a ``protocol: http`` group whose
server is WoTbench's HTTP Thing (``wotbench.things.http_thing``), the trace speaks http:// to the
forms' paths with the forms' methods, the server serves what the trace generator computed, and
what cannot be mapped (long-poll, SSE, a mix of protocols, Docker, the engine) is refused naming
the file and JSON pointer."""
from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from urllib.parse import unquote_to_bytes

import jsonschema
import pytest

from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.deploy.resolve import device_addresses
from wotbench.errors import ConfigError
from wotbench.things import http_thing
from wotbench.workload.formats import authority
from wotbench.things.trace import write_trace
from wotbench.workload.trace_io import read_trace

REPO = Path(__file__).resolve().parents[2]
PLUG_FILE = REPO / "configs" / "things" / "plug.td.json"
PLUG = json.loads(PLUG_FILE.read_text())
LOAD = [{"affordance": "properties/power", "op": "readproperty", "rate_per_s": 5},
        {"affordance": "properties/state", "op": "writeproperty", "rate_per_s": 2},
        {"affordance": "actions/reset", "op": "invokeaction", "rate_per_s": 2,
         "service_time_ms": 10}]


def _raw(td: str, load=None, **top) -> dict:
    return {"name": "t", "duration_s": 10, "backend": "process",
            "things": [{"td": td, "group": "plug", "count": 3, "service_time_ms": 2,
                        "load": LOAD if load is None else load}], **top}


def _problems(raw: dict, base: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        config_from_dict(raw, base)
    return e.value.problems


def _td(tmp_path: Path, name: str, doc: dict) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_http_forms_become_an_http_group_served_by_the_http_thing(tmp_path):
    cfg = config_from_dict(_raw(str(PLUG_FILE)), tmp_path)
    [g] = cfg.devices
    assert (g.group, g.protocol, g.count, g.thing) == ("plug", "http", 3, 0)
    assert g.server is not None and g.server.port == 8080
    assert g.server.command[1] == str(http_thing.SCRIPT)
    # the forms' paths, href resolved against base http://plug.example:8080/api/
    # (api/overload: the event's long-poll form, held, no trace rows)
    assert g.paths == ["api/power", "api/state", "api/schedule", "api/reset", "api/overload",
                       ".well-known/wot"]


def test_the_trace_speaks_http_to_the_forms_with_their_methods_and_values(tmp_path):
    cfg = config_from_dict(_raw(str(PLUG_FILE)), tmp_path)
    write_trace(cfg, tmp_path / "trace")
    addrs = device_addresses(cfg)
    tr = read_trace(tmp_path / "trace" / "trace.csv")
    seen = set(zip(tr.method, tr.uri.str.replace(r"^http://[^/]+/", "", regex=True)))
    assert seen == {("GET", "api/power"), ("PUT", "api/state"), ("POST", "api/reset")}
    assert tr.uri.str.startswith("http://").all()
    puts = tr[tr.method == "PUT"]
    assert set(puts.body) == {'"on"', '"off"'}                 # each write its own enum value
    resets = [json.loads(b) for b in tr[tr.method == "POST"].body]
    for v in resets:
        jsonschema.validate(v, PLUG["actions"]["reset"]["input"])
    assert len({json.dumps(v) for v in resets}) > 1
    assert not (tmp_path / "trace" / "resources" / "plug-0.csv").exists()   # no wot-device
    tds = [json.loads(x) for x in (tmp_path / "trace/things/tds.jsonl").read_text().splitlines()]
    for t, a in zip(tds, addrs):
        assert t["td"]["base"] == f"http://{authority(a)}/" and a.port == 8080
        assert t["td"]["properties"]["power"]["forms"][0]["href"] == "api/power"
    assert len({t["td"]["id"] for t in tds}) == 3


def test_the_server_serves_what_the_trace_generator_computed(tmp_path):
    raw = _raw(str(PLUG_FILE))
    cfg = config_from_dict(raw, tmp_path)
    write_trace(cfg, tmp_path / "trace")
    a = device_addresses(cfg)[1]
    cmd = cfg.devices[0].server.argv(use_image=False, address=a.ip, port=a.port, name=a.name)
    args = dict(zip(cmd[2::2], cmd[3::2]))        # as the runner starts it
    assert (args["--listen"], args["--name"]) == (authority(a), a.name)
    thing = http_thing.instance(args["--spec"], int(args["--thing"]), int(args["--group-index"]),
                                int(args["--seed"]), a.name, authority(a))
    td_line = json.loads((tmp_path / "trace/things/tds.jsonl").read_text().splitlines()[1])
    assert thing.resources[".well-known/wot"].body == \
        json.dumps(td_line["td"], separators=(",", ":"), ensure_ascii=False).encode()
    assert thing.resources["api/reset"].service_us == 10_000
    assert thing.resources["api/power"].service_us == 2_000
    power = json.loads(thing.resources["api/power"].body)
    jsonschema.validate(power, {"type": "number", "minimum": 0, "maximum": 3600})
    assert json.loads(thing.resources["api/reset"].body) == "done"       # the action's output
    sched = json.loads(thing.resources["api/schedule"].body)
    assert set(sched) == {"on", "off"}
    other = http_thing.instance(args["--spec"], 0, 0, 1, "plug-2", authority(a))
    assert other.resources["api/power"].body != thing.resources["api/power"].body or \
        other.resources["api/schedule"].body != thing.resources["api/schedule"].body


def test_the_server_answers_http_requests(tmp_path):
    """The HTTP Thing over a real socket: 200 with the value, 204 for a write, 404 elsewhere,
    the TD at /.well-known/wot, keep-alive across requests."""
    thing = http_thing.Instance({
        "p": http_thing.Served(1000, b"21.5", "application/json"),
        ".well-known/wot": http_thing.Served(0, b'{"id":"x"}', "application/td+json")},
        "sleep", 1)

    async def go() -> list[bytes]:
        srv = await asyncio.start_server(http_thing.Server(thing).connection, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        out = []
        for req in (b"GET /p HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"PUT /p HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n22.0",
                    b"GET /.well-known/wot HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"):
            w.write(req)
            head = await r.readuntil(b"\r\n\r\n")
            n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0]
                    .split(b":")[1])
            out.append(head.split(b"\r\n")[0] + b"|" + await r.readexactly(n))
        w.close()
        srv.close()
        return out
    assert asyncio.run(go()) == [b"HTTP/1.1 200 OK|21.5", b"HTTP/1.1 204 No Content|",
                                 b'HTTP/1.1 200 OK|{"id":"x"}', b"HTTP/1.1 404 Not Found|"]


# -- what cannot be mapped is refused, naming the file and JSON pointer -----------------------

def test_an_observe_form_without_subprotocol_is_refused_and_long_poll_and_sse_are_served(
        tmp_path):
    load = [{"affordance": "events/overload", "op": "subscribeevent",
             "notify": {"dist": "exponential", "mean": 1000}}]
    cfg = config_from_dict(_raw(str(PLUG_FILE), load), tmp_path)   # its form: longpoll
    assert [(s.kind, s.path) for s in cfg.notify.subscribers] == [("longpoll", "api/overload")] * 3
    td = copy.deepcopy(PLUG)
    del td["events"]["overload"]["forms"][0]["subprotocol"]
    p = _problems(_raw(_td(tmp_path, "none.td.json", td), load), tmp_path)
    assert len(p) == 1 and p[0].endswith(
        "/events/overload/forms/0: things[0].load[0].op: subscribeevent: an HTTP form without a "
        "subprotocol (longpoll, sse) cannot notify, and is not emulated, expected a coap:// "
        "form for it (CoAP Observe)"), p
    td["events"]["overload"]["forms"][0]["subprotocol"] = "sse"
    f = _td(tmp_path, "sse.td.json", td)
    cfg = config_from_dict(_raw(f, load), tmp_path)   # emitted on its schedule (sse_events)
    assert [(s.kind, s.path) for s in cfg.notify.subscribers] == [("stream", "api/overload")] * 3


def test_a_mix_of_coap_and_http_forms_in_the_load_is_refused(tmp_path):
    td = copy.deepcopy(PLUG)
    td["actions"]["reset"]["forms"][0]["href"] = "coap://plug.example/reset"
    f = _td(tmp_path, "mix.td.json", td)
    p = _problems(_raw(f), tmp_path)
    assert len(p) == 2, p    # power and state are HTTP-only: the CoAP reset wins neither
    assert p[0].startswith(f"things[0].td: {f}: /properties/power/forms: things[0].load[0].op: "
                           "only an HTTP form (/properties/power/forms/0) offers readproperty, "
                           "while other ops of the load have only CoAP forms"), p


def test_http_things_need_the_process_backend_and_no_engine(tmp_path):
    from types import SimpleNamespace

    from wotbench.errors import EnvironmentProblem
    from wotbench.runner.preflight import programs
    cfg = config_from_dict(_raw(str(PLUG_FILE), backend="docker"), tmp_path)
    with pytest.raises(EnvironmentProblem) as e:    # the run's backend, --backend included
        programs.check(cfg, SimpleNamespace(needs_docker=True), None)
    assert str(e.value).startswith("devices[0] (things[0]) is an HTTP Thing, a Python program "
                                   "of this host"), e.value
    assert programs.check(cfg, SimpleNamespace(needs_docker=False), None) == ["devices[0].server"]
    raw = _raw(str(PLUG_FILE))
    raw["things"][0]["engine"] = "fleet"
    p = _problems(raw, tmp_path)
    assert len(p) == 1 and p[0].startswith("things[0].engine: fleet, but its forms are HTTP"), p


def test_a_bad_http_method_is_named_only_when_the_load_uses_the_form(tmp_path):
    td = copy.deepcopy(PLUG)
    td["actions"]["reset"]["forms"][0]["htv:methodName"] = "BREW"
    f = _td(tmp_path, "brew.td.json", td)
    config_from_dict(_raw(f, LOAD[:2]), tmp_path)        # reset not in the load: fine
    p = _problems(_raw(f), tmp_path)
    assert p == [f"things[0].td: {f}: /actions/reset/forms/0/htv:methodName: things[0].load[2].op: "
                 "invokeaction: 'BREW', expected GET, PUT, POST, DELETE, PATCH"], p


def test_shipped_http_example_loads(tmp_path):
    cfg = load_config(REPO / "configs" / "td-http.yaml")
    assert [(g.group, g.protocol, g.count) for g in cfg.devices] == [("plug", "http", 4)]


def test_http_things_register_with_their_http_address(tmp_path):
    """With a directory, an HTTP Thing's registered TD names the http:// address it would have."""
    raw = _raw(str(PLUG_FILE), directory={"server": {"command": ["true"]}, "register_within_s": 2,
                                          "verify_within_s": 1, "deregister_within_s": 1})
    write_trace(config_from_dict(raw, tmp_path), tmp_path / "trace")
    tds = [json.loads(x)["td"] for x in (tmp_path / "trace/things/tds.jsonl").read_text().splitlines()]
    assert len(tds) == 3 and all(t["base"].startswith("http://") and t["base"].endswith(":8080/")
                                 for t in tds), [t["base"] for t in tds]
    assert tds[0]["properties"]["power"]["forms"][0]["href"] == "api/power"
