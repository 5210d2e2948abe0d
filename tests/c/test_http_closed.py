"""The gateway emulator's closed loop over HTTP (--clients N with http://,
gateway-emulator/src/http_clients.c), against Debian's nginx and the scriptable test server: each
client owns one TCP connection, has one request in flight, thinks after each outcome, and every
request ends in exactly one outcome; and a killed http:// GE's journal keeps its status codes."""
import json
import os
import signal
import subprocess
import time
from collections import Counter, defaultdict

import pytest

from testkit.ge import check_consistent, run_ge, write_trace
from testkit.http_server import HttpServer
from testkit.nginx import Nginx, nginx_path
from wotbench.runner.teardown.ge_journal import salvage

MS = 1_000_000
needs_nginx = pytest.mark.skipif(not nginx_path(), reason="nginx is not installed "
                                 "(apt-get install nginx)")


def closed(binary, trace, out, *args, timeout=60):
    return run_ge(binary, trace, out, "--timeout-ms", "1000", *args, timeout=timeout)


def rows_of(out):
    n = json.loads((out / "summary.json").read_text())["requests"]
    return check_consistent(out, n)


def by_client(rows):
    out = defaultdict(list)
    for r in rows:
        out[int(r["client"])].append(r)
    return out


@needs_nginx
def test_keep_alive_clients_against_nginx(ge_asan_bin, tmp_path):
    with Nginx() as ng:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", ng.uri()),
                                                 (1, 0, "POST", ng.uri("echo"), 40)])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "8", "--duration-ms", "500",
                   "--select", "one", "--mark-warmup-ms", "100", "--mark-cooldown-ms", "100")
    assert p.returncode == 0, p.stderr
    rows, s = rows_of(tmp_path / "o")
    assert len(rows) > 50 and all(x["outcome"] == "ok" and x["code"] == "200" for x in rows)
    assert s["clients"] == 8 and s["closed_loop"]["clients"] == 8
    h = s["http"]   # one connection per client, opened before the start and kept
    assert h["connection"] == "keep-alive" and h["connections"] == 8 and h["connects"] == 8
    assert h["new_connection_requests"] == 0 and h["status_classes"]["2xx"] == len(rows)
    assert s["rx_stamps"] == "kernel"
    assert len(by_client(rows)) == 8
    for c, rs in by_client(rows).items():
        for a, b in zip(rs, rs[1:]):   # one in flight; think 0: it meant to go at the response
            assert int(b["sent_ns"]) >= int(a["received_kernel_ns"]) == int(b["scheduled_ns"])
    for x in rows:                     # the phase follows the send instant
        t = int(x["sent_ns"])
        assert x["phase"] == ("warmup" if t < 100 * MS else "cooldown" if t >= 400 * MS
                              else "measure")


@needs_nginx
def test_a_thousand_clients_each_with_its_connection(ge_bin, tmp_path):
    """1000 clients: 1000 connections (the fd limit raised as needed), every one served."""
    with Nginx() as ng:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", ng.uri())])
        start = time.monotonic_ns() + 1500 * MS   # room to connect them all before the start
        p = closed(ge_bin, trace, tmp_path / "o", "--clients", "1000", "--duration-ms", "800",
                   "--think", "const:20000", "--start-at", str(start), "--warmup-ms", "1000")
    assert p.returncode == 0, p.stderr
    rows, s = rows_of(tmp_path / "o")
    assert Counter(x["outcome"] for x in rows) == {"ok": len(rows)}
    assert len(by_client(rows)) == 1000 and s["http"]["connections"] == 1000
    assert s["http"]["connects"] == 1000 and s["warmup"]["answered"] == 1


def test_connection_per_request_and_status_codes(ge_asan_bin, tmp_path):
    with HttpServer("status:503") as srv:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "PUT", srv.uri("x"), 20)])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "3", "--duration-ms", "300",
                   "--http-connection-per-request", "--think", "const:5000")
        conns, seen = srv.conns, list(srv.seen)
    assert p.returncode == 0, p.stderr
    rows, s = rows_of(tmp_path / "o")
    assert rows and all(x["outcome"] == "error" and x["code"] == "503" for x in rows)
    assert {x.headers.get("connection") for x in seen} == {"close"}
    assert all(x.method == "PUT" and len(x.body) == 20 for x in seen)
    # a connection per request: as many as requests (the server closed none itself)
    assert s["http"]["connects"] == len(rows) == conns == s["http"]["new_connection_requests"]
    assert s["http"]["status_classes"]["5xx"] == len(rows)


def test_a_client_changing_target_reconnects(ge_asan_bin, tmp_path):
    with HttpServer() as a, HttpServer() as b:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", a.uri("a")), (1, 0, "GET", b.uri("b"))])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "2", "--duration-ms", "200",
                   "--think", "const:10000")
    assert p.returncode == 0, p.stderr
    rows, s = rows_of(tmp_path / "o")
    assert all(x["outcome"] == "ok" for x in rows)
    for c, rs in by_client(rows).items():   # round robin from target c: a, b, a, b ...
        assert [x["path"] for x in rs[:4]] == (["a", "b"] * 3)[c:c + 4]
    # the first request of each client found its connection open; every later one switched
    new = [x["new_connection"] for x in csv_rows(tmp_path / "o" / "http.csv")]
    assert new.count("0") == 2 and new.count("1") == len(rows) - 2


def csv_rows(path):
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def two_clients_against(binary, tmp_path, mode, name, *args):
    """2 clients against the test server in `mode`; (rows, summary) of the run."""
    with HttpServer(mode) as srv:
        trace = write_trace(tmp_path / f"{name}.csv", [(0, 0, "GET", srv.uri())])
        p = run_ge(binary, trace, tmp_path / name, "--clients", "2", *args)
    assert p.returncode == 0, p.stderr
    return rows_of(tmp_path / name)


def test_reset_and_silent_servers(ge_asan_bin, tmp_path):
    rows, s = two_clients_against(ge_asan_bin, tmp_path, "reset", "r", "--duration-ms", "200",
                                  "--think", "const:20000", "--timeout-ms", "1000")
    assert rows and all(x["outcome"] == "reset" and x["code"] == "" for x in rows)
    for x in rows:   # the reset has the instant it was seen
        assert int(x["received_ns"]) >= int(x["sent_ns"])
    rows, s = two_clients_against(ge_asan_bin, tmp_path, "silent", "s", "--duration-ms", "450",
                                  "--timeout-ms", "100")
    assert s["outcomes"]["timeout"] == len(rows) and 2 * 4 <= len(rows) <= 2 * 5
    new = {x["index"]: x["new_connection"] for x in csv_rows(tmp_path / "s" / "http.csv")}
    for c, rs in by_client(rows).items():   # each timeout closes the connection; the next connects
        assert [new[r["index"]] for r in rs[1:]] == ["1"] * (len(rs) - 1)


def test_http_connections_with_clients_is_refused(ge_bin, tmp_path):
    trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", "http://127.0.0.1:9/x")])
    p = closed(ge_bin, trace, tmp_path / "o", "--clients", "2", "--duration-ms", "100",
               "--http-connections", "4")
    assert p.returncode == 2 and "every client owns one connection" in p.stderr


def test_a_killed_http_ge_journal_keeps_the_status_codes(ge_bin, tmp_path):
    """SIGKILL mid-run: the journal (in /dev/shm when it exists) still holds each answered
    request's HTTP status, which the salvage writes as the GE would have (200, 503)."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path)
    journal = os.path.join(shm, f"wb-test-http-{os.getpid()}.journal")
    try:
        with HttpServer() as ok, HttpServer("status:503") as busy:
            rows = [(i % 2, i * 20_000, "GET", (ok if i % 2 == 0 else busy).uri(f"p{i}"))
                    for i in range(200)]       # 4 s of requests; killed after ~0.6 s
            trace = write_trace(tmp_path / "t.csv", rows)
            ge = subprocess.Popen([str(ge_bin), "--trace", str(trace), "--out",
                                   str(tmp_path / "o"), "--journal", journal,
                                   "--http-connections", "2"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.7)
            ge.send_signal(signal.SIGKILL)
            ge.wait()
            died = time.monotonic_ns()
        assert not (tmp_path / "o" / "summary.json").exists()
        counts = salvage(journal, trace, tmp_path / "o", "ge-0", died,
                         {"wait": "busy", "type": "con", "retransmit": False})
    finally:
        if os.path.exists(journal):
            os.unlink(journal)
    got = csv_rows(tmp_path / "o" / "requests.csv")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert len(got) == 200 and sum(counts.values()) == 200 and s["salvaged"]
    assert Counter(x["outcome"] for x in got) == {k: v for k, v in counts.items() if v}
    answered = [x for x in got if x["code"]]
    assert len(answered) >= 10 and counts["unsent"] >= 100
    for x in answered:   # even lines went to the 200 server, odd ones to the 503 one
        i = int(x["index"])
        assert (x["code"], x["outcome"]) == (("200", "ok") if i % 2 == 0 else ("503", "error"))
        assert x["path"] == f"p{i}"
