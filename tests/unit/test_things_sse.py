"""HTTP Things' observeproperty over Server-Sent Events (issue 34): the expansion makes the
notification sink's subscribers (one stream per observed instance, or the first `subscribed`),
the update header with the id, and refuses what would not notify; the HTTP Thing pushes the
written value with the write's id to every stream of that instance's property, and the sink's
analysis counts as a subscriber's updates only the writes to its own instance."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis_fixtures import sink_summary
from wotbench.analysis.notify_sink import figures
from wotbench.rundir.sink_files import SinkSummary
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.things import http_thing, sse_notify

REPO = Path(__file__).resolve().parents[2]
PLUG_FILE = REPO / "configs" / "things" / "plug.td.json"
WRITE = {"affordance": "properties/state", "op": "writeproperty", "rate_per_s": 2}
OBSERVE = {"affordance": "properties/state", "op": "observeproperty"}


def _raw(load, count=3, td=str(PLUG_FILE), **top) -> dict:
    return {"name": "t", "duration_s": 10, "backend": "process",
            "things": [{"td": td, "group": "plug", "count": count, "service_time_ms": 2,
                        "load": load}], **top}


def _problems(raw: dict, base: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        config_from_dict(raw, base)
    return e.value.problems


def test_an_sse_observeproperty_makes_one_stream_per_instance_and_the_update_header(tmp_path):
    cfg = config_from_dict(_raw([WRITE, OBSERVE]), tmp_path)
    n = cfg.notify
    assert (n.marker, n.accept, n.updates) == ("urn:wot:upd:", "text/event-stream", ["PUT"])
    assert [(s.name, s.kind, s.device, s.path, s.updates_to) for s in n.subscribers] == [
        (f"plug-{i}-state", "stream", f"plug-{i}", "api/state", "api/state") for i in range(3)]
    assert cfg.gateways.http.headers == ["X-Update-Id: urn:wot:upd:{{seq}}"]
    # a resolved config read back expands to the same (its notify: is what is made)
    again = config_from_dict(json.loads(cfg.model_dump_json(exclude_none=True)), tmp_path)
    assert again.notify == cfg.notify and again.gateways.http.headers == cfg.gateways.http.headers


def test_a_sample_of_instances_and_several_observers(tmp_path):
    obs = dict(OBSERVE, subscribed=2, observers=2)
    cfg = config_from_dict(_raw([WRITE, obs], count=100, notify={"slo": {"p99_ms": 50}}),
                           tmp_path)
    assert [s.name for s in cfg.notify.subscribers] == [
        "plug-0-state-0", "plug-0-state-1", "plug-1-state-0", "plug-1-state-1"]
    assert cfg.notify.slo.p99_ms == 50   # the user's objectives are kept


def test_what_would_not_notify_is_refused_naming_the_key(tmp_path):
    f = str(PLUG_FILE)
    p = _problems(_raw([OBSERVE]), tmp_path)
    assert p == [f"things[0].td: {f}: /properties/state/forms/2: things[0].load[0]: no load entry "
                 "writes properties/state: its Server-Sent Events are pushed on each write, "
                 "expected a writeproperty entry of properties/state (the updates whose "
                 "notification latency is measured)"], p
    p = _problems(_raw([WRITE, dict(OBSERVE, notify={"dist": "exponential", "mean": 100})]),
                  tmp_path)
    assert len(p) == 1 and "things[0].load[1]: notify: an observeproperty over Server-Sent " \
        "Events notifies on each write" in p[0], p
    p = _problems(_raw([WRITE, OBSERVE], count=100), tmp_path)
    assert p == ["things: the observeproperty/subscribeevent (Server-Sent Events) entries ask "
                 "for 100 streams, "
                 "expected at most 64 (the notification sink's limit): give the entries "
                 "`subscribed: N`, a sample of the first N instances"], p
    p = _problems(_raw([WRITE, dict(OBSERVE, subscribed=5)]), tmp_path)
    assert p == ["things[0].load[1].subscribed: 5, expected at most count (3)"], p
    p = _problems(_raw([dict(WRITE, subscribed=1)]), tmp_path)
    assert len(p) == 1 and "subscribed: only for observeproperty over HTTP SSE" in p[0], p
    mine = {"marker": "x:", "subscribers": [{"name": "a", "kind": "webhook",
                                             "listen": "127.0.0.1:9000"}]}
    p = _problems(_raw([WRITE, OBSERVE], notify=mine), tmp_path)
    assert p == ["notify: made from the things' observeproperty (Server-Sent Events) entries "
                 "(marker, subscribers given), expected only notify.slo or notify.timeout_ms"], p


def test_a_read_only_property_observed_over_sse_is_refused(tmp_path):
    td = json.loads(PLUG_FILE.read_text())
    td["properties"]["power"]["forms"].append(
        {"href": "power/events", "op": "observeproperty", "subprotocol": "sse"})
    f = tmp_path / "ro.td.json"
    f.write_text(json.dumps(td))
    p = _problems(_raw([{"affordance": "properties/power", "op": "observeproperty"}],
                       td=str(f)), tmp_path)
    assert len(p) == 1 and "/properties/power/forms/1" in p[0] and \
        "properties/power has no HTTP writeproperty form" in p[0], p


def test_no_trace_rows_for_the_streams(tmp_path):
    from wotbench.things.trace import write_trace
    from wotbench.workload.trace_io import read_trace
    cfg = config_from_dict(_raw([WRITE, OBSERVE]), tmp_path)
    write_trace(cfg, tmp_path)
    t = read_trace(tmp_path / "trace.csv")
    assert set(t["method"]) == {"PUT"}, set(t["method"])


def test_the_http_thing_pushes_each_write_with_its_id_to_that_instances_streams(tmp_path):
    cfg = config_from_dict(_raw([WRITE, OBSERVE], count=2), tmp_path)
    g = cfg.devices[0]
    spec = g.server.command[g.server.command.index("--spec") + 1].replace("{{", "{") \
        .replace("}}", "}")
    things = http_thing.instances(spec, 0, 0, cfg.seed,
                                  [("plug-0", "127.0.0.1:0"), ("plug-1", "127.0.0.1:0")])

    async def go():
        servers = [await asyncio.start_server(http_thing.Server(t).connection, "127.0.0.1", 0)
                   for t in things]
        ports = [s.sockets[0].getsockname()[1] for s in servers]
        streams = []
        for port in (ports[0], ports[0], ports[1]):   # two on plug-0, one on plug-1
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET /api/state HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            head = await r.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK") and b"text/event-stream" in head
            streams.append((r, w))
        r, w = await asyncio.open_connection("127.0.0.1", ports[0])
        w.write(b'PUT /api/state HTTP/1.1\r\nHost: x\r\nX-Update-Id: urn:wot:upd:17\r\n'
                b'Content-Length: 4\r\n\r\n"on"')
        answer = await r.readuntil(b"\r\n\r\n")
        w.write(b"GET /api/state HTTP/1.1\r\nHost: x\r\n\r\n")   # a plain read still reads
        read = await r.readuntil(b"\r\n\r\n")
        events = [await asyncio.wait_for(s[0].readuntil(b"\n\n"), 2) for s in streams[:2]]
        with pytest.raises(asyncio.TimeoutError):   # plug-1 was not written
            await asyncio.wait_for(streams[2][0].readuntil(b"\n\n"), 0.2)
        for _, sw in streams + [(r, w)]:
            sw.close()
        for s in servers:
            s.close()
        return answer, read, events
    answer, read, events = asyncio.run(go())
    assert answer.startswith(b"HTTP/1.1 204") and read.startswith(b"HTTP/1.1 200")
    assert events == [b'id: urn:wot:upd:17\ndata: "on"\n\n'] * 2


def test_each_subscriber_counts_only_the_writes_to_its_own_instance():
    updates = pd.DataFrame({"seq": [0, 1, 2, 3], "sent": [0.0, 1e9, 2e9, 3e9],
                            "ok": [True, True, True, True], "device": [0, 1, 0, 0],
                            "path": ["api/state", "api/state", "api/state", "api/schedule"]})
    notes = pd.DataFrame({"subscriber": ["a", "a", "b"], "id": [0, 2, 1],
                          "received_ns": [3e6, 2.004e9, 1.005e9], "kernel": [1, 1, 1]})
    sink = SinkSummary.model_validate(sink_summary([("a", "stream"), ("b", "stream")]))
    a, b = figures(updates, notes, sink, {"a": (0, "api/state"), "b": (1, "/api/state")})
    assert (a.updates, a.notified, a.lost) == (2, 2, 0)
    assert (b.updates, b.notified, b.lost) == (1, 1, 0)
    assert a.latency_ms["max"] == pytest.approx(4) and b.latency_ms["p50"] == pytest.approx(5)
    (c,) = figures(updates, notes[notes.subscriber == "a"], sink.model_copy(update={
        "subscribers": sink.subscribers[:1]}))   # unscoped: every update is this subscriber's
    assert (c.updates, c.lost) == (4, 2)


def test_the_latency_is_only_over_updates_that_count():
    """A failed write (ok False) that was notified anyway: neither counted nor an unknown id,
    and its latency (here 50 ms) is not in the quantiles either."""
    updates = pd.DataFrame({"seq": [0, 1], "sent": [0.0, 1e9], "ok": [True, False],
                            "device": [0, 0], "path": ["api/state", "api/state"]})
    notes = pd.DataFrame({"subscriber": ["a", "a"], "id": [0, 1],
                          "received_ns": [2e6, 1.05e9], "kernel": [1, 1]})
    sink = SinkSummary.model_validate(sink_summary([("a", "stream")]))
    (a,) = figures(updates, notes, sink, {"a": (0, "api/state")})
    assert (a.updates, a.notified, a.lost, a.unknown_ids) == (1, 1, 0, 0)
    assert a.latency_ms["max"] == pytest.approx(2) and a.latency_ms["min"] == pytest.approx(2)


def test_the_header_is_the_one_the_thing_reads():
    assert sse_notify.UPDATE_HEADER.lower() == http_thing.UPDATE_HEADER
    assert http_thing.sse_event("urn:wot:upd:3", b'{"a":1}\n2') == \
        b'id: urn:wot:upd:3\ndata: {"a":1}\ndata: 2\n\n'
