"""Per-request values in CoAP request paths (issue 35, gateway-emulator/src/coap_tmpl.c):
{{seq}} {{client}} {{rand}} {{time_ms}} {{time_ns}} in a coap:// path, open and closed loop,
checked by a server nobody here wrote: libcoap's coap-server-notls with dynamic resources
(-d), which creates one resource per PUT to a new path and lists them in /.well-known/core."""
import json
import re
import shutil
import subprocess
import time

import pytest

from testkit.ge import check_consistent, libcoap_dynamic_server as coap_server, run_ge, write_trace

pytestmark = pytest.mark.skipif(not shutil.which("coap-server-notls"),
                                reason="coap-server-notls not installed (apt-get install libcoap3-bin)")


def created(base: str) -> list[str]:
    """The paths the server created (its own listing, fetched block-wise by coap-client)."""
    out = subprocess.run(["coap-client-notls", "-m", "get", f"{base}/.well-known/core"],
                         capture_output=True, text=True, timeout=20).stdout
    return [m for m in re.findall(r"</([^>]*)>;[^,]*Dynamic", out)]


def test_open_loop_values_reach_the_server(ge_asan_bin, tmp_path):
    with coap_server() as base:
        rows = [(0, 2000 * i, "PUT", f"{base}/e/x{{{{seq}}}}-{{{{rand}}}}") for i in range(30)]
        rows.append((0, 70000, "PUT", f"{base}/t/{{{{time_ms}}}}/n{{{{time_ns}}}}/c{{{{client}}}}"))
        trace = write_trace(tmp_path / "t.csv", rows)
        t0 = time.time_ns()
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--seed", "7", "--timeout-ms", "2000")
        t1 = time.time_ns()
        assert p.returncode == 0, p.stderr
        got, _ = check_consistent(tmp_path / "o", 31)
        paths = created(base)
    assert all(g["outcome"] == "ok" and g["code"] == "2.01" for g in got), got[:3]
    assert got[0]["path"] == "e/x{{seq}}-{{rand}}"          # requests.csv keeps the template
    ids = [p for p in paths if p.startswith("e/")]
    assert len(ids) == 30 == len(set(ids))                   # a new resource per request
    seqs = sorted(int(re.fullmatch(r"e/x(\d{10})-([0-9a-f]{16})", p).group(1)) for p in ids)
    assert seqs == list(range(30))                           # {{seq}}: the requests.csv row
    (t,) = [p for p in paths if p.startswith("t/")]
    ms, ns, client = re.fullmatch(r"t/(\d{13})/n(\d{19})/c(\d{5})", t).groups()
    assert t0 // 10**6 <= int(ms) <= t1 // 10**6 and t0 <= int(ns) <= t1
    assert int(client) == 0                                  # the one socket that sent it
    # {{rand}} follows --seed: the same seed gives the same value, another seed another
    seen = []
    for seed in ("7", "8"):
        with coap_server() as base:
            trace = write_trace(tmp_path / f"r{seed}.csv", [(0, 0, "PUT", f"{base}/r{{{{rand}}}}")])
            assert run_ge(ge_asan_bin, trace, tmp_path / f"o{seed}", "--seed", seed).returncode == 0
            seen += created(base)
    first = next(p for p in ids if p.startswith("e/x0000000000-"))
    assert seen[0] == "r" + first.split("-")[1] and seen[1] != seen[0]


def test_closed_loop_values_reach_the_server(ge_asan_bin, tmp_path):
    with coap_server() as base:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "PUT", f"{base}/c{{{{client}}}}/s{{{{seq}}}}")])
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--clients", "4", "--requests-per-client",
                   "5", "--duration-ms", "20000", "--timeout-ms", "2000", timeout=60)
        assert p.returncode == 0, p.stderr
        got, _ = check_consistent(tmp_path / "o", 20)
        paths = created(base)
    assert all(g["outcome"] == "ok" for g in got)
    parsed = [re.fullmatch(r"c(\d{5})/s(\d{10})", p).groups() for p in paths]
    assert len(parsed) == 20 == len(set(parsed))
    assert sorted(int(s) for _, s in parsed) == list(range(20))       # the send order's rows
    per = {}
    for c, _ in parsed:
        per[c] = per.get(c, 0) + 1
    assert per == {f"{k:05d}": 5 for k in range(4)}                  # {{client}}: the client


def test_bad_values_are_refused_naming_the_line(ge_asan_bin, tmp_path):
    for uri, why in [("coap://127.0.0.1:5683/e/{{sequence}}", "unknown value '{{sequence}}'"),
                     ("coap://127.0.0.1:5683/e?x={{seq}}", "a value outside the path"),
                     ("coap://127.0.0.1:5683/e%20{{seq}}", "a percent-escape"),
                     ("coap://127.0.0.1:{{seq}}/e", "a value outside the path")]:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", uri)])
        p = run_ge(ge_asan_bin, trace, tmp_path / "o")
        assert p.returncode == 2 and f"{trace}:2:" in p.stderr and why in p.stderr, p.stderr
    trace = write_trace(tmp_path / "t.csv", [(0, 0, "OBSERVE", "coap://127.0.0.1:5683/e{{seq}}")])
    p = run_ge(ge_asan_bin, trace, tmp_path / "o")
    assert p.returncode == 2 and "an observation's path must not change" in p.stderr, p.stderr


def get(uri: str) -> str:
    return subprocess.run(["coap-client-notls", "-m", "get", uri], capture_output=True,
                          text=True, timeout=20).stdout.strip()


PAYLOAD = '{"id":"urn:e:{{seq}}","c":"{{client}}","r":"{{rand}}","t":{{time_ms}},"d":{{device}}}'


def test_payload_values_open_and_closed_loop(ge_asan_bin, tmp_path):
    """--http-body-template with a coap:// trace: the PUT payload, stored by the server's
    dynamic resource and read back with GET: each resource holds its own request's values."""
    (tmp_path / "p.json").write_text(PAYLOAD)
    with coap_server() as base:
        rows = [(i % 2, 3000 * i, "PUT", f"{base}/o/{{{{seq}}}}") for i in range(10)]
        trace = write_trace(tmp_path / "t.csv", rows)
        t0 = time.time_ns()
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--seed", "7", "--timeout-ms", "2000",
                   "--http-body-template", str(tmp_path / "p.json"))
        t1 = time.time_ns()
        assert p.returncode == 0, p.stderr
        bodies = {s: json.loads(get(f"{base}/o/{s:010d}")) for s in range(10)}
        trace = write_trace(tmp_path / "c.csv", [(0, 0, "PUT", f"{base}/c/{{{{seq}}}}")])
        p = run_ge(ge_asan_bin, trace, tmp_path / "oc", "--clients", "3", "--requests-per-client",
                   "4", "--duration-ms", "20000", "--timeout-ms", "2000", "--http-body-template",
                   str(tmp_path / "p.json"), timeout=60)
        assert p.returncode == 0, p.stderr
        closed = {s: json.loads(get(f"{base}/c/{s:010d}")) for s in range(12)}
    for s, b in bodies.items():
        assert b["id"] == f"urn:e:{s:010d}" and b["d"] == s % 2          # its own request's
        assert t0 // 10**6 <= b["t"] <= t1 // 10**6
    assert len({b["r"] for b in bodies.values()}) == 10
    for s, b in closed.items():
        assert b["id"] == f"urn:e:{s:010d}"
    per = {}
    for b in closed.values():
        per[b["c"]] = per.get(b["c"], 0) + 1
    assert per == {f"{k:05d}": 4 for k in range(3)}                      # {{client}}: the client


def test_bad_payload_templates_are_refused(ge_asan_bin, tmp_path):
    trace = write_trace(tmp_path / "t.csv", [(0, 0, "PUT", "coap://127.0.0.1:5683/e")])
    body = tmp_path / "b.txt"
    body.write_text('{"a": 1,\n "b": {{sq}}}\n')
    p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--http-body-template", str(body))
    assert p.returncode == 2 and f"{body}:2:7: unknown placeholder" in p.stderr, p.stderr
    body.write_text("{{payload}}")
    big = write_trace(tmp_path / "b.csv", [(0, 0, "PUT", "coap://127.0.0.1:5683/e", 1000)],
                      header=False)
    big.write_text("device_id,send_time_us,method,uri,payload_bytes\n" + big.read_text())
    p = run_ge(ge_asan_bin, big, tmp_path / "o", "--http-body-template", str(body),
               "--block-size", "64")
    assert p.returncode == 2 and "a templated CoAP payload fits one datagram" in p.stderr, p.stderr
    assert not (tmp_path / "o" / "requests.csv").exists()
