"""HTTP Things' subscribeevent over Server-Sent Events (issue 34): the expansion makes one sink
stream per subscribed instance whose updates are that instance's own emissions; the schedule is
seeded per instance with the CoAP events' semantics; the HTTP Thing emits each event with its
id to its streams and stamps it; the analysis joins the sink's arrivals to the emissions."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import ge_summary, sink_summary
from wotbench.analysis import resolved
from wotbench.analysis.notify_sink import analyse, block as _block
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError
from wotbench.rundir import GeSummary
from wotbench.things import http_thing, sse_events

REPO = Path(__file__).resolve().parents[2]
METER_FILE = REPO / "configs" / "things" / "meter.td.json"
READ = {"affordance": "properties/power", "op": "readproperty", "rate_per_s": 2}
EVENT = {"affordance": "events/overload", "op": "subscribeevent",
         "notify": {"dist": "exponential", "mean": 100}}


def _raw(load, count=3, td=str(METER_FILE)) -> dict:
    return {"name": "t", "duration_s": 10, "backend": "process",
            "things": [{"td": td, "group": "meter", "count": count, "service_time_ms": 2,
                        "load": load}]}


def _resolved(run_dir: Path, **kw) -> None:
    """The run's config.resolved.yaml: one meter instance, read and subscribed to (its stream
    meter-0-overload on api/overload)."""
    from wotbench.deploy.resolve import dump_resolved
    dump_resolved(config_from_dict({**_raw([READ, EVENT], count=1), **kw}, run_dir),
                  run_dir / "config.resolved.yaml")


def notify_block(run_dir: Path, ges: list):
    """notify_sink.block, given the run's config as the analysis reads it once."""
    return _block(run_dir, ges, resolved.read(run_dir / "config.resolved.yaml", []))


def _ge(ge_dir: Path, **kw) -> list:
    """The GE's summary.json, written, and what the analysis hands notify_sink.block."""
    s = ge_summary(**kw)
    (ge_dir / "summary.json").write_text(json.dumps(s))
    return [(ge_dir, GeSummary.model_validate(s))]


def test_an_sse_subscribeevent_makes_one_stream_per_instance_on_its_own_emissions(tmp_path):
    cfg = config_from_dict(_raw([READ, EVENT]), tmp_path)
    n = cfg.notify
    assert (n.marker, n.accept, n.updates) == ("urn:wot:upd:", "text/event-stream", [])
    assert [(s.name, s.device, s.path, s.updates_to) for s in n.subscribers] == [
        (f"meter-{i}-overload", f"meter-{i}", "api/overload", "api/overload") for i in range(3)]
    again = config_from_dict(json.loads(cfg.model_dump_json(exclude_none=True)), tmp_path)
    assert again.notify == cfg.notify


def test_an_sse_subscribeevent_without_a_schedule_is_refused_naming_the_form(tmp_path):
    with pytest.raises(ConfigError) as e:
        config_from_dict(_raw([READ, {k: v for k, v in EVENT.items() if k != "notify"}]),
                         tmp_path)
    assert e.value.problems == [
        f"things[0].td: {METER_FILE}: /events/overload/forms/0: things[0].load[1]: "
        "subscribeevent over Server-Sent Events needs notify: {dist, mean} (ms between the "
        "events each instance emits)"], e.value.problems


def test_the_schedule_is_seeded_per_instance_with_the_coap_semantics():
    def times(index, dist="exponential", cv=0.0):
        s = sse_events.Schedule(dist, 100, cv, seed=1, gi=0, entry=1, index=index)
        return [s.phase_ms] + [s.next_gap_ms() for _ in range(2000)]
    assert times(0) == times(0) and times(0) != times(1)
    assert np.mean(times(0)[1:]) == pytest.approx(100, rel=0.1)
    det = times(2, "deterministic")
    assert 0 <= det[0] < 100 and set(det[1:]) == {100.0}
    uni = np.array(times(3, "uniform", cv=0.2)[1:])
    half = 100 * 0.2 * 3 ** 0.5
    assert uni.min() >= 100 - half and uni.max() <= 100 + half


def test_event_ids_are_beyond_any_request_row_and_unique_per_instance():
    ids = {sse_events.event_id(g, i, n) for g in (0, 1) for i in (0, 1) for n in (0, 1)}
    assert len(ids) == 8 and min(ids) >= sse_events.EVENT_ID_BASE and max(ids) < 2 ** 63
    with pytest.raises(ValueError):
        sse_events.event_id(0, 0, sse_events.MAX_EVENTS)


def test_the_http_thing_emits_on_its_schedule_to_that_instances_streams(tmp_path):
    cfg = config_from_dict(_raw([READ, dict(EVENT, notify={"dist": "deterministic",
                                                           "mean": 20})], count=2), tmp_path)
    g = cfg.devices[0]
    spec = g.server.command[g.server.command.index("--spec") + 1].replace("{{", "{") \
        .replace("}}", "}")
    things = http_thing.instances(spec, 0, 0, cfg.seed,
                                  [("meter-0", "127.0.0.1:0"), ("meter-1", "127.0.0.1:0")])
    emissions: list = []

    async def go():
        srvs = [http_thing.Server(t, emissions) for t in things]
        servers = [await asyncio.start_server(s.connection, "127.0.0.1", 0) for s in srvs]
        port = servers[0].sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /api/overload HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        head = await r.readuntil(b"\r\n\r\n")
        emitters = [asyncio.ensure_future(s.emit(ev)) for s, t in zip(srvs, things)
                    for ev in t.events]
        got = [await asyncio.wait_for(r.readuntil(b"\n\n"), 2) for _ in range(3)]
        for t in emitters:
            t.cancel()
        w.close()
        for s in servers:
            s.close()
        return head, got
    head, got = asyncio.run(go())
    assert head.startswith(b"HTTP/1.1 200 OK") and b"text/event-stream" in head
    mine = [e for e in emissions if e[1] == "meter-0"]
    assert [e[0] for e in mine[:3]] == [sse_events.event_id(0, 0, n) for n in range(3)]
    for ev, e in zip(got, mine):
        head_line, data = ev.decode().split("\n")[:2]
        assert head_line == f"id: urn:wot:upd:{e[0]}" and e[2] == "api/overload"
        value = json.loads(data.removeprefix("data: "))
        assert set(value) == {"power", "phase"} and 3000 <= value["power"] <= 3600
    assert all(e[4] == 0 for e in emissions if e[1] == "meter-1")   # no stream there
    # emitted on absolute due times 20 ms apart: a late emission shortens the next gap, so the
    # schedule shows in the mean gap, not in each one
    stamps = [e[3] for e in mine]
    assert all(b > a for a, b in zip(stamps, stamps[1:])), stamps
    assert 15e6 <= (stamps[-1] - stamps[0]) / (len(stamps) - 1) <= 60e6, stamps


def test_the_analysis_joins_arrivals_to_emissions_and_counts_a_lost_one(tmp_path):
    """Two meters: meter-0 emitted 3 during the test (one never arrived) and 1 before T0
    (notified: neither counted nor an unknown id); meter-1 emitted 1, notified twice."""
    e0 = [sse_events.event_id(0, 0, n) for n in range(4)]
    e1 = sse_events.event_id(0, 1, 0)
    devdir = tmp_path / "devices" / "meter-0"
    devdir.mkdir(parents=True)
    sse_events.write_emissions(devdir / sse_events.EMISSIONS_FILE, [
        (e0[0], "meter-0", "api/overload", 500, 1), (e0[1], "meter-0", "api/overload", 1000, 1),
        (e0[2], "meter-0", "api/overload", 2000, 1), (e0[3], "meter-0", "api/overload", 3000, 1),
        (e1, "meter-1", "api/overload", 1500, 1)])
    ge, sink = tmp_path / "ge", tmp_path / "sink"
    ge.mkdir()
    sink.mkdir()
    _ge(ge, start_mono_ns=900, end_mono_ns=5000)
    (ge / "requests.csv").write_text("index,device,method,path,sent_ns,outcome\n"
                                     "0,0,GET,api/power,10,ok\n")
    (sink / "sink.json").write_text(json.dumps(sink_summary([("a", "stream"), ("b", "stream")],
                                                            0, 6000)))
    pd.DataFrame({"subscriber": ["a", "a", "a", "b", "b"],
                  "id": [e0[0], e0[1], e0[3], e1, e1],
                  "received_ns": [700, 1300, 3100, 1900, 2000], "kernel": [1] * 5}
                 ).to_csv(sink / "notifications.csv", index=False)
    emitted = sse_events.emission_updates(tmp_path, {"meter-0": 0, "meter-1": 1}, 900, 5000,
                                          5000)
    a, b = analyse(ge, sink, {"a": (0, "api/overload"), "b": (1, "api/overload")}, emitted)
    assert (a.updates, a.notified, a.lost, a.unknown_ids, a.duplicates) == (3, 2, 1, 0, 0)
    assert a.lost_share == pytest.approx(1 / 3)
    # latency over the emissions of the test that arrived (not the one before T0): 300, 100 ns
    assert a.latency_ms["max"] == pytest.approx(300e-6) and a.latency_ms["min"] == \
        pytest.approx(100e-6)
    assert (b.updates, b.notified, b.lost, b.duplicates) == (1, 1, 0, 1)
    assert b.latency_ms["p50"] == pytest.approx(400e-6)


def test_an_emission_too_close_to_the_sinks_stop_is_not_judged_not_lost(tmp_path):
    """The window is the test (start .. start + duration_s), and an emission counts only when
    the sink stayed subscribed notify.timeout_ms after it. A 5 s test from 1 s: the emission at
    5.5 s, with the sink stopped at 6.2 s and a 1 s timeout, is not_judged (its notification
    never came: the sink was gone), not lost; the one at 6.5 s is after the test."""
    ids = [sse_events.event_id(0, 0, n) for n in range(3)]
    devdir = tmp_path / "devices" / "meter-0"
    devdir.mkdir(parents=True)
    s = 10 ** 9
    sse_events.write_emissions(devdir / sse_events.EMISSIONS_FILE, [
        (ids[0], "meter-0", "api/overload", 3 * s, 1),
        (ids[1], "meter-0", "api/overload", 5 * s + s // 2, 1),
        (ids[2], "meter-0", "api/overload", 6 * s + s // 2, 1)])
    ge, sink = tmp_path / "ge", tmp_path / "sink"
    ge.mkdir()
    sink.mkdir()
    # the GE's own end (after its drain) is well beyond the test: it is not the window
    ges = _ge(ge, start_mono_ns=s, end_mono_ns=9 * s)
    (ge / "requests.csv").write_text("index,device,method,path,sent_ns,outcome\n")
    (sink / "sink.json").write_text(json.dumps(sink_summary([("meter-0-overload", "stream")],
                                                            0, 6 * s + s // 5)))
    pd.DataFrame({"subscriber": ["meter-0-overload"], "id": [ids[0]],
                  "received_ns": [3 * s + 50_000], "kernel": [1]}
                 ).to_csv(sink / "notifications.csv", index=False)
    _resolved(tmp_path, duration_s=5)    # notify.timeout_ms: its default, 1000
    (a,) = notify_block(tmp_path, ges).subscribers
    assert (a.updates, a.notified, a.lost, a.not_judged, a.unknown_ids) == (1, 1, 0, 1, 0)
    assert a.latency_ms.max == pytest.approx(0.05)


def test_a_missing_emission_file_is_a_testbed_failure_not_no_loss(tmp_path):
    """The Thing writes its emissions only on a clean stop: a killed one leaves no file. Its
    event subscriber must not read as 0 updates, nothing lost: the block names the failure and
    the run's verdict is invalid."""
    from wotbench.analysis.notify_sink import invalidate
    from wotbench.rundir.summary import Checks, Verdict
    e = sse_events.event_id(0, 0, 0)
    ge, sink = tmp_path / "ge", tmp_path / "sink"
    ge.mkdir()
    sink.mkdir()
    (tmp_path / "devices" / "meter-0").mkdir(parents=True)   # no sse-events.csv in it
    ges = _ge(ge, start_mono_ns=0, end_mono_ns=10 ** 10)
    (ge / "requests.csv").write_text("index,device,method,path,sent_ns,outcome\n"
                                     "0,0,GET,api/power,10,ok\n")
    (sink / "sink.json").write_text(json.dumps(sink_summary([("meter-0-overload", "stream")])))
    pd.DataFrame({"subscriber": ["meter-0-overload"], "id": [e], "received_ns": [10 ** 9],
                  "kernel": [1]}).to_csv(sink / "notifications.csv", index=False)
    _resolved(tmp_path, duration_s=5)
    block = notify_block(tmp_path, ges)
    assert block.failures == [
        "notify: subscriber meter-0-overload: no emission of meter-0 in any "
        "devices/*/sse-events.csv (its HTTP Thing process did not stop cleanly, or its file "
        "is missing): its events' updates and losses are unknown"]
    v = Verdict(status="trustworthy", reasons=["fine"], exit_code=0,
                checks=Checks(data="ok", ge="kept_up", contention="none"))
    invalidate(v, block)
    assert (v.status, v.exit_code, v.checks.data) == ("invalid", 3, "invalid")
    assert v.reasons == block.failures + ["fine"]
    # the Thing stopped cleanly (its file, even with no emission of it yet): no failure
    sse_events.write_emissions(tmp_path / "devices" / "meter-0" / sse_events.EMISSIONS_FILE, [])
    assert notify_block(tmp_path, ges).failures == []


def test_a_resolved_config_that_is_no_config_names_the_file_and_the_key(tmp_path):
    """The notify block reads the analysis's one read of config.resolved.yaml as a whole
    Config: a key the Config does not know is an AnalysisError naming the file and the key."""
    from wotbench.analysis.errors import AnalysisError
    ge, sink = tmp_path / "ge", tmp_path / "sink"
    ge.mkdir()
    sink.mkdir()
    ges = _ge(ge, start_mono_ns=0, end_mono_ns=10 ** 10)
    (ge / "requests.csv").write_text("index,device,method,path,sent_ns,outcome\n")
    (sink / "sink.json").write_text(json.dumps(sink_summary([("meter-0-overload", "stream")])))
    pd.DataFrame({"subscriber": [], "id": [], "received_ns": [], "kernel": []}
                 ).to_csv(sink / "notifications.csv", index=False)
    _resolved(tmp_path, duration_s=5)
    conf = tmp_path / "config.resolved.yaml"
    conf.write_text(conf.read_text() + "no_such_key: 1\n")
    with pytest.raises(AnalysisError) as e:
        notify_block(tmp_path, ges)
    assert str(conf) in str(e.value) and "no_such_key" in str(e.value)
