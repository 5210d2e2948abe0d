"""wot-device functional tests (ASan+UBSan build): CoAP behaviour, overload, bad input, interop."""
import re
import shutil
import subprocess
import time

import pytest

from testkit.coap import ACK, CON, DELETE, GET, NON, POST, PUT, Client, code_str, ping
from testkit.device import HEADER, Device

RES = "r0,0,sleep,16\nsub/r1,1000,busy,0\nslow,200000,sleep,4\n"


@pytest.fixture
def dev(device_asan_bin, tmp_path):
    """The separate-response path (worker + empty ACK + separate CON response)."""
    with Device(device_asan_bin, tmp_path, RES, "--response", "separate") as d:
        yield d
        assert d.stop() == 0
        assert "ERROR: AddressSanitizer" not in d.stderr()
        assert "runtime error" not in d.stderr()


def test_methods_codes_and_log(dev):
    c = Client(dev.addr)
    expect = {GET: "2.05", PUT: "2.04", POST: "2.04", DELETE: "2.02"}
    for mtype in (CON, NON):
        for method, code in expect.items():
            r = c.request(method, "r0", mtype, payload=b"abc" if method in (PUT, POST) else b"")
            assert r is not None, (mtype, method)
            assert code_str(r["code"]) == code
            if method == GET:
                assert r["payload"] == b"x" * 16
            # separate response: CON for a CON request, NON for a NON request
            assert r["type"] == mtype
    assert code_str(c.request(GET, "r0")["code"]) == "2.05"  # DELETE keeps the resource
    r = c.request(GET, "sub/r1")
    assert code_str(r["code"]) == "2.05" and r["payload"] == b""
    # each CON request: empty ACK at once, then a separate CON response that we ACKed
    assert c.empty_acks == 6 and c.acks == 6
    c.close()
    assert dev.stop() == 0
    log = dev.log()
    assert len(log) == 10
    for row in log:
        assert int(row["arrival_ns"]) <= int(row["start_ns"]) <= int(row["end_ns"])
        # kernel arrival stamp before the handler saw it; response handed to the kernel after
        # the service ended (both CLOCK_MONOTONIC, netstamp.c)
        assert 0 < int(row["arrival_ns"]) - int(row["arrival_kernel_ns"]) < 1_000_000_000
        assert int(row["end_ns"]) <= int(row["response_sent_ns"])
    assert [r["method"] for r in log[:4]] == ["GET", "PUT", "POST", "DELETE"]
    assert log[-1]["path"] == "sub/r1" and int(log[-1]["end_ns"]) - int(log[-1]["start_ns"]) >= 1_000_000
    # every row carries its request's token: the analysis joins device and GE rows by it
    assert [bytes.fromhex(r["token"]) for r in log] == c.sent_tokens
    s = dev.summary()
    assert s["requests"] == 10 and s["responses"] == 10 and s["log_entries"] == 10
    assert s["name"] == "dev" and s["threads"] == 1 and s["log_dropped"] == 0
    assert s["response"] == "separate" and s["piggybacked"] == 0


@pytest.mark.parametrize("mode", ["auto", "piggyback"])
def test_piggybacked_responses(device_asan_bin, tmp_path, mode):
    """--response piggyback answers every request in its ACK; auto (default) does so for services
    up to --piggyback-max-us (1 ms) and sends the slow resource's answer separately."""
    args = [] if mode == "auto" else ["--response", mode]
    with Device(device_asan_bin, tmp_path, RES, *args) as d:
        c = Client(d.addr)
        for path in ("r0", "sub/r1"):
            for mtype, rtype in ((CON, ACK), (NON, NON)):
                r = c.request(GET, path, mtype)
                assert code_str(r["code"]) == "2.05" and r["type"] == rtype, (path, mtype)
        assert c.empty_acks == 0 and c.acks == 0
        r = c.request(GET, "slow", CON, timeout=5)
        assert code_str(r["code"]) == "2.05"
        assert (r["type"], c.empty_acks, c.acks) == ((ACK, 0, 0) if mode == "piggyback" else
                                                     (CON, 1, 1))
        c.close()
        assert d.stop() == 0
        log = d.log()
        assert len(log) == 5
        for row in log:
            assert int(row["arrival_kernel_ns"]) <= int(row["arrival_ns"]) <= int(row["start_ns"])
            assert int(row["end_ns"]) <= int(row["response_sent_ns"])
        assert int(log[-1]["end_ns"]) - int(log[-1]["start_ns"]) >= 200_000_000
        s = d.summary()
        assert s["response"] == mode and s["piggybacked"] == (5 if mode == "piggyback" else 4)
        assert "runtime error" not in d.stderr()


def test_bad_response_flag(device_asan_bin, tmp_path):
    for bad in (["--response", "later"], ["--piggyback-max-us", "-1"]):
        d = Device(device_asan_bin, tmp_path, RES, *bad)
        res = subprocess.run(d.cmd, capture_output=True, text=True, timeout=10)
        assert res.returncode == 2 and bad[0] in res.stderr, res.stderr


def test_unknown_wellknown_ping(dev):
    c = Client(dev.addr)
    for method in (GET, PUT, POST, DELETE):
        assert code_str(c.request(method, "nope/x")["code"]) == "4.04"
    wk = c.request(GET, ".well-known/core")
    assert code_str(wk["code"]) == "2.05"
    links = set(wk["payload"].decode().split(","))
    assert links == {"</r0>", "</sub/r1>", "</slow>"}
    assert ping(dev.addr)
    c.close()
    assert dev.stop() == 0
    s = dev.summary()
    assert s["not_found"] == 4
    assert [r["code"] for r in dev.log()] == ["4.04"] * 4
    for r in dev.log():
        assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"]) <= int(r["response_sent_ns"])


def test_tokens_go_to_the_right_client(dev):
    clients = [Client(dev.addr) for _ in range(4)]
    toks = [[c.send(GET, "sub/r1", NON if i % 2 else CON) for _ in range(5)]
            for i, c in enumerate(clients)]
    for c, ts in zip(clients, toks):
        c.poll(5)
        assert set(c.results) == set(ts) and not c.pending
        c.close()


def test_queue_overflow_503(device_asan_bin, tmp_path):
    with Device(device_asan_bin, tmp_path, RES, "--threads", "1", "--queue", "2") as d:
        c = Client(d.addr)
        toks = [c.send(GET, "slow", NON) for _ in range(10)]
        c.poll(5)
        codes = [code_str(c.results[t]["code"]) for t in toks]
        ok = codes.count("2.05")
        assert ok in (2, 3), codes   # 1 in service + 2 waiting (2 if none had started yet)
        assert codes.count("5.03") == 10 - ok
        # a 5.03 is answered at once, the accepted ones after their service
        assert all(c.results[t]["rt_ns"] < 50e6 for t, k in zip(toks, codes) if k == "5.03")
        c.close()
        assert d.stop() == 0
        s = d.summary()
        assert s["overload_503"] == 10 - ok and s["requests"] == 10 and s["responses"] == 10
        rows = d.log()
        assert sum(r["code"] == "5.03" for r in rows) == 10 - ok
        for r in rows:  # answered at once or later: sent after the kernel arrival
            assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"]) <= int(r["response_sent_ns"])
        assert all(r["start_ns"] == "" for r in rows if r["code"] == "5.03")


BAD = {
    "missing header": ("r0,1,sleep,1\n", 1, "header"),
    "wrong header": ("path,service_time_us,mode\nr0,1,sleep\n", 1, "header"),
    "empty": ("", 0, "empty"),
    "no resources": (HEADER, 1, "no resources"),
    "too few fields": (HEADER + "r0,1,sleep\n", 2, "3 fields"),
    "too many fields": (HEADER + "r0,1,sleep,1,2\n", 2, "5 fields"),
    "leading slash": (HEADER + "/r0,1,sleep,1\n", 2, "starts with '/'"),
    "empty path": (HEADER + ",1,sleep,1\n", 2, "empty path"),
    "space in path": (HEADER + "r 0,1,sleep,1\n", 2, "invalid character"),
    "duplicate": (HEADER + "r0,1,sleep,1\n# c\n\nr0,2,busy,1\n", 5, "duplicate"),
    "negative time": (HEADER + "r0,-1,sleep,1\n", 2, "service_time_us"),
    "float time": (HEADER + "r0,1.5,sleep,1\n", 2, "service_time_us"),
    "bad mode": (HEADER + "r0,1,spin,1\n", 2, "bad mode"),
    "bad payload": (HEADER + "r0,1,busy,x\n", 2, "payload_bytes"),
    "payload too big": (HEADER + "r0,1,busy,1048577\n", 2, "payload_bytes"),
    "reserved path": (HEADER + ".well-known/core,1,busy,1\n", 2, "reserved"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_resource_file(device_asan_bin, tmp_path, case):
    text, line, what = BAD[case]
    f = tmp_path / "res.csv"
    f.write_text(text)
    p = subprocess.run([str(device_asan_bin), "--resources", str(f), "--log-dir", str(tmp_path),
                        "--listen", "127.0.0.1:1"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert re.fullmatch(rf"{re.escape(str(f))}:{line}: .*{re.escape(what)}.*, expected .+\n",
                        p.stderr), p.stderr


def test_bad_cli(device_asan_bin, tmp_path):
    f = tmp_path / "res.csv"
    f.write_text(HEADER + "r0,1,sleep,1\n")
    base = [str(device_asan_bin), "--resources", str(f), "--log-dir", str(tmp_path)]
    for extra in (["--threads", "0"], ["--queue", "x"], ["--listen", "nohost:1"],
                  ["--listen", "127.0.0.1:99999"], ["extra"]):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (extra, p.stderr)
    p = subprocess.run([str(device_asan_bin), "--resources", str(f), "--log-dir",
                        str(tmp_path / "missing")], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2


def _coap_client():
    for name in ("coap-client", "coap-client-notls", "coap-client-openssl", "coap-client-gnutls"):
        if shutil.which(name):
            return name
    pytest.skip("libcoap3-bin coap-client not installed")


def test_interop_coap_client(dev):
    cc = _coap_client()
    host, port = dev.addr
    url = f"coap://{host}:{port}"

    def run(*args):
        return subprocess.run([cc, "-B", "5", *args], capture_output=True, text=True, timeout=15)

    r = run("-m", "get", f"{url}/r0")
    assert r.returncode == 0 and r.stdout.strip() == "x" * 16, r
    for m in ("put", "post", "delete"):
        r = run("-m", m, "-e", "hello", f"{url}/sub/r1")
        assert r.returncode == 0 and "4." not in r.stderr + r.stdout, (m, r)
    r = run("-N", "-m", "get", f"{url}/r0")
    assert r.returncode == 0 and r.stdout.strip() == "x" * 16, r
    r = run("-m", "get", f"{url}/.well-known/core")
    assert set(r.stdout.strip().split(",")) == {"</r0>", "</sub/r1>", "</slow>"}, r
    r = run("-m", "get", f"{url}/missing")
    assert "4.04" in r.stdout + r.stderr
    assert dev.stop() == 0
    assert [row["code"] for row in dev.log()] == ["2.05", "2.04", "2.04", "2.02", "2.05", "4.04"]
