"""Block-wise transfer (RFC 7959): wot-device's large bodies (Block2 responses, Block1 request
bodies), the GE's --block-size transfers, and interop with aiocoap's block-wise client."""
import asyncio
import csv
import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from testkit.device import HEADER, Device
from testkit.ge import run_ge, write_trace

RES = "big,2000,sleep,16384\nhuge,0,sleep,65536\nup,1000,sleep,8\nsmall,0,sleep,100\n"


def read_csv(p: Path) -> list[dict]:
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def aiocoap_blockwise(base: str) -> dict:
    """aiocoap's block-wise client against base: GET big (1 KiB blocks), GET huge in 64-byte
    blocks, PUT 4096 and 70000 bytes to up: {name: (code, payload)}."""
    aiocoap = pytest.importorskip("aiocoap")
    from aiocoap.optiontypes import BlockOption

    async def go():
        ctx = await aiocoap.Context.create_client_context()
        try:
            out = {}
            r = await ctx.request(aiocoap.Message(code=aiocoap.GET, uri=f"{base}/big")).response
            out["big"] = (str(r.code), r.payload)
            m = aiocoap.Message(code=aiocoap.GET, uri=f"{base}/huge")
            m.opt.block2 = BlockOption.BlockwiseTuple(0, False, 2)      # 64-byte blocks
            r = await ctx.request(m).response
            out["huge"] = (str(r.code), r.payload)
            for n in (4096, 70000):
                r = await ctx.request(aiocoap.Message(code=aiocoap.PUT, uri=f"{base}/up",
                                                      payload=b"y" * n)).response
                out[f"put{n}"] = (str(r.code), r.payload)
            return out
        finally:
            await ctx.shutdown()
    return asyncio.run(go())


def check_aiocoap_blockwise(out: dict, log: list[dict], bw: dict) -> None:
    """What aiocoap_blockwise got, the device's log rows and its "blockwise" counters."""
    assert out["big"] == ("2.05 Content", b"x" * 16384)
    assert out["huge"] == ("2.05 Content", b"x" * 65536)
    assert out["put4096"][0] == out["put70000"][0] == "2.04 Changed"
    # every transfer is one request: served once, logged once
    assert [(r["path"], r["method"]) for r in log] == [
        ("big", "GET"), ("huge", "GET"), ("up", "PUT"), ("up", "PUT")]
    assert bw["block2_follow_ups"] >= 15 + 1023 and bw["block1_continues"] >= 3 + 68


def test_aiocoap_blockwise_client(device_asan_bin, tmp_path):
    with Device(device_asan_bin, tmp_path, RES) as d:
        out = aiocoap_blockwise(f"coap://{d.addr[0]}:{d.addr[1]}")
        assert d.stop() == 0
    check_aiocoap_blockwise(out, d.log(), d.summary()["blockwise"])


def ge_blockwise(ge, addr, tmp_path: Path, bs: int) -> tuple[subprocess.CompletedProcess, Path]:
    """The GE's --block-size transfers against a device at addr: GET big, PUT 4096, GET small,
    POST 500 (RES)."""
    u = f"coap://{addr[0]}:{addr[1]}"
    trace = tmp_path / "t.csv"
    trace.write_text("device_id,send_time_us,method,uri,payload_bytes\n"
                     f"0,0,GET,{u}/big,0\n0,1000,PUT,{u}/up,4096\n0,2000,GET,{u}/small,0\n"
                     f"0,3000,POST,{u}/up,500\n")
    out = tmp_path / f"ge{bs}"
    return run_ge(ge, trace, out, "--block-size", str(bs)), out


def check_ge_blockwise(p, out: Path, log: list[dict], bs: int) -> None:
    assert p.returncode == 0, p.stderr
    req = read_csv(out / "requests.csv")
    assert [(r["outcome"], r["code"]) for r in req] == [("ok", "2.05"), ("ok", "2.04"),
                                                       ("ok", "2.05"), ("ok", "2.04")]
    bw = {int(r["index"]): r for r in read_csv(out / "blockwise.csv")}
    assert bw[0]["kind"] == "block2" and int(bw[0]["body_bytes"]) == 16384
    assert int(bw[0]["blocks"]) == 16384 // bs and int(bw[0]["block_size"]) == bs
    assert bw[1]["kind"] == "block1" and int(bw[1]["blocks"]) == math.ceil(4096 / bs)
    assert int(bw[2]["blocks"]) == math.ceil(100 / bs) and int(bw[2]["body_bytes"]) == 100
    assert (3 in bw) == (500 > bs)            # a body within one block is a plain request
    # one device-log row per transfer; the response time covers the whole transfer
    assert sorted(r["path"] for r in log) == ["big", "small", "up", "up"]
    rt_ms = (int(req[0]["received_ns"]) - int(req[0]["sent_ns"])) / 1e6
    assert rt_ms >= 2.0


@pytest.mark.parametrize("bs", [16, 1024])
def test_ge_blockwise_against_device(ge_asan_bin, device_bin, tmp_path, bs):
    with Device(device_bin, tmp_path, RES) as d:
        p, out = ge_blockwise(ge_asan_bin, d.addr, tmp_path, bs)
        assert d.stop() == 0
    check_ge_blockwise(p, out, d.log(), bs)


def test_ge_blockwise_bad_input(ge_bin, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("device_id,send_time_us,method,uri,payload_bytes\n0,0,PUT,coap://127.0.0.1:5683/a,2000\n")
    p = run_ge(ge_bin, trace, tmp_path / "o")
    assert p.returncode == 2
    assert f"{trace}:2: bad payload_bytes '2000', expected an integer 0..1024 (larger bodies need --block-size)" in p.stderr
    p = run_ge(ge_bin, trace, tmp_path / "o", "--block-size", "100")
    assert p.returncode == 2 and "bad value '100' for --block-size, expected a power of two 16..1024" in p.stderr
    trace.write_text("0,0,PUT,coap://127.0.0.1:5683/a,1048577\n")
    p = run_ge(ge_bin, trace, tmp_path / "o", "--block-size", "64")
    assert p.returncode == 2 and f"{trace}:1: bad payload_bytes '1048577', expected an integer 0..1048576" in p.stderr
    assert not (tmp_path / "o" / "requests.csv").exists()


@pytest.mark.parametrize("row,what", [
    ("a,0,sleep,1048577", "bad payload_bytes"),
])
def test_device_rejects_oversized_payload(device_bin, tmp_path, row, what):
    res = tmp_path / "r.csv"
    res.write_text(HEADER + row + "\n")
    p = subprocess.run([str(device_bin), "--resources", str(res), "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and f"{res}:2: {what}, expected an integer 0..1048576" in p.stderr


def test_device_rejects_large_observable_payload(device_bin, tmp_path):
    res = tmp_path / "r.csv"
    res.write_text("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
                   "notify_jitter_us,notify_service_us,notify_type,max_age_s\n"
                   "a,0,sleep,2048,deterministic,1000,0,0,con,1\n")
    p = subprocess.run([str(device_bin), "--resources", str(res), "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and f"{res}:2: payload_bytes above 1024 on an observable resource" in p.stderr


@pytest.mark.slow
def test_ge_blockwise_retransmits_lost_blocks(ge_bin, device_bin, tmp_path):
    """5 % loss on the device's side, both directions, CON with --retransmit: every transfer
    completes; lost blocks show up as retransmissions in blockwise.csv. Seed 9 drops datagrams
    both ways (3 in, 1 out, 4 retransmissions in every one of 3 tries) in ~5 s; seed 7 chained
    backed-off retransmissions for 20-30 s, the same behaviour at RFC 7252's 2-3 s per loss."""
    with Device(device_bin, tmp_path, RES, "--impair", "dir=both,loss=5%", "--impair-seed", "9") as d:
        u = f"coap://{d.addr[0]}:{d.addr[1]}"
        rows = [(0, k * 1000, "GET", f"{u}/big") for k in range(4)]
        trace = write_trace(tmp_path / "t.csv", rows)
        out = tmp_path / "ge"
        p = run_ge(ge_bin, trace, out, "--block-size", "1024", "--retransmit", "--timeout-ms", "60000",
                   timeout=120)
        assert d.stop() == 0
    assert p.returncode == 0, p.stderr
    req = read_csv(out / "requests.csv")
    bw = read_csv(out / "blockwise.csv")
    assert all(r["outcome"] == "ok" for r in req)
    assert all(int(b["blocks"]) == 16 and int(b["body_bytes"]) == 16384 for b in bw)
    imp = d.summary()["impair"]
    assert imp["dropped_in"] + imp["dropped_out"] > 0
    # a datagram the device dropped on the way in was a GE request (resent by the GE) or one of
    # the GE's ACKs to the 4 separate first-block responses (libcoap resends those)
    assert sum(int(b["retransmissions"]) for b in bw) >= imp["dropped_in"] - len(req)
    assert [int(r["retransmissions"]) for r in req] == [int(b["retransmissions"]) for b in bw]


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")     # utime + stime


def test_device_block2_cost_does_not_grow_with_the_body(ge_bin, device_bin, tmp_path):
    """Serving one block must cost O(block), not O(body): libcoap 4.3.1's
    coap_add_data_blocked_response() hashes the whole body for the ETag of every block, which
    made a 1 MiB GET in 1 KiB blocks cost the device ~4 s of CPU (1024 x 1 MiB hashed).
    CPU time, not wall time, so a loaded host does not decide it."""
    with Device(device_bin, tmp_path, "mib,0,sleep,1048576\n") as d:
        u = f"coap://{d.addr[0]}:{d.addr[1]}"
        trace = write_trace(tmp_path / "t.csv", [(0, 0, "GET", f"{u}/mib")])
        cpu0 = _cpu_s(d.proc.pid)
        p = run_ge(ge_bin, trace, tmp_path / "ge", "--block-size", "1024", "--timeout-ms", "30000",
                   timeout=60)
        cpu = _cpu_s(d.proc.pid) - cpu0
        assert d.stop() == 0
    assert p.returncode == 0, p.stderr
    bw = read_csv(tmp_path / "ge" / "blockwise.csv")
    assert int(bw[0]["blocks"]) == 1024 and int(bw[0]["body_bytes"]) == 1048576
    assert cpu < 1.0, f"the device spent {cpu:.2f} s of CPU on 1024 blocks"
