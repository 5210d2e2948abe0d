"""The gateway emulator's closed loop (--clients N, gateway-emulator/src/clients.c) and the
open loop from many client endpoints (the trace's client column): each client is its own
source endpoint, has at most one request in flight, thinks after each outcome, and every
request ends in exactly one outcome."""
import shutil
import subprocess
import time
from collections import Counter, defaultdict

import pytest

from testkit.ge import Responder, check_consistent, free_port, loopback_addr, run_ge, write_trace

MS = 1_000_000


def closed(binary, trace, out, *args, timeout=60):
    return run_ge(binary, trace, out, "--timeout-ms", "1000", *args, timeout=timeout)


def by_client(rows):
    out = defaultdict(list)
    for r in rows:
        out[int(r["client"])].append(r)
    return out


def test_clients_are_distinct_endpoints_one_request_in_flight(ge_asan_bin, tmp_path):
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri("a")), (1, 0, "GET", r.uri("b"))])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "8", "--duration-ms", "300")
        ports = Counter(q[1] for q in r.requests)
    assert p.returncode == 0, p.stderr
    rows = [x for x in check_consistent(tmp_path / "o", len(r.requests))[0]]
    s = check_consistent(tmp_path / "o", len(rows))[1]
    assert s["clients"] == 8 and s["closed_loop"]["clients"] == 8
    assert len(ports) == 8                      # the server saw 8 source endpoints
    assert all(x["outcome"] == "ok" for x in rows)
    for c, rs in by_client(rows).items():
        # one in flight: each request leaves after the previous one's response arrived
        for a, b in zip(rs, rs[1:]):
            assert int(b["sent_ns"]) >= int(a["received_kernel_ns"] or a["received_ns"])
            # think 0: it meant to go at the previous response's kernel stamp
            assert int(b["scheduled_ns"]) == int(a["received_kernel_ns"] or a["received_ns"])
    # one server answering in turn: the clients share it about evenly
    per = [len(v) for v in by_client(rows).values()]
    assert min(per) > 10 and max(per) < 2 * min(per)


def test_round_robin_one_and_random_targets(ge_asan_bin, tmp_path):
    with Responder() as r:
        rows = [(d, 0, "GET", r.uri(f"p{d}")) for d in range(4)]
        trace = write_trace(tmp_path / "t.csv", rows)
        for sel in ("round-robin", "one", "random"):
            p = closed(ge_asan_bin, trace, tmp_path / sel, "--clients", "3", "--duration-ms",
                       "150", "--select", sel)
            assert p.returncode == 0, p.stderr
    got = {sel: check_consistent(tmp_path / sel, sum(1 for _ in open(tmp_path / sel / "requests.csv")) - 1)[0]
           for sel in ("round-robin", "one", "random")}
    assert {x["path"] for x in got["one"]} == {"p0"}
    for c, rs in by_client(got["round-robin"]).items():   # client c starts at target c
        assert [x["path"] for x in rs[:6]] == [f"p{(c + k) % 4}" for k in range(6)]
        assert all(int(x["device"]) == int(x["path"][1:]) for x in rs)
    rnd = Counter(x["path"] for x in got["random"])
    assert set(rnd) == {"p0", "p1", "p2", "p3"} and min(rnd.values()) > 0.15 * sum(rnd.values())


def test_think_time_and_phases(ge_asan_bin, tmp_path):
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "4", "--duration-ms", "600",
                   "--think", "const:20000", "--mark-warmup-ms", "100", "--mark-cooldown-ms", "100")
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)
    cl = s["closed_loop"]
    assert cl["think"] == "const" and cl["think_a_us"] == 20000 and cl["warmup_ms"] == 100
    for c, rs in by_client(rows).items():
        for a, b in zip(rs, rs[1:]):   # the next request is meant 20 ms after the response
            done = int(a["received_kernel_ns"] or a["received_ns"])
            assert int(b["scheduled_ns"]) == done + 20 * MS
            assert int(b["sent_ns"]) >= int(b["scheduled_ns"])
        assert 600 / 21 - 3 <= len(rs) <= 600 / 20 + 1
    for x in rows:   # the phase follows the send instant
        t = int(x["sent_ns"])
        want = "warmup" if t < 100 * MS else "cooldown" if t >= 500 * MS else "measure"
        assert x["phase"] == want
    assert {x["phase"] for x in rows} == {"warmup", "measure", "cooldown"}


def test_silent_target_times_out_and_the_client_goes_on(ge_asan_bin, tmp_path):
    with Responder("silent") as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--clients", "2", "--duration-ms", "450",
                   "--timeout-ms", "100")
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)
    assert s["outcomes"]["timeout"] == n and 2 * 4 <= n <= 2 * 5
    for c, rs in by_client(rows).items():   # each timeout starts the next request
        for a, b in zip(rs, rs[1:]):
            assert int(b["sent_ns"]) - int(a["sent_ns"]) >= 100 * MS


def test_con_retransmission_in_closed_loop(ge_asan_bin, tmp_path):
    with Responder("drop_first") as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--clients", "2", "--duration-ms", "200",
                   "--retransmit", "--timeout-ms", "8000")
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)
    assert s["outcomes"]["ok"] == n and n >= 2
    assert all(int(x["retransmissions"]) == 1 for x in rows)   # every first copy was dropped


def test_record_table_full_stops_the_clients(ge_asan_bin, tmp_path):
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "4", "--duration-ms", "5000",
                   "--max-requests", "50")
    assert p.returncode == 0, p.stderr
    rows, s = check_consistent(tmp_path / "o", 50)
    assert s["closed_loop"]["capacity_reached"] is True and s["closed_loop"]["capacity"] == 50
    assert s["closed_loop"]["stopped_ms"] == 0   # stopped by the table, not by the duration
    assert s["duration_s"] < 2


@pytest.mark.parametrize("args,message", [
    (["--clients", "4"], "--clients needs --duration-ms"),
    (["--duration-ms", "100"], "need --clients"),
    (["--clients", "4", "--duration-ms", "100", "--think", "exp:"], "bad value 'exp:' for --think"),
    (["--clients", "4", "--duration-ms", "100", "--select", "rr"], "bad value 'rr' for --select"),
    (["--clients", "4", "--duration-ms", "100", "--mark-warmup-ms", "60",
      "--mark-cooldown-ms", "40"], "leave nothing of --duration-ms"),
    (["--clients", "4", "--duration-ms", "100", "--block-size", "64"], "--clients with --block-size"),
    (["--clients", "4", "--duration-ms", "100", "--ports-per-device", "2"], "--ports-per-device"),
    (["--clients", "70000", "--duration-ms", "100"], "expected 1..60000"),
])
def test_bad_closed_loop_options(ge_asan_bin, tmp_path, args, message):
    trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", "coap://127.0.0.1:5999/x")])
    p = run_ge(ge_asan_bin, trace, tmp_path / "o", *args)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_client_count_beyond_the_fd_limit_is_bad_input(ge_bin, tmp_path):
    trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", "coap://127.0.0.1:5999/x")])
    p = subprocess.run(["sh", "-c", f"ulimit -n 200; exec {ge_bin} --trace {trace} --out "
                        f"{tmp_path / 'o'} --clients 1000 --duration-ms 100"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "--clients 1000 needs 1064 file descriptors" in p.stderr and "ulimit" in p.stderr
    assert not (tmp_path / "o" / "requests.csv").exists()   # nothing started


def test_thousand_clients_against_libcoap_server(ge_bin, tmp_path):
    if not shutil.which("coap-server-notls"):
        pytest.skip("coap-server-notls not installed (apt-get install libcoap3-bin)")
    host = loopback_addr()
    port = free_port(host)
    srv = subprocess.Popen(["coap-server-notls", "-A", host, "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", f"coap://{host}:{port}/time")])
        p = run_ge(ge_bin, trace, tmp_path / "o", "--clients", "1000", "--duration-ms", "500",
                   "--timeout-ms", "3000", "--retransmit")
    finally:
        srv.terminate()
        srv.wait(5)
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)
    assert len({x["client"] for x in rows}) == 1000
    assert s["outcomes"]["ok"] >= 0.95 * n


# ---------------------------------------------------------------- open loop, many endpoints
def test_trace_client_column_sends_from_that_endpoint(ge_asan_bin, tmp_path):
    with Responder() as r:
        rows = [(0, 1000 + 500 * i, "GET", r.uri(), 0, i % 50) for i in range(300)]
        trace = write_trace(tmp_path / "t.csv", rows)
        p = run_ge(ge_asan_bin, trace, tmp_path / "o", "--timeout-ms", "2000")
        reqs = list(r.requests)
    assert p.returncode == 0, p.stderr
    got, s = check_consistent(tmp_path / "o", 300)
    assert s["clients"] == 50 and s.get("closed_loop") is None
    assert s["outcomes"]["ok"] == 300
    assert [int(x["client"]) for x in got] == [i % 50 for i in range(300)]
    assert all(x["phase"] == "" for x in got)            # open loop: every request counts
    port_of = {}
    for (_, port, _, _, tok), x in zip(sorted(reqs), got):   # arrival order = trace order here
        port_of.setdefault(int(x["client"]), set()).add(port)
    assert all(len(v) == 1 for v in port_of.values())    # one endpoint per client
    assert len({next(iter(v)) for v in port_of.values()}) == 50


@pytest.mark.parametrize("line,message", [
    ("0,0,GET,coap://127.0.0.1:5999/x,0,70000", "bad client '70000'"),
    ("0,0,GET,coap://127.0.0.1:5999/x,0,x", "bad client 'x'"),
])
def test_trace_client_column_errors(ge_asan_bin, tmp_path, line, message):
    trace = tmp_path / "t.csv"
    trace.write_text("device_id,send_time_us,method,uri\n" + line + "\n")
    p = run_ge(ge_asan_bin, trace, tmp_path / "o")
    assert p.returncode == 2 and message in p.stderr and "t.csv:2:" in p.stderr, p.stderr


def test_trace_client_column_all_lines_or_none(ge_asan_bin, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("0,0,GET,coap://127.0.0.1:5999/x,0,1\n0,5,GET,coap://127.0.0.1:5999/x\n")
    p = run_ge(ge_asan_bin, trace, tmp_path / "o")
    assert p.returncode == 2 and "t.csv:2:" in p.stderr and "client column" in p.stderr, p.stderr


def test_ten_thousand_clients_from_one_ge(ge_bin, tmp_path):
    import resource
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 10064:
        pytest.skip("RLIMIT_NOFILE hard limit below 10064: 10,000 client sockets do not fit")
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = run_ge(ge_bin, trace, tmp_path / "o", "--clients", "10000", "--duration-ms", "400",
                   "--timeout-ms", "200", timeout=120)
        ports = {q[1] for q in r.requests}
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)   # one outcome per request, counts add up
    assert len({x["client"] for x in rows}) == 10000        # every client issued
    assert len(ports) > 5000       # the responder saw thousands of distinct source ports
    assert s["closed_loop"]["capacity_reached"] is False


def test_journal_is_not_kept_with_clients(ge_asan_bin, tmp_path):
    """--journal holds the trace's request table; a closed loop's records are its own: the GE
    says so and runs without one (nothing to salvage from, nothing half-written)."""
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "3", "--duration-ms", "100",
                   "--journal", str(tmp_path / "ge.journal"))
    assert p.returncode == 0, p.stderr
    assert "--journal is not kept with --clients" in p.stderr
    assert not (tmp_path / "ge.journal").exists()
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    check_consistent(tmp_path / "o", n)


def test_non_requests_in_closed_loop(ge_asan_bin, tmp_path):
    with Responder() as r:
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", r.uri())])
        p = closed(ge_asan_bin, trace, tmp_path / "o", "--clients", "4", "--duration-ms", "150",
                   "--type", "non")
        types = {q[2] for q in r.requests}
    assert p.returncode == 0, p.stderr
    n = sum(1 for _ in open(tmp_path / "o" / "requests.csv")) - 1
    rows, s = check_consistent(tmp_path / "o", n)
    assert types == {1} and s["type"] == "non"          # every request left as NON
    assert s["outcomes"]["ok"] == n and len(by_client(rows)) == 4
