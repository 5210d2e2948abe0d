"""Things whose forms are HTTP through ``wotbench run`` (issue 34, process backend): the
instances are served by WoTbench's HTTP Thing (wotbench/things/http_thing.py, one process for
the group), the gateway emulator drives the forms over HTTP/1.1, and every request is
answered."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from e2e_support import REPO, finished_run

GE_BIN = REPO / "gateway-emulator" / "build" / "gateway-emulator"


@pytest.mark.long    # a 6 s test, 2 s calibration, report
@pytest.mark.skipif(not GE_BIN.exists(), reason="needs the real gateway-emulator (make build)")
def test_td_with_http_forms_runs_and_every_request_is_answered(harness, tmp_path):
    src = yaml.safe_load((REPO / "configs" / "td-http.yaml").read_text())
    src["things"][0]["td"] = str(REPO / "configs" / src["things"][0]["td"])
    src["things"][0]["count"] = 2
    src.update({"duration_s": 6, "monitor": {"enabled": False},
                "contention_detector": {"calibration_s": 2}})
    p = tmp_path / "td-http.yaml"
    p.write_text(yaml.safe_dump(src))
    rd, reqs = finished_run(harness(str(p)), tmp_path)
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
