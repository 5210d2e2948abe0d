"""Per-request values in the GE's HTTP templates and the closed loop's request budgets (issue 35,
gateway-emulator/src/template_vars.c, pace.c): {{seq}} {{client}} {{rand}} {{time_ms}}
{{time_ns}} in the path, a header and the body, open and closed loop; --requests-per-client
(N clients x M requests, then the clients stop) and --ramp-ms, against the scriptable server."""
import json
import re
import time

from testkit.ge import check_consistent, run_ge, write_trace
from testkit.http_server import HttpServer

BODY = '{"id": "urn:e:{{seq}}", "c": "{{client}}", "r": "{{rand}}", "t": {{time_ms}}, ' \
       '"ns": {{time_ns}}, "d": {{device}}}'


def test_open_loop_values_in_path_header_and_body(ge_asan_bin, tmp_path):
    (tmp_path / "body.json").write_text(BODY)
    with HttpServer() as srv:
        rows = [(i % 3, 1000 * i, "POST", srv.uri("ent/{{seq}}?r={{rand}}"), 0) for i in range(40)]
        trace = write_trace(tmp_path / "t.csv", rows)
        t0 = time.time_ns()
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--http-connections", "2",
                   "--http-header", "X-Seq: {{seq}}", "--http-body-template",
                   str(tmp_path / "body.json"), "--seed", "7")
        t1 = time.time_ns()
        seen = list(srv.seen)
    assert p.returncode == 0, p.stderr
    got, s = check_consistent(tmp_path / "o", 40)
    assert all(g["outcome"] == "ok" for g in got)
    assert len(seen) == 40
    seqs = set()
    for x in seen:
        b = json.loads(x.body)
        m = re.fullmatch(r"/ent/(\d{10})\?r=([0-9a-f]{16})", x.target)
        assert m, x.target
        seq = int(m.group(1))
        seqs.add(seq)
        # the same request's values agree wherever they appear
        assert b["id"] == f"urn:e:{m.group(1)}" and x.headers["x-seq"] == m.group(1)
        assert b["r"] == m.group(2) and b["d"] == seq % 3
        assert re.fullmatch(r"\d{5}", b["c"]) and int(b["c"]) < 2   # the connection: 2 of them
        assert t0 // 10**6 <= b["t"] <= t1 // 10**6 and t0 <= b["ns"] <= t1
        assert int(x.headers["content-length"]) == len(x.body)
    assert seqs == set(range(40))                  # {{seq}} is the requests.csv row
    rands = {json.loads(x.body)["r"] for x in seen}
    assert len(rands) == 40
    # {{rand}} follows --seed: the same seed gives the same values, another seed others
    with HttpServer() as srv:
        trace = write_trace(tmp_path / "t2.csv", [(0, 0, "POST", srv.uri("e/{{rand}}"), 0)])
        for seed in ("7", "7", "8"):
            assert run_ge(ge_asan_bin, trace, tmp_path / f"o{seed}{len(srv.seen)}", "--seed",
                          seed).returncode == 0
        targets = [x.target for x in srv.seen]
    assert targets[0] == targets[1] != targets[2]
    assert targets[0] == "/e/" + next(json.loads(x.body)["r"] for x in seen
                                      if x.target.startswith("/ent/0000000000"))


def test_closed_loop_budget_unique_ids_and_ramp(ge_asan_bin, tmp_path):
    (tmp_path / "body.json").write_text(BODY)
    with HttpServer() as srv:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "POST", srv.uri("ent"), 0),
                                                 (1, 0, "POST", srv.uri("ent"), 0)])
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--timeout-ms", "1000", "--clients", "5",
                   "--duration-ms", "20000", "--requests-per-client", "7", "--ramp-ms", "400",
                   "--select", "one", "--http-body-template", str(tmp_path / "body.json"),
                   timeout=60)
        seen = list(srv.seen)
    assert p.returncode == 0, p.stderr
    got, s = check_consistent(tmp_path / "o", 35)      # 5 x 7, then the clients stopped
    cl = s["closed_loop"]
    assert cl["requests_per_client"] == 7 and cl["clients_done"] == 5 and cl["ramp_ms"] == 400
    assert cl["stopped_ms"] < 10000                     # long before --duration-ms
    ids = [json.loads(x.body)["id"] for x in seen]
    assert len(ids) == 35 and len(set(ids)) == 35       # unique per request
    per = {}
    for x in seen:
        per.setdefault(json.loads(x.body)["c"], 0)
        per[json.loads(x.body)["c"]] += 1
    assert per == {f"{k:05d}": 7 for k in range(5)}     # {{client}} is the client
    first = {}
    for g in got:
        first.setdefault(int(g["client"]), int(g["sent_ns"]))
    # client k's first request no earlier than k/5 of the ramp
    for k, t in first.items():
        assert t >= k * 80_000_000 - 1_000_000, (k, t)
    assert first[4] - first[0] >= 300_000_000


def test_unknown_value_and_budget_without_clients_are_refused(ge_bin, tmp_path):
    with HttpServer() as srv:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", srv.uri("e/{{sequence}}"))])
        p = run_ge(ge_bin, trace, tmp_path / "o")
        assert p.returncode == 2 and "unknown placeholder '{{sequence}}'" in p.stderr
        assert "{{seq}}" in p.stderr and "e/{{sequence}}" in p.stderr
        trace = write_trace(tmp_path / "t2.csv", [(0, 0, "GET", srv.uri("e"))])
        p = run_ge(ge_bin, trace, tmp_path / "o2", "--requests-per-client", "3")
        assert p.returncode == 2 and "--requests-per-client" in p.stderr
        assert "need --clients" in p.stderr
