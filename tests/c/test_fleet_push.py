"""wot-fleet --push (docs/CONTRACTS.md §3b "Push"): the engine's devices send requests of their
own from their endpoint sockets. The server side of these tests is aiocoap's message codec on a
plain socket (a registrar that answers 2.01 with a Location-Path and records what it got) and
libcoap's coap-server-notls (a third-party store). ASan+UBSan build."""
from __future__ import annotations

import csv
import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

from testkit.device import free_addr
from testkit.fleet import Fleet, Spec, build

aiocoap = pytest.importorskip("aiocoap")
FAST = "r0,0,sleep,16\n"
HEADER = "device,phase,op,at_us,method,type,target,path,content_format,payload_hex,retransmit"


@pytest.fixture(scope="module")
def fleet_asan_bin():
    return build("wot-fleet-asan")


class Registrar(threading.Thread):
    """A UDP socket that answers each CON/NON request: POST rd -> 2.01 Location-Path reg/<n>,
    anything else 2.04/2.02; every request is recorded with its source address."""

    def __init__(self, drop_first: int = 0):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.addr = self.sock.getsockname()
        self.got: list[tuple[tuple[str, int], object]] = []
        self.drop_first = drop_first     # ignore this many datagrams (the devices retransmit)
        self.stop_flag = threading.Event()
        self.n = 0

    def run(self) -> None:
        from aiocoap import ACK, NON, Code, Message
        while not self.stop_flag.is_set():
            try:
                data, src = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            m = Message.decode(data)
            self.got.append((src, m))
            if self.drop_first > 0:
                self.drop_first -= 1
                continue
            path = "/".join(m.opt.uri_path)
            if m.code == Code.POST and path == "rd":
                self.n += 1
                r = Message(code=Code.CREATED, location_path=("reg", str(self.n)))
            else:
                r = Message(code=Code.DELETED if m.code == Code.DELETE else Code.CHANGED)
            r.mtype = ACK if m.mtype.value == 0 else NON
            r.mid = m.mid if m.mtype.value == 0 else (m.mid + 1) & 0xFFFF
            r.token = m.token
            self.sock.sendto(r.encode(), src)

    def close(self) -> None:
        self.stop_flag.set()
        self.join(2)
        self.sock.close()


def _schedule(path, rows: list[str]) -> str:
    path.write_text(HEADER + "\n" + "".join(r + "\n" for r in rows))
    return str(path)


def _go(f: Fleet, start_in_s: float = 0.2) -> int:
    """push-go, wait for push-setup.csv, then push-start: the test start (CLOCK_MONOTONIC ns)."""
    (f.logdir / "push-go").touch()
    deadline = time.monotonic() + 20
    while not (f.logdir / "push-setup.csv").exists():
        assert time.monotonic() < deadline, f.stderr()
        time.sleep(0.01)
    start = time.monotonic_ns() + int(start_in_s * 1e9)
    tmp = f.logdir / "push-start.tmp"
    tmp.write_text(f"{start}\n")
    tmp.rename(f.logdir / "push-start")
    return start


def _rows(f: Fleet) -> list[dict]:
    with open(f.logdir / "fleet-push.csv") as fh:
        return list(csv.DictReader(fh))


def test_devices_register_push_at_their_location_and_deregister(fleet_asan_bin, tmp_path):
    """Three devices in two loops: each registers (setup), refreshes at the location its answer
    named and reads out (test, open loop), deregisters after SIGTERM, all from its own
    endpoint; one outcome per row; the summary counts them."""
    reg = Registrar()
    reg.start()
    target = f"{reg.addr[0]}:{reg.addr[1]}"
    specs = [Spec(7, FAST), Spec(8, FAST), Spec(9, FAST)]
    rows = []
    for s in specs:
        rows.append(f"{s.index},setup,register,0,POST,con,{target},rd?ep=d{s.index}&lt=60,40,3c2f72303e,0")
        test = [(100000 * k + 1000 * s.index, f"refresh,{100000 * k + 1000 * s.index},POST,con,"
                 f"{target},@location?lt=60,,,0") for k in range(5)]
        test.append((250000, f"reading,250000,PUT,non,{target},readings/d{s.index},50,7b7d,0"))
        rows += [f"{s.index},test,{line}" for _, line in sorted(test)]
        rows.append(f"{s.index},teardown,deregister,0,DELETE,con,{target},@location,,,0")
    sched = _schedule(tmp_path / "push.csv", rows)
    try:
        with Fleet(fleet_asan_bin, tmp_path, specs, "--loops", "2", "--push", sched,
                   "--push-timeout-ms", "2000") as f:
            setup = _go(f)
            time.sleep(0.9)
            assert f.stop() == 0, f.stderr()
            err = f.stderr()
            assert "AddressSanitizer" not in err and "runtime error" not in err, err
            out = _rows(f)
            summary = f.summary()
    finally:
        reg.close()
    assert setup > 0
    assert len(out) == len(rows)
    assert {r["outcome"] for r in out} == {"ok"}, [r for r in out if r["outcome"] != "ok"]
    by_dev = {}
    for r in out:
        by_dev.setdefault(int(r["device"]), []).append(r)
    listen = {s.index: s.listen for s in specs}
    for idx, mine in by_dev.items():
        loc = next(r["path"] for r in mine if r["op"] == "deregister")
        assert loc.startswith("reg/")
        assert {r["path"] for r in mine if r["op"] == "refresh"} == {f"{loc}?lt=60"}
        assert [r["index"] for r in mine] == [str(i) for i in range(len(mine))]
        test = [r for r in mine if r["phase"] == "test"]
        for r in test:                       # sent at or after its instant, answered after
            assert 0 <= int(r["sent_ns"]) - int(r["scheduled_ns"]) < 500_000_000
            assert int(r["received_ns"]) >= int(r["sent_ns"])
    # every datagram came from the device's own endpoint (address and port)
    sources = {}
    for src, m in reg.got:
        ep = next(q.split("=", 1)[1] for q in m.opt.uri_query if q.startswith("ep=")) \
            if m.opt.uri_query and any(q.startswith("ep=") for q in m.opt.uri_query) else None
        if ep:
            sources[int(ep[1:])] = src
    assert sources == {i: tuple(listen[i]) for i in listen}
    assert {src for src, _ in reg.got} == {tuple(a) for a in listen.values()}
    deletes = [m for _, m in reg.got if m.code.name == "DELETE"]
    assert len(deletes) == 3
    p = summary["push"]
    assert (p["devices"], p["requests"], p["setup"], p["test"], p["teardown"]) == (3, 24, 3, 18, 3)
    assert p["outcomes"] == {"ok": 24, "error": 0, "timeout": 0, "reset": 0, "unsent": 0}
    assert p["started"] is True and p["send_lag_us"]["sent"] == 18


def test_setup_retransmitted_until_answered(fleet_asan_bin, tmp_path):
    """The registrar ignores the first registration: the device sends the same datagram again
    after ACK_TIMEOUT (2-3 s) and succeeds; push-setup.csv counts the retransmission."""
    reg = Registrar(drop_first=1)
    reg.start()
    target = f"{reg.addr[0]}:{reg.addr[1]}"
    sched = _schedule(tmp_path / "push.csv",
                      [f"1,setup,register,0,POST,con,{target},rd?ep=d1,,,0"])
    try:
        with Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST)], "--push", sched,
                   "--push-timeout-ms", "8000") as f:
            _go(f)
            with open(f.logdir / "push-setup.csv") as fh:
                [row] = list(csv.DictReader(fh))
            assert f.stop() == 0
    finally:
        reg.close()
    assert (row["outcome"], row["code"], row["retransmissions"]) == ("ok", "2.01", "1")
    assert 2_000_000_000 <= int(row["received_ns"]) - int(row["sent_ns"]) < 3_500_000_000
    a, b = [m for _, m in reg.got]
    assert (a.mid, a.token) == (b.mid, b.token)        # the same datagram again


def test_unanswered_timeout_and_unsent_at_stop(fleet_asan_bin, tmp_path):
    """A NON to a port nobody answers times out; rows due after the stop are unsent; a device
    whose setup failed sends no teardown."""
    dead = free_addr()
    sched = _schedule(tmp_path / "push.csv", [
        f"1,test,reading,0,PUT,non,{dead[0]}:{dead[1]},r,,,0",
        f"1,test,reading,60000000,PUT,non,{dead[0]}:{dead[1]},r,,,0",
        f"2,setup,register,0,POST,non,{dead[0]}:{dead[1]},rd,,,0",
        f"2,teardown,deregister,0,DELETE,con,{dead[0]}:{dead[1]},rd,,,0"])
    with Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST), Spec(2, FAST)], "--push", sched,
               "--push-timeout-ms", "300") as f:
        _go(f, start_in_s=0.05)
        time.sleep(0.6)
        assert f.stop() == 0, f.stderr()
        out = _rows(f)
        summary = f.summary()
    got = [(r["device"], r["phase"], r["outcome"]) for r in out]
    assert got == [("1", "test", "timeout"), ("1", "test", "unsent"),
                   ("2", "setup", "timeout"), ("2", "teardown", "unsent")]
    assert summary["push"]["outcomes"] == {"ok": 0, "error": 0, "timeout": 2, "reset": 0,
                                           "unsent": 2}


def test_store_of_libcoap_answers_the_devices(fleet_asan_bin, tmp_path):
    """A third-party server (coap-server-notls) answers the devices' PUTs and GETs (CON and
    NON); every row ok with its code."""
    server = shutil.which("coap-server-notls")
    if server is None:
        pytest.skip("needs coap-server-notls (libcoap3-bin)")
    addr = free_addr()
    proc = subprocess.Popen([server, "-A", addr[0], "-p", str(addr[1])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        t = f"{addr[0]}:{addr[1]}"
        rows = [f"{d},test,{op},{20000 * k},{m},{ty},{t},{p},{cf},{body},0"
                for d in (1, 2) for k, (op, m, ty, p, cf, body) in enumerate(
                    [("put", "PUT", "con", "example_data", "0", "3231"),
                     ("time", "GET", "non", "time", "", ""),
                     ("get", "GET", "con", "example_data", "", "")])]
        sched = _schedule(tmp_path / "push.csv", rows)
        with Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST), Spec(2, FAST)], "--push", sched) as f:
            _go(f, start_in_s=0.05)
            time.sleep(0.5)
            assert f.stop() == 0, f.stderr()
            out = _rows(f)
    finally:
        proc.terminate()
        proc.wait(5)
    assert [(r["op"], r["outcome"]) for r in out] == [("put", "ok"), ("time", "ok"),
                                                      ("get", "ok")] * 2
    # the first PUT creates example_data's value (2.01), the later one changes it (2.04)
    assert sorted(r["code"] for r in out if r["op"] == "put") == ["2.01", "2.04"]
    assert {r["code"] for r in out if r["op"] != "put"} == {"2.05"}


@pytest.mark.parametrize("line, what", [
    ("5,setup,register,0,POST,con,127.0.0.1:5683,rd,,,0", "unknown device"),
    ("1,later,register,0,POST,con,127.0.0.1:5683,rd,,,0", "bad phase"),
    ("1,setup,register,0,POST,con,[::1]:5683,rd,,,0", "bad target"),
    ("1,setup,register,0,POST,con,127.0.0.1:5683,@location,,,0", "@location in a setup row"),
    ("1,test,r,0,PUT,non,127.0.0.1:5683,r,,,1", "retransmit 1 on a NON"),
    ("1,test,r,0,PUT,non,127.0.0.1:5683,r,,abc,0", "bad payload_hex"),
])
def test_bad_schedule_names_file_and_line(fleet_asan_bin, tmp_path, line, what):
    sched = _schedule(tmp_path / "push.csv", ["1,setup,r,0,GET,non,127.0.0.1:5683,r,,,0", line])
    f = Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST)], "--push", sched)
    r = subprocess.run(f.cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert f"{sched}:3: {what}" in r.stderr and "expected" in r.stderr, r.stderr


def test_rows_of_a_device_must_be_together(fleet_asan_bin, tmp_path):
    sched = _schedule(tmp_path / "push.csv", [
        "1,test,r,0,GET,non,127.0.0.1:5683,r,,,0", "2,test,r,0,GET,non,127.0.0.1:5683,r,,,0",
        "1,test,r,5,GET,non,127.0.0.1:5683,r,,,0"])
    f = Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST), Spec(2, FAST)], "--push", sched)
    r = subprocess.run(f.cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"{sched}:4: the device's rows are not together" in r.stderr


def test_summary_without_push_has_no_push_member(fleet_asan_bin, tmp_path):
    with Fleet(fleet_asan_bin, tmp_path, [Spec(1, FAST)]) as f:
        assert f.stop() == 0
        assert "push" not in json.loads((f.logdir / "fleet-summary.json").read_text())
        assert not (f.logdir / "fleet-push.csv").exists()
