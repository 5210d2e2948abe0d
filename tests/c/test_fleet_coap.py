"""wot-fleet's Observe (RFC 7641), block-wise transfer (RFC 7959) and app-level impairments
(docs/CONTRACTS.md §3b) against clients nobody here wrote -- libcoap's coap-client (Debian
libcoap3-bin) and aiocoap -- and against the project's own GE, with the same checks as the
wot-device tests of these features (test_observe.py, test_blockwise.py, test_device_impair.py).
ASan+UBSan build unless said."""
import json
import shutil
import socket
import subprocess
import time

import pytest

from test_blockwise import (RES as BLOCK_RES, aiocoap_blockwise, check_aiocoap_blockwise,
                            check_ge_blockwise, ge_blockwise, read_csv)
from test_observe import (GE_OBSERVED_ROWS, OBS_HEADER, aiocoap_observe,
                          check_aiocoap_observation, check_ge_observations, ge_observes_twice)
from testkit.coap import ACK, CON, GET, NON, RST, code_str, decode, encode
from testkit.device import Device
from testkit.fleet import Fleet, Spec, build
from testkit.ge import run_ge, write_trace

COAP_CLIENT = shutil.which("coap-client-notls") or shutil.which("coap-client")
NEEDS_COAP_CLIENT = pytest.mark.skipif(
    COAP_CLIENT is None, reason="coap-client-notls (Debian libcoap3-bin, scripts/bootstrap) not "
                                "installed")


@pytest.fixture(scope="module")
def fleet_asan_bin():
    return build("wot-fleet-asan")


def clean_exit(f: Fleet):
    assert f.stop() == 0
    err = f.stderr()
    assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err


def uri(spec: Spec, path: str) -> str:
    return f"coap://{spec.listen[0]}:{spec.listen[1]}/{path}"


# ------------------------------------------------------------------------------------ Observe

OBS_ROWS = "temp,1000,sleep,16,uniform,100000,20000,2000,con,7\nplain,1000,sleep,8,none,0,0,0,con,60\n"


def test_aiocoap_observes_a_fleet_device(fleet_asan_bin, tmp_path):
    """The checks of test_observe.py's aiocoap test, on one device of a fleet whose other
    device is observable too (its notification process runs, unobserved)."""
    specs = [Spec(7, OBS_ROWS, res_header=OBS_HEADER), Spec(8, OBS_ROWS, res_header=OBS_HEADER)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        first, seen = aiocoap_observe(uri(specs[0], "temp"), 5)
        plain, none = aiocoap_observe(uri(specs[0], "plain"), 1)
        time.sleep(0.3)
        clean_exit(f)
    log = f.notify_log()
    assert [r for r in log if int(r["device"]) == 8] == []   # nobody observed device 8
    mine = [r for r in log if int(r["device"]) == 7]
    check_aiocoap_observation(first, seen, plain, none, mine)
    kinds = [r["kind"] for r in mine]
    for r in mine:
        if r["kind"] == "notify":   # the tick came before the read
            assert int(r["tick_ns"]) <= int(r["read_start_ns"])
    obs = f.summary()["observe"]
    assert obs["observable_resources"] == 2 and obs["registrations"] >= 1
    assert obs["reads_unobserved"] > 0      # device 8's reads, and 7's before the registration
    assert obs["notifications"] == obs["notifications_con"] == kinds.count("notify")
    # the plain GET was a request of the device log; registrations are not
    assert [r["path"] for r in f.log()] == ["plain"]


@NEEDS_COAP_CLIENT
def test_coap_client_observes_and_cancels(fleet_asan_bin, tmp_path):
    """libcoap's own client: `coap-client -s 2` observes for 2 s (NON notifications every
    100 ms), prints every notification's payload, then deregisters."""
    rows = "n,0,sleep,5,deterministic,100000,0,0,non,3\n"
    specs = [Spec(3, rows, res_header=OBS_HEADER)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        p = subprocess.run([COAP_CLIENT, "-s", "2", "-B", "4", "-m", "get", uri(specs[0], "n")],
                           capture_output=True, text=True, timeout=20)
        time.sleep(0.2)
        clean_exit(f)
    assert p.returncode == 0, p.stderr
    got = p.stdout.count("xxxxx")
    log = f.notify_log()
    notes = [r for r in log if r["kind"] == "notify"]
    assert log[0]["kind"] == "register" and log[0]["type"] == "ack"
    assert {r["type"] for r in notes} == {"non"}
    assert 12 <= len(notes) <= 25, len(notes)       # 2 s at 10/s on a shared host
    assert got >= len(notes) - 2                    # loopback: what was emitted arrived
    assert f.summary()["observe"]["observers_at_exit"] <= 1


def test_rst_to_a_notification_removes_the_observer(fleet_asan_bin, tmp_path):
    """RFC 7641 §3.6: an RST to a CON notification removes the observer (libcoap too)."""
    rows = "t,0,sleep,4,deterministic,50000,0,0,con,1\n"
    specs = [Spec(1, rows, res_header=OBS_HEADER)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(2)
        # CON GET, token 'ob', Observe 0 (empty), Uri-Path "t" (delta 5)
        s.sendto(bytes([0x42, 0x01, 0x00, 0x07]) + b"ob" + bytes([0x60, 0x51]) + b"t",
                 specs[0].listen)
        reg = decode(s.recvfrom(2048)[0])
        note = decode(s.recvfrom(2048)[0])
        assert (reg["type"], code_str(reg["code"])) == (ACK, "2.05")
        assert note["type"] == CON and note["token"] == b"ob"
        s.sendto(encode(RST, 0, note["mid"]), specs[0].listen)
        s.settimeout(0.3)
        later = []
        try:
            while True:
                later.append(decode(s.recvfrom(2048)[0]))
        except socket.timeout:
            pass
        s.close()
        clean_exit(f)
    # at most one crossed the RST on the way
    assert len([m for m in later if m["token"] == b"ob"]) <= 1
    obs = f.summary()["observe"]
    assert obs["removed_rst"] == 1 and obs["observers_at_exit"] == 0


def test_ge_observes_and_cancels_fleet_device(ge_asan_bin, fleet_asan_bin, tmp_path):
    """test_observe.py's GE test with the device in the engine: two observations of one busy
    resource, a GET, two CANCELs; every GE notification is one the engine emitted to that
    token (the one-way join of analysis/observe.py)."""
    specs = [Spec(0, GE_OBSERVED_ROWS, res_header=OBS_HEADER)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        p, out = ge_observes_twice(ge_asan_bin, specs[0].listen, tmp_path)
        clean_exit(f)
    check_ge_observations(p, out, f.notify_log())
    s = f.summary()["observe"]
    assert s["cancels"] == 2 and s["observers_at_exit"] == 0 and s["retransmissions"] == 0
    assert [r["path"] for r in f.log()] == ["q"]


def test_bad_observe_columns_named_by_line(fleet_asan_bin, tmp_path):
    """A bad observable resource row: the resource file's line, then the devices file's."""
    specs = [Spec(0, "t,0,sleep,4,sometimes,1000,0,0,con,1\n", res_header=OBS_HEADER)]
    f = Fleet(fleet_asan_bin, tmp_path, specs)
    p = subprocess.run(f.cmd, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert "res0.csv:2: bad notify_dist" in p.stderr and "devices.csv:2: bad resource file" in p.stderr


# --------------------------------------------------------------------------------- block-wise


@NEEDS_COAP_CLIENT
def test_coap_client_block2_and_block1(fleet_asan_bin, tmp_path):
    """coap-client -b 64: a 64 KiB GET in 1024 blocks, a 4 KiB PUT in 64; each transfer is one
    request of the device log, the follow-ups are counted. Both resources answer piggy-backed:
    libcoap 4.3.1's coap-client gives up on a first block that comes as a separate response
    ("large body receive internal issue"), from wot-device as from the engine."""
    specs = [Spec(5, BLOCK_RES)]
    body = tmp_path / "body"
    body.write_bytes(b"y" * 4096)
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        get = subprocess.run([COAP_CLIENT, "-m", "get", "-b", "64", uri(specs[0], "huge")],
                             capture_output=True, timeout=60)
        put = subprocess.run([COAP_CLIENT, "-m", "put", "-b", "64", "-f", str(body),
                              uri(specs[0], "up")], capture_output=True, text=True, timeout=30)
        clean_exit(f)
    assert get.returncode == 0 and get.stdout.strip() == b"x" * 65536, get.stderr
    assert put.returncode == 0, put.stderr
    assert [(r["path"], r["method"], r["code"]) for r in f.log()] == [
        ("huge", "GET", "2.05"), ("up", "PUT", "2.04")]
    bw = f.summary()["blockwise"]
    assert bw == {"block2_follow_ups": 1023, "block1_continues": 63}


def test_aiocoap_blockwise_client(fleet_asan_bin, tmp_path):
    """test_blockwise.py's aiocoap test with the device in the engine."""
    specs = [Spec(2, BLOCK_RES)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        out = aiocoap_blockwise(uri(specs[0], "")[:-1])
        clean_exit(f)
    check_aiocoap_blockwise(out, f.log(), f.summary()["blockwise"])


@pytest.mark.parametrize("bs", [16, 1024])
def test_ge_blockwise_against_fleet(ge_asan_bin, fleet_asan_bin, tmp_path, bs):
    """test_blockwise.py's GE test (--block-size) with the device in the engine."""
    specs = [Spec(0, BLOCK_RES)]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        p, out = ge_blockwise(ge_asan_bin, specs[0].listen, tmp_path, bs)
        clean_exit(f)
    check_ge_blockwise(p, out, f.log(), bs)


# ------------------------------------------------------------------------------- impairments


def _sequential_nons(addr, n: int, wait_s: float = 0.05, drain_s: float = 2.0) -> list[bool]:
    """n NON GETs of r0, one after the other (each sent after the previous one's answer or
    ``wait_s``, so they arrive in order): which were answered. An answer later than ``wait_s``
    (a loaded host) still counts, read in a final ``drain_s``: the model drops a request, it
    does not delay one."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(wait_s)
    answered: set[bytes] = set()
    for k in range(n):
        tok = k.to_bytes(2, "big")
        s.sendto(encode(NON, GET, 1000 + k, tok, "r0"), addr)
        try:
            while tok not in answered:
                answered.add(decode(s.recvfrom(2048)[0])["token"])
        except socket.timeout:
            pass
    s.settimeout(drain_s)
    try:
        while True:
            answered.add(decode(s.recvfrom(2048)[0])["token"])
    except socket.timeout:
        pass
    s.close()
    return [k.to_bytes(2, "big") in answered for k in range(n)]


def test_impairment_is_wot_devices_model(device_bin, fleet_asan_bin, tmp_path):
    """The same --impair spec and seed drop the same requests in wot-device and in the
    engine (one model, impair_netem.c; the n-th datagram draws the n-th number of its
    direction's stream), and the counters say so."""
    spec, seed = "dir=ingress,loss=30%", "7"
    column = spec.replace(",", ";")           # the devices file's separator inside a spec
    with Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair", spec, "--impair-seed",
                seed, name="dev") as d:
        ref = _sequential_nons(d.addr, 80)
        assert d.stop() == 0
    dev_counts = d.summary()["impair"]
    specs = [Spec(4, "r0,0,sleep,4\n", impair=(column, "", seed)), Spec(5, "r0,0,sleep,4\n")]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        got = _sequential_nons(specs[0].listen, 80)
        plain = _sequential_nons(specs[1].listen, 20)
        clean_exit(f)
    assert got == ref and 10 < ref.count(False) < 40, (ref, got)
    assert all(plain)
    t = f.impair_table()
    assert list(t) == [4]                      # only the impaired device has a row
    assert t[4]["dropped_in"] == dev_counts["dropped_in"] == got.count(False)
    assert t[4]["dropped_out"] == 0 and t[4]["seed"] == 7
    assert f.summary()["impair"]["dropped"] == got.count(False)
    # a dropped request never reached the device: one log row per answered request
    assert len([r for r in f.log() if int(r["device"]) == 4]) == got.count(True)


def test_delay_both_ways_and_ge_sees_it(ge_asan_bin, fleet_asan_bin, tmp_path):
    """delay=20ms both ways on one device: the GE's response time is >= 40 ms there and not on
    its neighbour; the engine's log stamps the arrival after the ingress delay (its
    arrival_kernel_ns is the release time) and the response before the egress delay."""
    specs = [Spec(0, "r0,0,sleep,4\n", impair=("dir=both;delay=20ms", "", "3")),
             Spec(1, "r0,0,sleep,4\n")]
    with Fleet(fleet_asan_bin, tmp_path, specs) as f:
        rows = [(k % 2, k * 30_000, "GET", uri(specs[k % 2], "r0")) for k in range(20)]
        trace = write_trace(tmp_path / "t.csv", rows)
        out = tmp_path / "ge"
        p = run_ge(ge_asan_bin, trace, out)
        clean_exit(f)
    assert p.returncode == 0, p.stderr
    req = read_csv(out / "requests.csv")
    assert all(r["outcome"] == "ok" for r in req)
    rt = {0: [], 1: []}
    for r in req:
        rt[int(r["device"])].append((int(r["received_ns"]) - int(r["sent_ns"])) / 1e6)
    assert min(rt[0]) >= 40 and max(rt[1]) < 40, rt
    t = f.impair_table()[0]
    assert t["delayed_in"] == t["delayed_out"] == 10
    for r in f.log():
        if int(r["device"]) == 0:   # the response left at once; the delay is the link's
            assert int(r["response_sent_ns"]) - int(r["arrival_ns"]) < 15_000_000
            assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"])


def test_bad_impair_column_named_by_line(fleet_asan_bin, tmp_path):
    specs = [Spec(0, "r0,0,sleep,4\n"), Spec(1, "r0,0,sleep,4\n", impair=("dir=sideways", "", ""))]
    f = Fleet(fleet_asan_bin, tmp_path, specs)
    p = subprocess.run(f.cmd, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert "--impair: bad dir 'sideways', expected egress|ingress|both" in p.stderr
    assert "devices.csv:3: bad impair/impair_ge (above)" in p.stderr
    specs = [Spec(0, "r0,0,sleep,4\n", impair=("", "p=1%", ""))]
    f = Fleet(fleet_asan_bin, tmp_path, specs, name="g")
    p = subprocess.run(f.cmd, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "devices.csv:2: impair_ge or impair_seed without impair" in p.stderr
