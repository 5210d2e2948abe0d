"""Things whose forms are HTTP through ``wotbench run`` (issue 34, process backend): the
instances are served by WoTbench's HTTP Thing (wotbench/things/http_thing.py, one process for
the group), the gateway emulator drives the forms over HTTP/1.1, and every request is
answered; observed over Server-Sent Events, every write is notified to the notification sink."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from e2e_support import REPO, finished_run

GE_BIN = REPO / "gateway-emulator" / "build" / "gateway-emulator"


SINK_BIN = REPO / "gateway-emulator" / "build" / "notify-sink"


def _short_run(harness, tmp_path, config: str, count: int):
    """``configs/<config>`` with ``count`` instances, a 6 s test after 2 s of calibration."""
    src = yaml.safe_load((REPO / "configs" / config).read_text())
    src["things"][0]["td"] = str(REPO / "configs" / src["things"][0]["td"])
    src["things"][0]["count"] = count
    src.update({"duration_s": 6, "monitor": {"enabled": False},
                "contention_detector": {"calibration_s": 2}})
    p = tmp_path / config
    p.write_text(yaml.safe_dump(src))
    return finished_run(harness(str(p)), tmp_path)


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists(), reason="needs the real gateway-emulator (make build)")
def test_td_with_http_forms_runs_and_every_request_is_answered(harness, tmp_path):
    rd, reqs = _short_run(harness, tmp_path, "td-http.yaml", 2)
    by = {}
    for r in reqs:
        by.setdefault((r["method"], r["path"].lstrip("/")), []).append(r)
    assert set(by) == {("GET", "api/power"), ("GET", "api/state"), ("PUT", "api/state"),
                       ("PUT", "api/schedule"), ("POST", "api/reset")}, set(by)
    assert all(r["outcome"] == "ok" for r in reqs), [r for r in reqs if r["outcome"] != "ok"][:5]
    assert {r["code"] for m, _ in by for r in by[(m, _)] if m == "GET"} == {"200"}
    assert {r["code"] for r in by[("PUT", "api/state")]} == {"204"}
    assert {r["code"] for r in by[("POST", "api/reset")]} == {"200"}
    # the invocation's 10 ms service time is in its R (answer - send), the reads' 2 ms in theirs
    def r_ms(rows):
        return sorted((int(r["received_ns"]) - int(r["sent_ns"])) / 1e6 for r in rows)
    assert r_ms(by[("POST", "api/reset")])[0] >= 10.0
    assert r_ms(by[("GET", "api/power")])[0] >= 2.0
    html = (rd / "report.html").read_text()
    assert 'id="table-things"' in html and "actions/reset" in html and "SmartPlug" in html
    tds = [json.loads(x)["td"] for x in (rd / "trace/things/tds.jsonl").read_text().splitlines()]
    assert [t["base"].split(":")[0] for t in tds] == ["http", "http"]
    # one process served both plugs (the runner starts one per group and cores)
    out = (rd / "devices" / "plug-0" / "stdout.log").read_text()
    assert "http_thing: 2 instance(s) listening" in out, out
    assert not (rd / "devices" / "plug-1" / "stdout.log").exists()


def _each_write_notified_to_its_own_plug(rd, reqs) -> list[dict]:
    """The PUTs were answered 204, and each write's id arrived once, on its own plug's
    subscriber, with a kernel stamp; the PUTs."""
    puts = [r for r in reqs if r["method"] == "PUT"]
    assert puts and all(r["outcome"] == "ok" and r["code"] == "204" for r in puts), puts[:5]
    with open(rd / "sink" / "notifications.csv") as f:
        notes = list(csv.DictReader(f))
    got = {int(n["id"]): n["subscriber"] for n in notes}
    assert len(notes) == len(got) == len(puts)
    assert all(got[int(r["index"])] == f"plug-{r['device']}-state" for r in puts)
    assert all(n["kernel"] == "1" for n in notes)
    return puts


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists() or not SINK_BIN.exists(),
                    reason="needs the real gateway-emulator and notify-sink (make build)")
def test_every_write_of_an_observed_http_thing_is_notified_over_sse(harness, tmp_path):
    """The notification sink holds one event stream per plug (made from the load's
    observeproperty entry), the GE writes the plugs' state, and every write is notified to its
    own plug's stream with its id, with an update -> notification latency."""
    rd, reqs = _short_run(harness, tmp_path, "td-http-observe.yaml", 3)
    puts = _each_write_notified_to_its_own_plug(rd, reqs)
    block = json.loads((rd / "summary.json").read_text())["notify"]
    subs = block["subscribers"]
    assert [s["name"] for s in subs] == ["plug-0-state", "plug-1-state", "plug-2-state"]
    assert sum(s["updates"] for s in subs) == len(puts)
    for s in subs:
        assert s["lost"] == 0 and s["unknown_ids"] == 0 and s["duplicates"] == 0, s
        if s["updates"]:   # after the write's 2 ms service time, from the GE's send stamp
            assert s["latency_ms"]["min"] >= 2.0, s


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists() or not SINK_BIN.exists(),
                    reason="needs the real gateway-emulator and notify-sink (make build)")
def test_the_events_an_http_thing_emits_are_joined_to_the_sinks_arrivals(harness, tmp_path):
    """Three meters emit their overload event on their own schedule over SSE (a sink stream
    each, made from the load's subscribeevent entry); the Thing process writes its emissions at
    the stop and summary.json's notify block counts per meter the events emitted during the
    test, notified and lost, with an emission -> notification latency."""
    rd, reqs = _short_run(harness, tmp_path, "td-http-events.yaml", 3)
    assert reqs and all(r["outcome"] == "ok" for r in reqs), reqs[:5]
    with open(rd / "devices" / "meter-0" / "sse-events.csv") as f:
        emitted = list(csv.DictReader(f))
    assert {e["device"] for e in emitted} == {"meter-0", "meter-1", "meter-2"}
    with open(rd / "sink" / "notifications.csv") as f:
        notes = list(csv.DictReader(f))
    by_id = {e["id"]: e for e in emitted}
    # every arrival is an emission of the subscriber's own meter
    assert notes and all(by_id[n["id"]]["device"] + "-overload" == n["subscriber"]
                         for n in notes)
    subs = json.loads((rd / "summary.json").read_text())["notify"]["subscribers"]
    assert [s["name"] for s in subs] == ["meter-0-overload", "meter-1-overload",
                                         "meter-2-overload"]
    for s in subs:   # 6 s at a mean of 250 ms: some 24 events each
        assert s["updates"] > 5 and s["lost"] == 0 and s["unknown_ids"] == 0, s
        assert s["duplicates"] == 0 and s["latency_ms"]["min"] > 0, s


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists() or not SINK_BIN.exists(),
                    reason="needs the real gateway-emulator and notify-sink (make build)")
def test_every_write_of_an_http_thing_observed_by_long_poll_is_notified(harness, tmp_path):
    """The sink holds one long-poll GET per plug (made from the load's observeproperty entry,
    a form with subprotocol longpoll), the GE writes the plugs' state, the Thing answers the held
    GET with the write's id and the sink polls again at once: every write is notified."""
    rd, reqs = _short_run(harness, tmp_path, "td-http-longpoll.yaml", 3)
    puts = _each_write_notified_to_its_own_plug(rd, reqs)
    sink = json.loads((rd / "sink" / "sink.json").read_text())
    for s, n in zip(sink["subscribers"], range(3)):
        mine = sum(1 for r in puts if r["device"] == str(n))
        # one answer per write, then the next GET on the same keep-alive connection
        assert s["kind"] == "longpoll" and s["messages"] == mine, s
        assert s["polls"] == mine + 1 and s["connections"] == 1 and s["errors"] == 0, s
    subs = json.loads((rd / "summary.json").read_text())["notify"]["subscribers"]
    assert sum(s["updates"] for s in subs) == len(puts)
    for s in subs:
        assert s["lost"] == 0 and s["unknown_ids"] == 0 and s["duplicates"] == 0, s
        if s["updates"]:   # after the write's 2 ms service time, from the GE's send stamp
            assert s["latency_ms"]["min"] >= 2.0, s
