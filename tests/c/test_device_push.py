"""wot-device --push (issue 23, docs/CONTRACTS.md §3 "Push"): a device that sends on its own.

A small CoAP responder on 127.0.0.1 plays the system under test: it answers a registration
POST with 2.01 and a Location-Path, a POST to that location with 2.04 (piggybacked, or an
empty ACK then a separate CON response), a DELETE with 2.02, and ignores `drop`. The device
(ASan build) runs setup after push-go, the test from push-start, teardown after SIGTERM."""
import csv
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

HEADER = "phase,op,at_us,method,type,target,path,content_format,payload_hex"
HEADER_RTX = HEADER + ",retransmit"     # the optional 10th column: test CON retransmitted


class Responder(threading.Thread):
    """Answers CoAP requests; records (source, method, path, query, payload)."""

    def __init__(self, separate: bool = False):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.seen, self.acks, self.stop, self.separate = [], 0, False, separate
        self.mids = []              # the message ID of every request seen
        self.flaky_first = True     # `flaky`: the first datagram is lost

    @staticmethod
    def options(data: bytes, tkl: int):
        pos, num, out = 4 + tkl, 0, []
        while pos < len(data) and data[pos] != 0xFF:
            b = data[pos]; pos += 1
            d, n = b >> 4, b & 15
            if d == 13: d = 13 + data[pos]; pos += 1
            if n == 13: n = 13 + data[pos]; pos += 1
            num += d
            out.append((num, data[pos:pos + n])); pos += n
        return out, data[pos + 1:] if pos < len(data) else b""

    def run(self):
        while not self.stop:
            try:
                data, src = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            typ, tkl, code, mid = (data[0] >> 4) & 3, data[0] & 15, data[1], data[2:4]
            if code == 0:
                self.acks += typ == 2
                continue
            opts, payload = self.options(data, tkl)
            path = "/".join(v.decode() for n, v in opts if n == 11)
            query = "&".join(v.decode() for n, v in opts if n == 15)
            cf = [int.from_bytes(v, "big") for n, v in opts if n == 12]
            self.seen.append((src, code, path, query, payload, cf))
            self.mids.append(bytes(mid))
            token = data[4:4 + tkl]
            if path == "drop" or (path == "flaky" and self.flaky_first):
                self.flaky_first = path != "flaky"
                continue
            loc = b""
            if path == "rd":
                rc, loc = 0x41, bytes([0x83]) + b"reg" + bytes([0x01]) + b"7"   # Location-Path reg/7
            elif code == 4:
                rc = 0x42
            else:
                rc = 0x44
            if self.separate and typ == 0:
                self.sock.sendto(bytes([0x60, 0]) + mid, src)                   # empty ACK
                resp = bytes([0x40 | tkl, rc, 0x12, 0x34]) + token + loc        # CON response
            else:
                resp = bytes([(0x60 if typ == 0 else 0x50) | tkl, rc]) + mid + token + loc
            self.sock.sendto(resp, src)


def schedule(path, target, rows):
    head = HEADER_RTX if rows and len(rows[0]) == 10 else HEADER
    path.write_text(head + "\n" + "".join(",".join(r).replace("%T%", target) + "\n" for r in rows))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_device(bin_, tmp_path, sched, *extra):
    res = tmp_path / "res.csv"
    res.write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,4\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    p = subprocess.Popen([str(bin_), "--resources", str(res), "--log-dir", str(logs),
                          "--listen", f"127.0.0.1:{free_port()}", "--push", str(sched), "--push-id", "5",
                          "--push-timeout-ms", "500", *extra],
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 5
    while not (logs / "ready").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() is not None else "not ready"
        time.sleep(0.01)
    return p, logs


def wait_for(path, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("separate", [False, True])
def test_lifecycle_setup_test_teardown(device_asan_bin, tmp_path, separate):
    r = Responder(separate)
    r.start()
    rows = [["setup", "register", "0", "POST", "con", "%T%", "rd?ep=d5&lt=60", "40", b"</t>".hex()]]
    rows += [["test", "reading", str(20000 * k), "POST", "non" if k % 2 else "con", "%T%",
              "@location", "110", b'[{"v":1}]'.hex()] for k in range(10)]
    rows += [["test", "lost", "250000", "GET", "con", "%T%", "drop", "", ""]]
    rows += [["test", "late", "60000000", "GET", "con", "%T%", "r", "", ""]]   # after the stop
    rows += [["teardown", "deregister", "0", "DELETE", "con", "%T%", "@location", "", ""]]
    sched = tmp_path / "s.csv"
    schedule(sched, f"127.0.0.1:{r.port}", rows)
    p, logs = start_device(device_asan_bin, tmp_path, sched)
    time.sleep(0.1)
    assert not (logs / "push-setup.csv").exists(), "setup must wait for push-go"
    (logs / "push-go").touch()
    wait_for(logs / "push-setup.csv")
    setup = rows_of(logs / "push-setup.csv")
    assert [(s["op"], s["outcome"], s["code"]) for s in setup] == [("register", "ok", "2.01")]
    start = time.monotonic_ns() + 100_000_000
    (logs / "push-start.tmp").write_text(f"{start}\n")
    os.rename(logs / "push-start.tmp", logs / "push-start")
    time.sleep(1.0)                              # the test rows + the 500 ms timeout of `lost`
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0, p.stderr.read()
    r.stop = True
    out = rows_of(logs / "push-requests.csv")
    assert len(out) == len(rows)                 # one outcome per request
    by_op = {}
    for o in out:
        by_op.setdefault(o["op"], []).append(o)
    assert [o["outcome"] for o in by_op["reading"]] == ["ok"] * 10
    assert all(o["path"] == "reg/7" and o["code"] == "2.04" for o in by_op["reading"])
    assert by_op["lost"][0]["outcome"] == "timeout"
    assert by_op["late"][0]["outcome"] == "unsent" and by_op["late"][0]["sent_ns"] == ""
    assert by_op["deregister"][0]["outcome"] == "ok" and by_op["deregister"][0]["code"] == "2.02"
    for o in by_op["reading"]:                   # times relative to the start, kernel stamps
        sched_ns, sent, k = int(o["scheduled_ns"]), int(o["sent_ns"]), int(o["received_kernel_ns"])
        assert 0 <= sent - sched_ns < 50_000_000 and sent < k <= int(o["received_ns"])
    assert int(by_op["register"][0]["scheduled_ns"]) < 0   # before the start
    # what the server saw: the rendered request, the location, one client address
    seen = r.seen
    assert seen[0][2:4] == ("rd", "ep=d5&lt=60") and seen[0][5] == [40]
    assert {s[2] for s in seen[1:11]} == {"reg/7"} and seen[1][5] == [110]
    assert seen[-1][1] == 4 and seen[-1][2] == "reg/7"      # DELETE last
    assert len({s[0] for s in seen}) == 1 and seen[0][0][0] == "127.0.0.1"
    # separate CON answers are ACKed by the device: register, 5 CON readings, deregister
    assert r.acks == (7 if separate else 0)
    import json
    summary = json.loads((logs / "device-summary.json").read_text())["push"]
    assert summary["outcomes"] == {"ok": 12, "error": 0, "timeout": 1, "reset": 0, "unsent": 1}
    assert summary["location"] == "reg/7" and summary["started"] is True
    assert summary["send_lag_us"]["sent"] == 11


def test_failed_setup_skips_the_rest_and_the_teardown(device_asan_bin, tmp_path):
    r = Responder()
    r.start()
    rows = [["setup", "register", "0", "POST", "con", "%T%", "drop", "", ""],
            ["setup", "second", "0", "POST", "con", "%T%", "rd", "", ""],
            ["teardown", "deregister", "0", "DELETE", "con", "%T%", "@location", "", ""]]
    sched = tmp_path / "s.csv"
    schedule(sched, f"127.0.0.1:{r.port}", rows)
    p, logs = start_device(device_asan_bin, tmp_path, sched)
    (logs / "push-go").touch()
    wait_for(logs / "push-setup.csv")
    assert [s["outcome"] for s in rows_of(logs / "push-setup.csv")] == ["timeout", "unsent"]
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    r.stop = True
    out = rows_of(logs / "push-requests.csv")
    assert [o["outcome"] for o in out] == ["timeout", "unsent", "unsent"]
    assert len(r.seen) == 1                      # nothing registered: nothing to undo


@pytest.mark.parametrize("head,line,why", [
    (HEADER, "test,x,0,GET,con,127.0.0.1:5683,r,,zz", "bad payload_hex"),
    (HEADER, "test,x,0,FETCH,con,127.0.0.1:5683,r,,", "bad method"),
    (HEADER, "test,x,0,GET,con,localhost:5683,r,,", "bad target"),
    (HEADER, "setup,x,0,GET,con,127.0.0.1:5683,@location,,", "@location in a setup row"),
    (HEADER, "test,x,5,GET,con,127.0.0.1:5683,r,,\ntest,x,4,GET,con,127.0.0.1:5683,r,,",
     "at_us decreases"),
    # the optional 10th column: test CON rows only
    (HEADER_RTX, "test,x,0,GET,non,127.0.0.1:5683,r,,,1", "retransmit 1 on a NON"),
    (HEADER_RTX, "setup,x,0,GET,con,127.0.0.1:5683,r,,,1", "retransmit 1 on a NON or a setup"),
    (HEADER_RTX, "test,x,0,GET,con,127.0.0.1:5683,r,,,yes", "bad retransmit, expected 0|1"),
    (HEADER_RTX, "test,x,0,GET,con,127.0.0.1:5683,r,,", "expected 10 comma-separated fields"),
])
def test_bad_schedule_is_exit_2_with_file_and_line(device_bin, tmp_path, head, line, why):
    sched = tmp_path / "s.csv"
    sched.write_text(head + "\n" + line + "\n")
    res = tmp_path / "res.csv"
    res.write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,4\n")
    p = subprocess.run([str(device_bin), "--resources", str(res), "--log-dir", str(tmp_path),
                        "--push", str(sched)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert f"{sched}:" in p.stderr and why in p.stderr, p.stderr


def test_setup_con_is_retransmitted(device_asan_bin, tmp_path):
    """A registration lost on the way is sent again (RFC 7252: after 2..3 s, same message ID)."""
    r = Responder()
    r.start()
    sched = tmp_path / "s.csv"
    schedule(sched, f"127.0.0.1:{r.port}",
             [["setup", "register", "0", "POST", "con", "%T%", "flaky", "", ""]])
    p, logs = start_device(device_asan_bin, tmp_path, sched, "--push-timeout-ms", "5000")
    (logs / "push-go").touch()
    wait_for(logs / "push-setup.csv", timeout=8)
    row = rows_of(logs / "push-setup.csv")[0]
    assert (row["outcome"], row["retransmissions"]) == ("ok", "1")
    assert 2.0e9 <= int(row["received_ns"]) - int(row["sent_ns"]) < 3.2e9
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    r.stop = True
    assert len(r.seen) == 2 and r.seen[0][2] == r.seen[1][2] == "flaky"


def _run_test_rows(bin_, tmp_path, port, n, *extra, retransmit=None, settle_s=0.7):
    """n test readings 50 ms apart (no setup), then SIGTERM after settle_s more (the timeout
    and a margin); the device's push rows and summary. retransmit 0|1: the 10th column."""
    import json
    rows = [["test", "reading", str(50000 * k), "POST", "con", "%T%", "data", "", "31"]
            + ([str(retransmit)] if retransmit is not None else []) for k in range(n)]
    sched = tmp_path / "s.csv"
    schedule(sched, f"127.0.0.1:{port}", rows)
    p, logs = start_device(bin_, tmp_path, sched, *extra)
    (logs / "push-go").touch()
    wait_for(logs / "push-setup.csv")
    (logs / "push-start.tmp").write_text(f"{time.monotonic_ns() + 50_000_000}\n")
    os.rename(logs / "push-start.tmp", logs / "push-start")
    time.sleep(0.05 * n + settle_s)             # the last send + the timeout
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0, p.stderr.read()
    return rows_of(logs / "push-requests.csv"), json.loads((logs / "device-summary.json").read_text())


def test_app_impairments_act_on_pushes(device_asan_bin, tmp_path):
    """--impair acts on the device's own requests and their answers as on its endpoint's
    datagrams (one link): egress loss drops every request before the server sees it; a delay
    each way adds twice the delay to R, the answer's emulated arrival is its kernel stamp."""
    r = Responder()
    r.start()
    out, summary = _run_test_rows(device_asan_bin, tmp_path, r.port, 6,
                                  "--impair", "dir=egress,loss=100%")
    assert [o["outcome"] for o in out] == ["timeout"] * 6 and r.seen == []
    assert summary["impair"]["dropped_out"] == 6
    r.stop = True

    r2 = Responder()
    r2.start()
    (tmp_path / "logs").rename(tmp_path / "logs-loss")
    out, summary = _run_test_rows(device_asan_bin, tmp_path, r2.port, 6,
                                  "--impair", "dir=both,delay=40ms")
    r2.stop = True
    assert [o["outcome"] for o in out] == ["ok"] * 6 and len(r2.seen) == 6
    for o in out:
        rtt = int(o["received_kernel_ns"]) - int(o["sent_ns"])
        assert 80e6 <= rtt < 300e6, rtt                  # 2 x 40 ms (+ a loaded host)
        assert int(o["received_kernel_ns"]) <= int(o["received_ns"])
    assert summary["impair"]["delayed_out"] == 6 and summary["impair"]["delayed_in"] == 6


@pytest.mark.parametrize("retransmit", [1, 0])
def test_test_con_retransmitted_only_with_the_column(device_asan_bin, tmp_path, retransmit):
    """Test-phase CONs with `retransmit` 1 lost on the device's link (app-level egress loss, a
    fixed seed) are sent again per RFC 7252 (after 2..3 s: one within a 3.5 s timeout) and answered; R counts from the first send. With 0 none is retransmitted
    and the lost ones time out. Every datagram is accounted for: sent − dropped = seen."""
    r = Responder()
    r.start()
    timeout_s = 3.5 if retransmit else 0.5      # without it, waiting longer shows nothing
    out, summary = _run_test_rows(device_asan_bin, tmp_path, r.port, 8, "--push-timeout-ms",
                                  str(int(timeout_s * 1000)), "--impair", "dir=egress,loss=50%",
                                  "--impair-seed", "3", retransmit=retransmit,
                                  settle_s=timeout_s + 0.3)
    r.stop = True
    retx = [int(o["retransmissions"]) for o in out]
    assert {o["outcome"] for o in out} <= {"ok", "timeout"} and len(out) == 8
    assert sum(retx) + 8 - summary["impair"]["dropped_out"] == len(r.seen)
    assert summary["impair"]["dropped_out"] > 0
    # no answer is lost: the server saw each answered request once, nothing else
    assert len(r.seen) == sum(o["outcome"] == "ok" for o in out) == len(set(r.mids))
    if not retransmit:
        assert retx == [0] * 8
        assert sum(o["outcome"] == "timeout" for o in out) == summary["impair"]["dropped_out"]
        return
    saved = [o for o, k in zip(out, retx) if k and o["outcome"] == "ok"]
    assert saved, out                                   # lost once, answered after a retry
    assert max(retx) == 1                               # the 2nd would be after 6 s > 3.5 s
    for o in saved:
        assert 2.0e9 <= int(o["received_kernel_ns"]) - int(o["sent_ns"]) < 3.5e9
