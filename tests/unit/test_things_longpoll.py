"""HTTP Things' observeproperty/subscribeevent over long-poll (issue 34): the expansion makes
one `longpoll` subscriber of the notification sink per observed instance (the sink's
`--longpoll`), refuses a long-poll form on the read's path, and the HTTP Thing holds a GET of
the form and answers it at the next write with the write's id, one held GET per connection."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from wotbench.config import notify as notify_spec
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.things import http_thing

REPO = Path(__file__).resolve().parents[2]
PLUG_FILE = REPO / "configs" / "things" / "plug-longpoll.td.json"
WRITE = {"affordance": "properties/state", "op": "writeproperty", "rate_per_s": 2}
OBSERVE = {"affordance": "properties/state", "op": "observeproperty"}


def _raw(load, count=3, td=str(PLUG_FILE)) -> dict:
    return {"name": "t", "duration_s": 10, "backend": "process",
            "things": [{"td": td, "group": "plug", "count": count, "service_time_ms": 2,
                        "load": load}]}


def test_a_longpoll_form_makes_longpoll_subscribers_and_sink_options(tmp_path):
    cfg = config_from_dict(_raw([WRITE, OBSERVE], count=2), tmp_path)
    n = cfg.notify
    assert [(s.name, s.kind, s.device, s.path, s.updates_to) for s in n.subscribers] == [
        ("plug-0-state", "longpoll", "plug-0", "api/state/poll", "api/state"),
        ("plug-1-state", "longpoll", "plug-1", "api/state/poll", "api/state")]
    assert cfg.gateways.http.headers == ["X-Update-Id: urn:wot:upd:{{seq}}"]
    args = notify_spec.sink_args(cfg, {"plug-0": ("127.0.0.1", 8000),
                                       "plug-1": ("127.0.0.2", 8001)})
    assert args[args.index("--longpoll") + 1] == \
        "plug-0-state=http://127.0.0.1:8000/api/state/poll"
    assert args.count("--longpoll") == 2 and "--stream" not in args


def test_a_longpoll_form_on_the_read_path_is_refused(tmp_path):
    td = json.loads(PLUG_FILE.read_text())
    td["properties"]["state"]["forms"][2]["href"] = "state"
    f = tmp_path / "shared.td.json"
    f.write_text(json.dumps(td))
    with pytest.raises(ConfigError) as e:
        config_from_dict(_raw([WRITE, OBSERVE], td=str(f)), tmp_path)
    assert e.value.problems == [
        "things[0].load[1]: the longpoll form of properties/state shares its path 'api/state' "
        "with its readproperty form, expected a path of its own (a GET there could be a read "
        "or a poll)"], e.value.problems


def test_the_http_thing_answers_a_held_poll_at_the_next_write(tmp_path):
    cfg = config_from_dict(_raw([WRITE, OBSERVE], count=1), tmp_path)
    g = cfg.devices[0]
    spec = g.server.command[g.server.command.index("--spec") + 1].replace("{{", "{") \
        .replace("}}", "}")
    thing, = http_thing.instances(spec, 0, 0, cfg.seed, [("plug-0", "127.0.0.1:0")])
    assert thing.longpolls == {"api/state/poll"}

    async def put(port, uid, value):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"PUT /api/state HTTP/1.1\r\nHost: x\r\nX-Update-Id: urn:wot:upd:%d\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (uid, len(value), value))
        head = await r.readuntil(b"\r\n\r\n")
        w.close()
        return head.split(b"\r\n")[0]

    async def answer(r):
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 2)
        n = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                .split(b":")[1])
        return head.split(b"\r\n")[0], json.loads(await r.readexactly(n))

    async def go():
        srv = await asyncio.start_server(http_thing.Server(thing).connection, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        poll = b"GET /api/state/poll HTTP/1.1\r\nHost: x\r\n\r\n"
        w.write(poll)
        with pytest.raises(asyncio.TimeoutError):   # held: no update yet
            await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 0.2)
        wrote = [await put(port, 17, b'"on"')]
        got = [await answer(r)]
        wrote.append(await put(port, 18, b'"off"'))   # no GET held: not buffered
        w.write(poll)                                 # the next poll, same connection
        await asyncio.sleep(0.05)                     # held before the next write
        wrote.append(await put(port, 19, b'"on"'))
        got.append(await answer(r))
        w.close()
        srv.close()
        return wrote, got
    wrote, got = asyncio.run(go())
    assert wrote == [b"HTTP/1.1 204 No Content"] * 3
    assert got == [(b"HTTP/1.1 200 OK", {"id": "urn:wot:upd:17", "data": "on"}),
                   (b"HTTP/1.1 200 OK", {"id": "urn:wot:upd:19", "data": "on"})]
