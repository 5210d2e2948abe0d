"""wot-fleet (docs/CONTRACTS.md §3b) with several devices in one process: ports, addresses and
resource files per device, per-device queues and 5.03, separate responses and their RFC 7252
retransmission, duplicate CON requests, NON, the log files. ASan+UBSan build unless said."""
import csv
import os
import socket
import time

import pytest

from testkit.coap import ACK, CON, GET, NON, PUT, RST, Client, code_str, decode, encode, ping
from testkit.fleet import Fleet, Spec, build

FAST = "r0,0,sleep,16\nput/me,0,sleep,0\n"
SLOW = "slow,200000,sleep,4\nbusy,20000,busy,2\n"
OTHER = "a/b/c,5000,sleep,100\n"


@pytest.fixture(scope="module")
def fleet_asan_bin():
    return build("wot-fleet-asan")


@pytest.fixture(scope="module")
def fleet_bin():
    return build("wot-fleet")


def clean_exit(f: Fleet):
    assert f.stop() == 0
    err = f.stderr()
    assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err


def raw_socket(timeout=0.5):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(timeout)
    return s


def recv(s):
    try:
        data, _ = s.recvfrom(2048)
        return decode(data) | {"raw": data}
    except socket.timeout:
        return None


def test_devices_ports_files_and_loops(fleet_asan_bin, tmp_path):
    """Six devices in two loops, two on one address with different ports, three resource
    files: each answers with its own resources and its own index in the logs."""
    host = f"127.0.{os.getpid() % 200 + 1}.{int(time.time()) % 200 + 20}"
    specs = [Spec(10, FAST, (host, 40001)), Spec(11, FAST, (host, 40002)),
             Spec(3, SLOW), Spec(4, OTHER, slots=2), Spec(5, FAST, response="separate"),
             Spec(6, OTHER)]
    with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "2", "--workers", "3") as f:
        logged = {}
        for s in specs:
            c = Client(s.listen)
            first = s.resources.split("\n")[0].split(",")
            r = c.request(GET, first[0], timeout=5)
            assert code_str(r["code"]) == "2.05", s
            assert r["payload"] == b"x" * int(first[3])
            wk = c.request(GET, ".well-known/core")
            assert set(wk["payload"].decode().split(",")) == {
                f"</{line.split(',')[0]}>" for line in s.resources.strip().split("\n")}
            assert code_str(c.request(GET, "nope")["code"]) == "4.04"
            logged[s.index] = [c.sent_tokens[0], c.sent_tokens[2]]   # not .well-known/core
            c.close()
        clean_exit(f)
        rows = f.log()
        for s in specs:
            mine = [r for r in rows if int(r["device"]) == s.index]
            assert [bytes.fromhex(r["token"]) for r in mine] == logged[s.index]
            assert [r["path"] for r in mine] == [s.resources.split(",", 1)[0], ""]
            assert [r["code"] for r in mine] == ["2.05", "4.04"]
        # contiguous blocks: the first three devices of the file in loop 0, the others in loop 1
        summary = f.summary()
        assert [lp["devices"] for lp in summary["loop"]] == [3, 3]
        for loop, want in ((0, {10, 11, 3}), (1, {4, 5, 6})):
            with open(f.logdir / f"fleet-log-{loop}.csv") as fh:
                assert {int(r["device"]) for r in csv.DictReader(fh)} == want
        devs = f.devices()
        assert sorted(devs) == sorted(s.index for s in specs)
        assert sum(int(d["requests"]) for d in devs.values()) == summary["requests"] == len(rows)
        assert summary["devices"] == 6 and summary["loops"] == 2 and summary["workers"] == 3
        assert summary["rss_bytes"] > 0


def test_devices_go_to_loops_by_the_contracts_formula(fleet_asan_bin, tmp_path):
    """Device at file position k runs in loop floor(k * loops / count) (CONTRACTS §3b)."""
    specs = [Spec(100 + k, FAST) for k in range(7)]
    with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "3") as f:
        for s in specs:
            c = Client(s.listen)
            assert code_str(c.request(GET, "r0")["code"]) == "2.05"
            c.close()
        clean_exit(f)
        assert [lp["devices"] for lp in f.summary()["loop"]] == [3, 2, 2]
        for loop in range(3):
            with open(f.logdir / f"fleet-log-{loop}.csv") as fh:
                got = sorted(int(r["device"]) - 100 for r in csv.DictReader(fh))
            assert got == [k for k in range(7) if k * 3 // 7 == loop]


def test_log_rows_stamps_and_due(fleet_asan_bin, tmp_path):
    """Every request is one row; stamps are ordered; due = start + S; a sleep service does not
    end before it is due, a busy one takes at least S."""
    specs = [Spec(0, SLOW, slots=4, response="separate"), Spec(1, FAST), Spec(2, OTHER)]
    with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "2") as f:
        tokens = []
        for s, path in ((specs[0], "slow"), (specs[0], "busy"), (specs[1], "r0"),
                        (specs[2], "a/b/c"), (specs[1], "put/me")):
            c = Client(s.listen)
            for mtype in (CON, NON):
                r = c.request(PUT if path == "put/me" else GET, path, mtype, timeout=5)
                assert r is not None and code_str(r["code"]) in ("2.05", "2.04")
            tokens += c.sent_tokens
            c.close()
        clean_exit(f)
        rows = f.log()
        assert sorted(bytes.fromhex(r["token"]) for r in rows) == sorted(tokens)
        S = {"slow": 200_000_000, "busy": 20_000_000, "r0": 0, "a/b/c": 5_000_000, "put/me": 0}
        for r in rows:
            ak, a, st, e, sent, due = (int(r[k]) for k in (
                "arrival_kernel_ns", "arrival_ns", "start_ns", "end_ns", "response_sent_ns",
                "due_ns"))
            assert ak <= a <= st <= e <= sent, r
            assert due == st + S[r["path"]], r
            assert e >= due, r           # neither a timer nor S of CPU ends early
        s = f.summary()
        late = [lp["timer_late_ns"] for lp in s["loop"] if lp["timer_late_ns"]["p50"] is not None]
        assert late and all(0 <= x["p50"] <= x["p99"] <= x["max"] for x in late)
        assert all(lp["read_lag_ns"]["p50"] is not None for lp in s["loop"])


def test_queue_per_device_fifo_and_isolation(fleet_asan_bin, tmp_path):
    """Each device has its own slots and FIFO queue: overloading one answers 5.03 there while
    a neighbour in the same loop keeps answering at once."""
    specs = [Spec(0, SLOW, slots=1, queue=2, response="separate"),
             Spec(1, SLOW, slots=2, queue=1, response="separate"), Spec(2, FAST)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        ca, cb = Client(specs[0].listen), Client(specs[1].listen)
        ta = [ca.send(GET, "slow", NON) for _ in range(8)]
        tb = [cb.send(GET, "slow", NON) for _ in range(8)]
        c = Client(specs[2].listen)
        r = c.request(GET, "r0", timeout=1)
        assert code_str(r["code"]) == "2.05" and r["rt_ns"] < 50e6   # not behind the others
        ca.poll(5)
        cb.poll(5)
        codes_a = [code_str(ca.results[t]["code"]) for t in ta]
        codes_b = [code_str(cb.results[t]["code"]) for t in tb]
        # the loop takes each datagram in turn: exactly slots + queue accepted
        assert codes_a == ["2.05"] * 3 + ["5.03"] * 5, codes_a
        assert codes_b == ["2.05"] * 3 + ["5.03"] * 5, codes_b
        # FIFO with one slot: each accepted request starts when the previous ends
        rt = sorted(ca.results[t]["rt_ns"] for t in ta[:3])
        assert rt[0] >= 200e6 and rt[1] >= 400e6 and rt[2] >= 600e6, rt
        for cl in (ca, cb, c):
            cl.close()
        clean_exit(f)
        rows = [r for r in f.log() if r["device"] == "0" and r["code"] == "2.05"]
        starts = [int(r["start_ns"]) for r in rows]
        ends = [int(r["end_ns"]) for r in rows]
        assert [bytes.fromhex(r["token"]) for r in rows] == ta[:3]       # completion = arrival order
        assert all(ends[i] <= starts[i + 1] for i in range(2))
        assert int(rows[2]["start_ns"]) - int(rows[2]["arrival_ns"]) >= 380_000_000  # queued
        d = f.devices()
        assert (d[0]["overload_503"], d[1]["overload_503"], d[2]["overload_503"]) == ("5", "5", "0")
        assert f.summary()["loop"][0]["pool_503"] == 0


def test_separate_response_retransmitted_until_rst(fleet_asan_bin, tmp_path):
    """An unacknowledged separate CON response is sent again after ACK_TIMEOUT..1.5 x (2-3 s),
    with the same message ID; a RST ends the exchange."""
    spec = Spec(0, FAST, response="separate")
    with Fleet(fleet_asan_bin, tmp_path, [spec]) as f:
        s = raw_socket(timeout=4)
        s.sendto(encode(CON, GET, 0x1234, b"tok1", "r0"), spec.listen)
        ack = recv(s)
        assert ack["type"] == ACK and ack["code"] == 0 and ack["mid"] == 0x1234
        first = recv(s)
        t0 = time.monotonic()
        assert first["type"] == CON and code_str(first["code"]) == "2.05"
        assert first["token"] == b"tok1" and first["payload"] == b"x" * 16
        again = recv(s)
        waited = time.monotonic() - t0
        assert again is not None and again["raw"] == first["raw"], again
        assert 1.9 <= waited <= 3.2, waited
        s.sendto(encode(RST, 0, first["mid"]), spec.listen)
        s.settimeout(6.5)          # the next copy would come 4-6 s after the previous one
        assert recv(s) is None
        s.close()
        clean_exit(f)
        lp = f.summary()["loop"][0]
        assert (lp["rtx_sent"], lp["rst_in"], lp["rtx_gave_up"]) == (1, 1, 0)
        assert len(f.log()) == 1


def test_duplicate_con_request_not_served_twice(fleet_asan_bin, tmp_path):
    """RFC 7252 §4.5: a CON request sent again with the same message ID is served once. Pending
    separate: another empty ACK; answered in the ACK: the same ACK again."""
    specs = [Spec(0, SLOW, response="separate"), Spec(1, FAST, response="piggyback")]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        s = raw_socket(timeout=2)
        req = encode(CON, GET, 777, b"dup1", "slow")
        s.sendto(req, specs[0].listen)
        assert recv(s)["type"] == ACK
        s.sendto(req, specs[0].listen)
        assert recv(s)["type"] == ACK            # the empty ACK again, no second service
        resp = recv(s)
        assert resp["type"] == CON and resp["token"] == b"dup1"
        s.sendto(encode(ACK, 0, resp["mid"]), specs[0].listen)
        req = encode(CON, GET, 778, b"dup2", "r0")
        s.sendto(req, specs[1].listen)
        a1 = recv(s)
        s.sendto(req, specs[1].listen)
        a2 = recv(s)
        assert a1["type"] == ACK and code_str(a1["code"]) == "2.05" and a2["raw"] == a1["raw"]
        s.settimeout(0.5)
        assert recv(s) is None                    # nothing more: one service each
        s.close()
        clean_exit(f)
        rows = f.log()
        assert sorted(r["token"] for r in rows) == [b"dup1".hex(), b"dup2".hex()]
        lp = f.summary()["loop"][0]
        assert lp["duplicates"] == 2 and lp["rtx_sent"] == 0
        assert f.devices()[0]["requests"] == "1" and f.devices()[1]["requests"] == "1"


def test_non_and_odd_messages(fleet_asan_bin, tmp_path):
    """NON requests get NON responses with a message ID of their own; a ping gets RST; a
    datagram that is not CoAP is counted as malformed; a response sent to a device is
    rejected (RST); a critical option the engine does not handle gets 4.02; FETCH gets 4.05."""
    spec = Spec(0, FAST)
    with Fleet(fleet_asan_bin, tmp_path, [spec]) as f:
        s = raw_socket()
        s.sendto(encode(NON, GET, 9, b"n1", "r0"), spec.listen)
        r = recv(s)
        assert r["type"] == NON and code_str(r["code"]) == "2.05" and r["token"] == b"n1"
        assert ping(spec.listen)
        s.sendto(b"\xff\x00", spec.listen)
        s.sendto(b"\x40\x01\x00", spec.listen)
        s.sendto(encode(CON, 0x45, 10, b"x"), spec.listen)          # a CON 2.05 "response"
        r = recv(s)
        assert r["type"] == RST and r["mid"] == 10
        proxy = encode(CON, GET, 11, b"b", "r0") + bytes([0xD1, 0x0B]) + b"x"  # + Proxy-Uri (35)
        s.sendto(proxy, spec.listen)
        assert code_str(recv(s)["code"]) == "4.02"
        s.sendto(encode(CON, 5, 12, b"f", "r0"), spec.listen)       # FETCH
        assert code_str(recv(s)["code"]) == "4.05"
        s.close()
        clean_exit(f)
        d = f.devices()[0]
        assert d["malformed"] == "2" and d["requests"] == "1" and len(f.log()) == 1


def test_busy_service_on_workers(fleet_asan_bin, tmp_path):
    """Busy-mode requests of two devices in two loops run on the workers at the same time."""
    specs = [Spec(0, SLOW, slots=2, response="separate"), Spec(1, SLOW, slots=2)]
    with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "2", "--workers", "2") as f:
        clients = [Client(s.listen) for s in specs]
        toks = [c.send(GET, "busy", NON) for c in clients for _ in range(2)]
        for c in clients:
            c.poll(10)
            assert len(c.results) == 2 and all(code_str(r["code"]) == "2.05"
                                               for r in c.results.values())
            c.close()
        clean_exit(f)
        rows = f.log()
        assert sorted(bytes.fromhex(r["token"]) for r in rows) == sorted(toks)
        for r in rows:
            assert int(r["end_ns"]) - int(r["start_ns"]) >= 20_000_000
            assert int(r["due_ns"]) == int(r["start_ns"]) + 20_000_000


def test_release_build_two_thousand_devices(fleet_bin, tmp_path):
    """The release build with 2 000 devices on 2 loops: ready, every device answers a ping and
    one GET, one log row per device."""
    base = 100 + os.getpid() % 100
    specs = [Spec(i, FAST, (f"127.{base}.{i // 250}.{i % 250 + 1}", 5683)) for i in range(2000)]
    with Fleet(fleet_bin, tmp_path, specs, "--loops", "2", nofile=4096) as f:
        s = raw_socket(timeout=2)
        for b in range(0, len(specs), 64):          # bounded in flight
            batch = specs[b:b + 64]
            for sp in batch:
                s.sendto(encode(CON, GET, sp.index, sp.index.to_bytes(4, "big"), "r0"), sp.listen)
            got = {int.from_bytes(recv(s)["token"], "big") for _ in batch}
            assert got == {sp.index for sp in batch}
        assert all(ping(sp.listen) for sp in specs[::97])
        s.close()
        assert f.stop() == 0
        rows = f.log()
        assert sorted(int(r["device"]) for r in rows) == list(range(2000))
        assert all(r["code"] == "2.05" for r in rows)
        assert f.summary()["loop"][0]["devices"] == 1000


def test_requests_cut_short_by_the_signal_are_counted(fleet_asan_bin, tmp_path):
    """Requests waiting or in service at SIGTERM have no log row; the summary counts them
    (pending_at_exit), and a separate response still unacknowledged (unacked_at_exit)."""
    specs = [Spec(0, SLOW, slots=1, queue=4, response="separate"), Spec(1, FAST, response="separate")]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        s = raw_socket()
        for k in range(3):
            s.sendto(encode(NON, GET, 100 + k, bytes([k]), "slow"), specs[0].listen)
        s.sendto(encode(CON, GET, 200, b"u", "r0"), specs[1].listen)
        assert recv(s)["type"] == ACK                        # the empty ACK
        assert recv(s)["type"] == CON                        # the separate response, not ACKed
        time.sleep(0.05)
        s.close()
        clean_exit(f)
        lp = f.summary()["loop"][0]
        assert (lp["pending_at_exit"], lp["unacked_at_exit"]) == (3, 1)
        assert [r["device"] for r in f.log()] == ["1"]
        assert f.devices()[0]["requests"] == "3" and f.devices()[0]["responses"] == "0"


def test_spin_before_timers(fleet_asan_bin, tmp_path):
    """--spin-us: the loop wakes that much before a sleep service's end and polls up to it; the
    service still ends at or after its due time."""
    spec = Spec(0, OTHER, slots=4)
    with Fleet(fleet_asan_bin, tmp_path, [spec], "--spin-us", "200") as f:
        c = Client(spec.listen)
        for _ in range(5):
            assert code_str(c.request(GET, "a/b/c", NON)["code"]) == "2.05"
        c.close()
        clean_exit(f)
        rows = f.log()
        assert len(rows) == 5 and all(int(r["end_ns"]) >= int(r["due_ns"]) for r in rows)
        assert f.summary()["loop"][0]["spins"] > 0


def test_many_timers_all_end_on_or_after_due(fleet_asan_bin, tmp_path):
    """400 sleep services of 1, 3 and 7 ms over 20 devices at once: every one answered, none
    ended before its due time (the timer heap keeps its order under many inserts/removals)."""
    res = "a,1000,sleep,1\nb,3000,sleep,1\nc,7000,sleep,1\n"
    specs = [Spec(i, res, slots=4, queue=64, response="separate") for i in range(20)]
    with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "2") as f:
        clients = [Client(s.listen) for s in specs]
        for k in range(20):
            for c in clients:
                c.send(GET, "abc"[(k + len(c.sent_tokens)) % 3], NON)
        for c in clients:
            c.poll(10)
            assert len(c.results) == 20 and not c.pending
            assert all(code_str(r["code"]) == "2.05" for r in c.results.values())
            c.close()
        clean_exit(f)
        rows = f.log()
        assert len(rows) == 400
        S = {"a": 1_000_000, "b": 3_000_000, "c": 7_000_000}
        for r in rows:
            assert int(r["due_ns"]) == int(r["start_ns"]) + S[r["path"]]
            assert int(r["end_ns"]) >= int(r["due_ns"])


def test_job_pool_exhausted_is_the_engines_503(fleet_asan_bin, tmp_path):
    """The loop's job pool is 2 x (slots + queue) per device: separate CON responses nobody
    ACKs keep their jobs, and then a request the device could queue gets 5.03 counted as
    pool_503 (the engine's limit, not the device's queue)."""
    spec = Spec(0, FAST, slots=1, queue=1, response="separate")
    with Fleet(fleet_asan_bin, tmp_path, [spec]) as f:
        s = raw_socket()
        codes = []
        for k in range(5):
            s.sendto(encode(CON, GET, 300 + k, bytes([k]), "r0"), spec.listen)
            got = [recv(s), recv(s)]                         # empty ACK and the response
            codes.append(next(code_str(m["code"]) for m in got if m and m["code"]))
        s.close()
        assert codes == ["2.05"] * 4 + ["5.03"], codes
        clean_exit(f)
        lp = f.summary()["loop"][0]
        assert lp["pool_503"] == 1 and lp["unacked_at_exit"] == 4
        assert f.devices()[0]["overload_503"] == "1"


def test_idle_engine_uses_no_cpu(fleet_bin, tmp_path):
    """No polling: after its requests are done, an idle engine of 500 devices burns no CPU
    (epoll_wait blocks, the timerfd is disarmed)."""
    specs = [Spec(i, OTHER) for i in range(500)]
    with Fleet(fleet_bin, tmp_path, specs, "--loops", "2", nofile=1024) as f:
        c = Client(specs[7].listen)
        assert code_str(c.request(GET, "a/b/c")["code"]) == "2.05"
        c.close()
        time.sleep(0.2)

        def cpu_ns():
            tasks = f"/proc/{f.proc.pid}/task"
            return sum(int(open(f"{tasks}/{t}/schedstat").read().split()[0])
                       for t in os.listdir(tasks))
        before = cpu_ns()
        time.sleep(1.0)
        assert cpu_ns() - before < 2_000_000      # < 0.2 % of a core
        assert f.stop() == 0
