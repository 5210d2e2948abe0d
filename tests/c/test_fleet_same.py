"""Behaviour wot-fleet shares with wot-device (docs/CONTRACTS.md §3 and §3b): CoAP methods and
codes, piggy-backed and separate responses, 4.04, /.well-known/core, ping, per-client tokens,
the queue bound and 5.03, interop with libcoap's coap-client, and the device-log rows. The same
checks run against one wot-device process and one device of a wot-fleet engine (ASan+UBSan
builds of both). What differs on purpose is tested in test_fleet_functional.py; wot-device's
bad-input checks stay in test_device_functional.py."""
import contextlib
import shutil
import subprocess

import pytest

from testkit.coap import ACK, CON, DELETE, GET, NON, POST, PUT, Client, code_str, ping
from testkit.device import Device
from testkit.fleet import Fleet, Spec, build

RES = "r0,0,sleep,16\nsub/r1,1000,busy,0\nslow,200000,sleep,4\n"
KINDS = ["wot-device", "wot-fleet"]


@pytest.fixture(scope="module")
def fleet_asan_bin():
    return build("wot-fleet-asan")


@pytest.fixture
def target(request, device_asan_bin, fleet_asan_bin, tmp_path):
    """target(response=..., slots=..., queue=...) -> a context manager yielding a Device-like
    object for the parametrised kind."""
    kind = request.param

    @contextlib.contextmanager
    def open_target(response="auto", slots=1, queue=1024):
        """Device.summary() also checks device-summary.json against its model."""
        if kind == "wot-device":
            with Device(device_asan_bin, tmp_path, RES, "--response", response, "--threads",
                        str(slots), "--queue", str(queue)) as d:
                yield d
        else:
            spec = Spec(0, RES, slots=slots, queue=queue, response=response, name="dev")
            with Fleet(fleet_asan_bin, tmp_path, [spec], "--loops", "1") as f:
                yield f.device(0)
    return open_target


def clean_exit(d):
    assert d.stop() == 0
    assert "ERROR: AddressSanitizer" not in d.stderr()
    assert "runtime error" not in d.stderr()


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_methods_codes_and_log(target):
    with target(response="separate") as dev:
        c = Client(dev.addr)
        expect = {GET: "2.05", PUT: "2.04", POST: "2.04", DELETE: "2.02"}
        for mtype in (CON, NON):
            for method, code in expect.items():
                r = c.request(method, "r0", mtype, payload=b"abc" if method in (PUT, POST) else b"")
                assert r is not None, (mtype, method)
                assert code_str(r["code"]) == code
                if method == GET:
                    assert r["payload"] == b"x" * 16
                assert r["type"] == mtype   # separate: CON for CON, NON for NON
        assert code_str(c.request(GET, "r0")["code"]) == "2.05"  # DELETE keeps the resource
        r = c.request(GET, "sub/r1")
        assert code_str(r["code"]) == "2.05" and r["payload"] == b""
        assert c.empty_acks == 6 and c.acks == 6
        c.close()
        clean_exit(dev)
        log = dev.log()
        assert len(log) == 10
        for row in log:
            assert int(row["arrival_kernel_ns"]) < int(row["arrival_ns"]) <= int(row["start_ns"])
            assert int(row["start_ns"]) <= int(row["end_ns"]) <= int(row["response_sent_ns"])
            assert int(row["arrival_ns"]) - int(row["arrival_kernel_ns"]) < 1_000_000_000
        assert [r["method"] for r in log[:4]] == ["GET", "PUT", "POST", "DELETE"]
        assert log[-1]["path"] == "sub/r1"
        assert int(log[-1]["end_ns"]) - int(log[-1]["start_ns"]) >= 1_000_000
        assert [bytes.fromhex(r["token"]) for r in log] == c.sent_tokens
        s = dev.summary()
        assert (s["requests"], s["responses"], s["log_entries"], s["piggybacked"]) == (10, 10, 10, 0)
        assert s["name"] == "dev" and s["log_dropped"] == 0
        if "threads" in s:   # wot-device's summary
            assert s["threads"] == 1 and s["response"] == "separate"


@pytest.mark.parametrize("target", KINDS, indirect=True)
@pytest.mark.parametrize("mode", ["auto", "piggyback"])
def test_piggybacked_responses(target, mode):
    with target(response=mode) as d:
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
        clean_exit(d)
        log = d.log()
        assert len(log) == 5
        for row in log:
            assert int(row["arrival_kernel_ns"]) <= int(row["arrival_ns"]) <= int(row["start_ns"])
            assert int(row["end_ns"]) <= int(row["response_sent_ns"])
        assert int(log[-1]["end_ns"]) - int(log[-1]["start_ns"]) >= 200_000_000
        s = d.summary()
        assert s["piggybacked"] == (5 if mode == "piggyback" else 4)
        assert s.get("response", mode) == mode   # wot-device's summary names the mode


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_unknown_wellknown_ping(target):
    with target(response="separate") as dev:
        c = Client(dev.addr)
        for method in (GET, PUT, POST, DELETE):
            assert code_str(c.request(method, "nope/x")["code"]) == "4.04"
        wk = c.request(GET, ".well-known/core")
        assert code_str(wk["code"]) == "2.05"
        assert set(wk["payload"].decode().split(",")) == {"</r0>", "</sub/r1>", "</slow>"}
        assert ping(dev.addr)
        c.close()
        clean_exit(dev)
        s = dev.summary()
        assert s["not_found"] == 4 and s["requests"] == 4
        rows = dev.log()
        assert [r["code"] for r in rows] == ["4.04"] * 4 and all(r["path"] == "" for r in rows)
        for r in rows:
            assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"]) <= int(r["response_sent_ns"])
            assert r["start_ns"] == r["end_ns"] == ""


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_tokens_go_to_the_right_client(target):
    with target(response="separate", slots=4) as dev:
        clients = [Client(dev.addr) for _ in range(4)]
        toks = [[c.send(GET, "sub/r1", NON if i % 2 else CON) for _ in range(5)]
                for i, c in enumerate(clients)]
        for c, ts in zip(clients, toks):
            c.poll(5)
            assert set(c.results) == set(ts) and not c.pending
            c.close()
        clean_exit(dev)


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_queue_overflow_503(target):
    with target(response="separate", slots=1, queue=2) as d:
        c = Client(d.addr)
        toks = [c.send(GET, "slow", NON) for _ in range(10)]
        c.poll(5)
        codes = [code_str(c.results[t]["code"]) for t in toks]
        ok = codes.count("2.05")
        assert ok in (2, 3), codes   # 1 in service + 2 waiting (2 if none had started yet)
        assert codes.count("5.03") == 10 - ok
        assert all(c.results[t]["rt_ns"] < 50e6 for t, k in zip(toks, codes) if k == "5.03")
        c.close()
        clean_exit(d)
        s = d.summary()
        assert s["overload_503"] == 10 - ok and s["requests"] == 10 and s["responses"] == 10
        rows = d.log()
        assert sum(r["code"] == "5.03" for r in rows) == 10 - ok
        for r in rows:
            assert int(r["arrival_kernel_ns"]) <= int(r["arrival_ns"]) <= int(r["response_sent_ns"])
        assert all(r["start_ns"] == "" for r in rows if r["code"] == "5.03")


def _coap_client():
    for name in ("coap-client", "coap-client-notls", "coap-client-openssl", "coap-client-gnutls"):
        if shutil.which(name):
            return name
    pytest.skip("libcoap3-bin coap-client not installed")


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_interop_coap_client(target):
    cc = _coap_client()
    with target(response="separate") as dev:
        host, port = dev.addr
        url = f"coap://{host}:{port}"

        def run(*args):
            return subprocess.run([cc, "-B", "5", *args], capture_output=True, text=True,
                                  timeout=15)

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
        clean_exit(dev)
        assert [row["code"] for row in dev.log()] == ["2.05", "2.04", "2.04", "2.02", "2.05",
                                                      "4.04"]
