"""Observe (RFC 7641): wot-device's observable resources, the GE's OBSERVE/CANCEL lines and
their records, and interop with aiocoap (an observer client nobody here wrote)."""
import asyncio
import csv
import json
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from testkit.device import Device
from testkit.ge import ACK, CON, NON, RST, build, loopback_addr, parse, run_ge, write_trace

OBS_HEADER = ("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
              "notify_jitter_us,notify_service_us,notify_type,max_age_s\n")
OPT_OBSERVE, OPT_MAXAGE = 6, 14


def obs_device(binary, tmp, rows: str, name="obs"):
    d = Device(binary, tmp, "", name=name)
    d.res.write_text(OBS_HEADER + rows)
    return d


def read_csv(p: Path) -> list[dict]:
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def aiocoap_observe(uri: str, count: int, timeout: float = 10.0):
    """Register with aiocoap, collect `count` notifications: (first response, [(seq, t)])."""
    aiocoap = pytest.importorskip("aiocoap")

    async def go():
        ctx = await aiocoap.Context.create_client_context()
        try:
            pr = ctx.request(aiocoap.Message(code=aiocoap.GET, uri=uri, observe=0))
            first = await asyncio.wait_for(pr.response, timeout)
            seen = []
            if first.opt.observe is not None:
                async def collect():
                    async for m in pr.observation:
                        seen.append((m.opt.observe, m.code, len(m.payload), time.monotonic_ns()))
                        if len(seen) >= count:
                            break
                await asyncio.wait_for(collect(), timeout)
                pr.observation.cancel()
            return first, seen
        finally:
            await ctx.shutdown()
    return asyncio.run(go())


def test_aiocoap_observer_gets_notifications(device_asan_bin, tmp_path):
    rows = "temp,1000,sleep,16,uniform,100000,20000,2000,con,7\nplain,1000,sleep,8,none,0,0,0,con,60\n"
    with obs_device(device_asan_bin, tmp_path, rows) as d:
        first, seen = aiocoap_observe(f"coap://{d.addr[0]}:{d.addr[1]}/temp", 5)
        plain, none = aiocoap_observe(f"coap://{d.addr[0]}:{d.addr[1]}/plain", 1)
        assert d.stop() == 0
    log = read_csv(d.dir / "notify-log.csv")
    check_aiocoap_observation(first, seen, plain, none, log)
    s = d.summary()["observe"]
    assert s["observable_resources"] == 1 and s["registrations"] == 1
    assert s["notifications"] == [r["kind"] for r in log].count("notify")
    assert s["reads"] >= s["notifications"]
    # plain GETs still go through the request path (device-log.csv)
    assert [r["path"] for r in d.log()] == ["plain"]


def check_aiocoap_observation(first, seen, plain, none, log: list[dict]) -> None:
    """What aiocoap_observe got from temp (5 notifications) and plain, and the device's
    notification log (rows of that device only)."""
    assert str(first.code) == "2.05 Content" and first.opt.max_age == 7 and len(first.payload) == 16
    seqs = [s for s, *_ in seen]
    assert len(seqs) == 5 and all(b > a for a, b in zip([first.opt.observe] + seqs, seqs))
    assert all(n == 16 for *_, n, _ in seen)
    # ~100 ms +- 20 ms apart (generous bounds: the host is shared)
    gaps = [(b[3] - a[3]) / 1e6 for a, b in zip(seen, seen[1:])]
    assert 40 < sorted(gaps)[len(gaps) // 2] < 300, gaps
    assert plain.opt.observe is None and none == []      # not observable: a plain 2.05
    kinds = [r["kind"] for r in log]
    assert kinds[0] == "register" and kinds.count("notify") >= 5
    for r in log:
        if r["kind"] == "notify":   # the sensor read happened before the emission
            assert int(r["read_start_ns"]) < int(r["read_end_ns"]) <= int(r["emit_ns"])
            assert int(r["read_end_ns"]) - int(r["read_start_ns"]) >= 2_000_000
    logged = {int(r["seq"]) for r in log if r["kind"] == "notify"}
    assert set(seqs) <= logged


@pytest.mark.parametrize("row,what", [
    ("t,0,sleep,1,sometimes,1000,0,0,con,1", "bad notify_dist"),
    ("t,0,sleep,1,deterministic,1000,5,0,con,1", "notify_jitter_us with a deterministic"),
    ("t,0,sleep,1,uniform,1000,2000,0,con,1", "notify_jitter_us above notify_mean_us"),
    ("t,0,sleep,1,exponential,0,0,0,con,1", "bad notify_mean_us"),
    ("t,0,sleep,1,uniform,1000,0,0,both,1", "bad notify_type"),
    ("t,0,sleep,1,none,0,0,0,con", "9 fields"),
])
def test_device_rejects_bad_observe_columns(device_bin, tmp_path, row, what):
    res = tmp_path / "r.csv"
    res.write_text(OBS_HEADER + row + "\n")
    p = subprocess.run([str(device_bin), "--resources", str(res), "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert f"{res}:2: {what}" in p.stderr


GE_OBSERVED_ROWS = ("temp,500,busy,16,deterministic,50000,0,500,con,2\n"
                    "q,0,sleep,4,none,0,0,0,con,60\n")


def ge_observes_twice(ge, addr, tmp_path: Path):
    """The GE observes temp twice (queries o=0, o=1), GETs q, cancels after 0.6 and 1.2 s."""
    u = f"coap://{addr[0]}:{addr[1]}"
    trace = write_trace(tmp_path / "t.csv", [
        (0, 0, "OBSERVE", f"{u}/temp?o=0"), (0, 1000, "OBSERVE", f"{u}/temp?o=1"),
        (0, 2000, "GET", f"{u}/q"), (0, 600_000, "CANCEL", f"{u}/temp?o=0"),
        (0, 1_200_000, "CANCEL", f"{u}/temp?o=1")])
    out = tmp_path / "ge"
    p = run_ge(ge, trace, out)
    time.sleep(0.2)
    return p, out


def check_ge_observations(p, out: Path, dev: list[dict]) -> None:
    """ge_observes_twice's records against the device's notification log rows ``dev``."""
    assert p.returncode == 0, p.stderr
    req = read_csv(out / "requests.csv")
    assert [r["method"] for r in req] == ["OBSERVE", "OBSERVE", "GET", "CANCEL", "CANCEL"]
    assert all(r["outcome"] == "ok" and r["code"] == "2.05" for r in req)
    # registration and cancel responses carry the kernel receive stamp like any response
    assert all(0 < int(r["received_kernel_ns"]) <= int(r["received_ns"]) for r in req)
    notes = read_csv(out / "notifications.csv")
    summary = json.loads((out / "summary.json").read_text())
    obs = json.loads((out / "observe.json").read_text())
    assert obs["observations"] == obs["established"] == 2
    assert obs["gaps"] == obs["reordered"] == obs["duplicates"] == 0
    assert obs["notifications"] == obs["recorded"] == len(notes) == obs["acks_sent"] + obs["rsts_sent"]
    per = {0: [], 1: []}
    for n in notes:
        per[int(n["observation"])].append(int(n["seq"]))
        assert n["type"] == "con" and n["code"] == "2.05"
    # 50 ms period: about 12 notifications for 0.6 s, 24 for 1.2 s
    assert 5 <= len(per[0]) <= 18 and 14 <= len(per[1]) <= 32, per
    for seqs in per.values():
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # every recorded notification is one the device emitted to that token (the one-way join)
    salt = int(summary["token_salt"], 16)
    tok = {i: f"{salt >> 32:08x}{(salt & 0xFFFFFFFF) ^ i:08x}" for i in (0, 1)}
    emitted = {(r["token"], int(r["seq"])): int(r["emit_ns"]) for r in dev if r["kind"] == "notify"}
    start = summary["start_mono_ns"]
    for n in notes:
        key = (tok[int(n["observation"])], int(n["seq"]))
        assert key in emitted
        assert 0 < start + int(n["received_ns"]) - emitted[key] < 1_000_000_000  # shared host: loose
        # the kernel's receive stamp: after the emission, not after the loop's reading
        kern = int(n["received_kernel_ns"])
        assert emitted[key] < start + kern and kern <= int(n["received_ns"])
    assert [r["kind"] for r in dev].count("cancel") == 2


def test_ge_observes_and_cancels_device(ge_asan_bin, device_bin, tmp_path):
    with obs_device(device_bin, tmp_path, GE_OBSERVED_ROWS) as d:
        p, out = ge_observes_twice(ge_asan_bin, d.addr, tmp_path)
        assert d.stop() == 0
    check_ge_observations(p, out, read_csv(d.dir / "notify-log.csv"))
    assert d.summary()["observe"]["cancels"] == 2


def test_ge_rejects_cancel_without_observe(ge_bin, tmp_path):
    trace = write_trace(tmp_path / "t.csv", [
        (0, 0, "OBSERVE", "coap://127.0.0.1:5683/a?o=0"),
        (0, 10, "CANCEL", "coap://127.0.0.1:5683/a?o=1")])
    p = run_ge(ge_bin, trace, tmp_path / "o")
    assert p.returncode == 2
    assert f"{trace}:3: CANCEL without an open OBSERVE" in p.stderr
    assert not (tmp_path / "o" / "requests.csv").exists()


def test_ge_rejects_observe_payload(ge_bin, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("0,0,OBSERVE,coap://127.0.0.1:5683/a,10\n")
    p = run_ge(ge_bin, trace, tmp_path / "o")
    assert p.returncode == 2 and f"{trace}:1: payload_bytes 10 with OBSERVE" in p.stderr


def _observe_value(msg: bytes) -> int | None:
    """The Observe option of a request (a tiny option walker for the scripted server)."""
    tkl = msg[0] & 15
    i, num = 4 + tkl, 0
    while i < len(msg) and msg[i] != 0xFF:
        d, ln = msg[i] >> 4, msg[i] & 15
        i += 1
        if d == 13:
            d, i = msg[i] + 13, i + 1
        if ln == 13:
            ln, i = msg[i] + 13, i + 1
        num += d
        if num == OPT_OBSERVE:
            return int.from_bytes(msg[i:i + ln], "big")
        i += ln
    return None


def _notification(mtype, mid, tok, seq):
    val = seq.to_bytes(3, "big").lstrip(b"\0")
    return bytes([0x40 | mtype << 4 | len(tok), 0x45]) + struct.pack("!H", mid) + tok + \
        bytes([OPT_OBSERVE << 4 | len(val)]) + val + b"\xffv"


def test_ge_counts_gaps_reorder_duplicates_and_rsts_after_cancel(ge_asan_bin, tmp_path):
    """A scripted observable server: sequence 5,6,8,7,8,10 (one gap left after the late 7,
    one duplicate, 9 missing), CON notifications; a CON notification that crosses the CANCEL
    must be answered with RST."""
    host = loopback_addr()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.settimeout(0.05)
    port = s.getsockname()[1]
    replies: list[tuple[int, int]] = []
    stop = threading.Event()

    def serve():
        mid = 100
        while not stop.is_set():
            try:
                data, addr = s.recvfrom(2048)
            except socket.timeout:
                continue
            mtype, code, rmid, tok = parse(data)
            if code == 0:
                replies.append((mtype, rmid))
                continue
            ov = _observe_value(data)
            if ov == 0:   # registration: piggybacked 2.05 with Observe 5, then notifications
                reg = _notification(ACK, rmid, tok, 5)
                s.sendto(reg, addr)
                for seq in (6, 8, 7, 8, 10):
                    mid += 1
                    s.sendto(_notification(CON, mid, tok, seq), addr)
                    time.sleep(0.01)
            elif ov == 1:  # cancel crossing a notification in flight, then the answer
                mid += 1
                s.sendto(_notification(CON, mid, tok, 11), addr)
                time.sleep(0.01)
                s.sendto(build(ACK, 0x45, rmid, tok, b"bye"), addr)
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        trace = write_trace(tmp_path / "t.csv", [
            (0, 0, "OBSERVE", f"coap://{host}:{port}/x"),
            (0, 300_000, "CANCEL", f"coap://{host}:{port}/x")])
        out = tmp_path / "ge"
        p = run_ge(ge_asan_bin, trace, out, "--timeout-ms", "2000")
        time.sleep(0.3)
    finally:
        stop.set()
        th.join(2)
        s.close()
    assert p.returncode == 0, p.stderr
    obs = json.loads((out / "observe.json").read_text())
    assert obs["notifications"] == 6
    assert obs["reordered"] == 1 and obs["duplicates"] == 1
    assert obs["gaps"] == 1            # 9 never came (8's gap was filled by the late 7)
    assert obs["acks_sent"] == 5 and obs["rsts_sent"] == 1 and obs["after_cancel"] == 1
    notes = read_csv(out / "notifications.csv")
    assert [n["flags"] for n in notes] == ["", "", "reordered", "duplicate", "", "after_cancel"]
    assert sorted(t for t, _ in replies).count(RST) == 1
    req = read_csv(out / "requests.csv")
    assert [r["outcome"] for r in req] == ["ok", "ok"]


def test_ge_non_notifications(ge_bin, device_bin, tmp_path):
    rows = "n,0,sleep,4,exponential,30000,0,0,non,1\n"
    with obs_device(device_bin, tmp_path, rows) as d:
        u = f"coap://{d.addr[0]}:{d.addr[1]}/n"
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "OBSERVE", u), (0, 600_000, "CANCEL", u)])
        p = run_ge(ge_bin, trace, tmp_path / "ge", "--type", "non")
        assert d.stop() == 0
    assert p.returncode == 0, p.stderr
    notes = read_csv(tmp_path / "ge" / "notifications.csv")
    assert len(notes) >= 5 and {n["type"] for n in notes} == {"non"}
    obs = json.loads((tmp_path / "ge" / "observe.json").read_text())
    assert obs["acks_sent"] == obs["rsts_sent"] == 0


def test_device_logs_non_registration_as_register(device_bin, tmp_path):
    """libcoap 4.3.1 answers a NON request with the request's own message ID, as a notification
    carries its stored request's: a NON registration must still be logged as a registration (a
    'notify' row would have no tick and look lost to the analysis)."""
    rows = "n,0,sleep,4,deterministic,20000,0,0,non,1\n"
    with obs_device(device_bin, tmp_path, rows) as d:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        # NON GET, token 4 bytes, Observe (6) = 0 (empty), Uri-Path (delta 5) "n"
        s.sendto(bytes([0x54, 0x01, 0x12, 0x34]) + b"tokn" + bytes([0x60, 0x51]) + b"n", d.addr)
        first = s.recvfrom(2048)[0]
        time.sleep(0.15)
        s.close()
        assert d.stop() == 0
    assert parse(first)[:3] == (NON, 0x45, 0x1234)     # libcoap: the request's own MID
    log = read_csv(d.dir / "notify-log.csv")
    assert log[0]["kind"] == "register" and log[0]["tick_ns"] == ""
    assert all(x["kind"] == "notify" and x["tick_ns"] != "" for x in log[1:]) and len(log) > 1
    assert d.summary()["observe"]["registrations"] == 1
