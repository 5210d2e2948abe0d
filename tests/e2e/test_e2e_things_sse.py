"""HTTP Things observed over Server-Sent Events through ``wotbench run`` (issue 34, process
backend): the notification sink holds one event stream per plug (made from the load's
observeproperty entry), the gateway emulator writes the plugs' state, and every write is
notified to its own plug's stream with its id, with an update -> notification latency."""
from __future__ import annotations

import csv
import json

import pytest
import yaml

from e2e_support import REPO, finished_run

GE_BIN = REPO / "gateway-emulator" / "build" / "gateway-emulator"
SINK_BIN = REPO / "gateway-emulator" / "build" / "notify-sink"


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists() or not SINK_BIN.exists(),
                    reason="needs the real gateway-emulator and notify-sink (make build)")
def test_every_write_of_an_observed_http_thing_is_notified_over_sse(harness, tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-http-observe.yaml").read_text())
    src["things"][0]["td"] = str(REPO / "configs" / src["things"][0]["td"])
    src["things"][0]["count"] = 3
    src.update({"duration_s": 6, "monitor": {"enabled": False},
                "contention_detector": {"calibration_s": 2}})
    p = tmp_path / "td-http-observe.yaml"
    p.write_text(yaml.safe_dump(src))
    rd, reqs = finished_run(harness(str(p)), tmp_path)
    puts = [r for r in reqs if r["method"] == "PUT"]
    assert puts and all(r["outcome"] == "ok" and r["code"] == "204" for r in puts), puts[:5]
    with open(rd / "sink" / "notifications.csv") as f:
        notes = list(csv.DictReader(f))
    # each write's id arrived on its own plug's stream, once, with a kernel stamp
    got = {int(n["id"]): n["subscriber"] for n in notes}
    assert len(notes) == len(got) == len(puts)
    assert all(got[int(r["index"])] == f"plug-{r['device']}-state" for r in puts)
    assert all(n["kernel"] == "1" for n in notes)
    block = json.loads((rd / "summary.json").read_text())["notify"]
    subs = block["subscribers"]
    assert [s["name"] for s in subs] == ["plug-0-state", "plug-1-state", "plug-2-state"]
    assert sum(s["updates"] for s in subs) == len(puts)
    for s in subs:
        assert s["lost"] == 0 and s["unknown_ids"] == 0 and s["duplicates"] == 0, s
        if s["updates"]:   # after the write's 2 ms service time, from the GE's send stamp
            assert s["latency_ms"]["min"] >= 2.0, s
