"""wot-device app-level impairments (--impair / --impair-ge / --impair-seed, contract §3).

Parsing runs against the ASan build; timing and statistics against the release build with the
real gateway emulator (NON or CON, short --timeout-ms) as the client. Statistical bounds are
4-sigma (binomial) or robust (median, IQR) so a loaded 2-core host does not make them flaky.
"""
import socket
import statistics
import subprocess

import pytest

from testkit.coap import GET, NON, Client, encode, ping
from testkit.device import HEADER, Device
from testkit.ge import check_consistent, run_ge, write_trace

MS = 1_000_000

BAD = [  # (args, text the message must contain)
    (["--impair", "delay=20ms"], "'dir'"),
    (["--impair", "dir=sideways"], "bad dir"),
    (["--impair", "dir=egress,delay=20"], "bad delay"),
    (["--impair", "dir=egress,delay=1.5ms"], "bad delay"),
    (["--impair", "dir=egress,delay=20ms,jitter=5s"], "bad jitter"),
    (["--impair", "dir=egress,jitter=5ms"], "jitter given without delay"),
    (["--impair", "dir=egress,delay=20ms,dist=normal"], "dist given without jitter"),
    (["--impair", "dir=egress,delay=20ms,jitter=2ms,dist=gauss"], "bad dist"),
    (["--impair", "dir=egress,delay=20ms,jitter=2ms,delay-corr=101%"], "bad delay-corr"),
    (["--impair", "dir=egress,loss=2"], "bad loss"),
    (["--impair", "dir=egress,loss=-1%"], "bad loss"),
    (["--impair", "dir=egress,loss-corr=5%"], "loss-corr given without loss"),
    (["--impair", "dir=egress,rate=10"], "bad rate"),
    (["--impair", "dir=egress,rate=0kbit"], "bad rate"),
    (["--impair", "dir=egress,rate=5Mbit"], "bad rate"),
    (["--impair", "dir=egress,dup=x%"], "bad dup"),
    (["--impair", "dir=egress,corrupt=200%"], "bad corrupt"),
    (["--impair", "dir=egress,bogus=1"], "unknown key 'bogus'"),
    (["--impair", "dir=egress,loss=1%,loss=2%"], "duplicate key 'loss'"),
    (["--impair", "dir=egress,,loss=1%"], "bad item"),
    (["--impair", ""], "empty"),
    (["--impair", "dir=egress,loss=1%", "--impair-ge", "p=1%"], "loss given together with"),
    (["--impair-ge", "p=1%"], "--impair-ge: given without --impair"),
    (["--impair", "dir=egress", "--impair-ge", "r=30%"], "missing key 'p'"),
    (["--impair", "dir=egress", "--impair-ge", "p=1%,q=2%"], "unknown key 'q'"),
    (["--impair", "dir=egress", "--impair-ge", "p=1%,1-h=150%"], "bad 1-h"),
    (["--impair", "dir=egress", "--impair-seed", "-3"], "--impair-seed"),
    (["--impair", "dir=egress", "--impair-seed", "12x"], "--impair-seed"),
]


@pytest.mark.parametrize("args,text", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_impair_exit_2(device_asan_bin, tmp_path, args, text):
    res = tmp_path / "r.csv"
    res.write_text(HEADER + "r0,0,sleep,0\n")
    p = subprocess.run([str(device_asan_bin), "--resources", str(res), "--log-dir", str(tmp_path),
                        "--listen", "127.0.0.1:1", *args], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 2, p.stderr
    assert text in p.stderr, p.stderr
    assert "--impair" in p.stderr and "expected" in p.stderr, p.stderr


def test_all_keys_accepted_and_counters(device_asan_bin, tmp_path):
    """The full key set app.py can produce parses; pings stay unimpaired at 100% loss; the
    summary carries the counters (ASan: the wrappers and queues are memory-clean). dup=0%:
    as in netem, a duplicated + lost datagram still goes once (count = 1 + dup - loss)."""
    spec = ("dir=both,delay=3ms,jitter=1ms,delay-corr=25%,dist=paretonormal,loss=100%,"
            "loss-corr=0%,rate=2.5mbit,dup=0%,dup-corr=0%,corrupt=0.1%,corrupt-corr=0%")
    with Device(device_asan_bin, tmp_path, "r0,0,sleep,4\n", "--impair", spec,
                "--impair-seed", "18446744073709551615") as d:
        assert all(ping(d.addr) for _ in range(5))  # pings bypass the 100% loss
        c = Client(d.addr)
        for _ in range(20):
            assert c.request(GET, "r0", NON, timeout=0.05) is None
        c.close()
        assert d.stop() == 0
    imp = d.summary()["impair"]
    assert imp["dir"] == "both" and imp["seed"] == 18446744073709551615
    assert imp["dropped_in"] >= 20 and d.summary()["requests"] == 0
    assert imp["pings_exempt"] >= 10
    assert d.log() == []


def test_no_impair_summary_null(device_asan_bin, tmp_path):
    with Device(device_asan_bin, tmp_path, "r0,0,sleep,4\n") as d:
        assert d.stop() == 0
    assert d.summary()["impair"] is None


def _ge_run(ge_bin, tmp_path, devs, n, gap_us, *ge_args, tag="o"):
    """n requests per device, interleaved, gap_us apart per device; returns {dev index: rows}."""
    rows = []
    for i in range(n):
        for k, d in enumerate(devs):
            host, port = d.addr
            rows.append((k, 1000 + i * gap_us + k * (gap_us // (2 * len(devs))), "GET",
                         f"coap://{host}:{port}/r0"))
    trace = write_trace(tmp_path / f"{tag}.csv", rows)
    p = run_ge(ge_bin, trace, tmp_path / tag, *ge_args, timeout=120)
    assert p.returncode == 0, p.stderr
    got, _ = check_consistent(tmp_path / tag, len(rows))
    by = {k: [] for k in range(len(devs))}
    for r in got:
        by[int(r["device"])].append(r)
    return by


def _rts_ms(rows):
    return [(int(r["received_ns"]) - int(r["sent_ns"])) / MS for r in rows if r["outcome"] == "ok"]


def _iqr_sigma(x):
    q = statistics.quantiles(x, n=4)
    return (q[2] - q[0]) / 1.349


def test_normal_delay_shifts_one_device_only(device_bin, ge_bin, tmp_path):
    """20 ms ± 5 ms normal egress delay (CON: piggy-backed responses held)."""
    res = "r0,0,sleep,16\n"
    with Device(device_bin, tmp_path, res, "--impair",
                "dir=egress,delay=20ms,jitter=5ms,dist=normal", "--impair-seed", "3",
                name="slow") as slow, Device(device_bin, tmp_path, res, name="fast") as fast:
        by = _ge_run(ge_bin, tmp_path, [slow, fast], 400, 4000, "--type", "con",
                     "--timeout-ms", "1000")
        assert slow.stop() == 0 and fast.stop() == 0
    s, f = _rts_ms(by[0]), _rts_ms(by[1])
    assert len(s) == 400 and len(f) == 400
    shift = statistics.median(s) - statistics.median(f)
    assert 17.5 < shift < 22.5, (shift, statistics.median(s), statistics.median(f))
    assert statistics.median(f) < 5, statistics.median(f)      # the other device is unchanged
    sig = _iqr_sigma(s)
    assert 3.8 < sig < 6.5, sig                                  # N(20, 5): IQR/1.349 = 5
    assert min(s) > 0.0 and statistics.pstdev(f) < sig
    imp = slow.summary()["impair"]
    # 0 µs resource, default --response auto: one piggy-backed ACK per request
    assert imp["dropped_out"] == 0 and imp["delayed_out"] >= 400
    assert fast.summary()["impair"] is None


def test_bernoulli_loss_within_binomial_bounds(device_bin, ge_bin, tmp_path):
    n, p = 1000, 0.10
    with Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair", "dir=egress,loss=10%",
                "--impair-seed", "11") as d:
        by = _ge_run(ge_bin, tmp_path, [d], n, 2000, "--type", "non", "--timeout-ms", "300")
        assert d.stop() == 0
    lost = sum(r["outcome"] == "timeout" for r in by[0])
    sd = (n * p * (1 - p)) ** 0.5
    assert abs(lost - n * p) < 4 * sd, lost
    s = d.summary()
    assert s["impair"]["dropped_out"] == lost                   # every loss is the device's
    assert s["requests"] == n and len(d.log()) == n             # served and logged, reply lost


def _runs(outcomes):
    runs, cur = [], 0
    for o in outcomes:
        if o == "timeout":
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    if cur:
        runs.append(cur)
    return runs


def test_gilbert_elliott_bursts(device_bin, ge_bin, tmp_path):
    """p=5%, r=40%, 1-h=100%, 1-k=0%: loss rate p/(p+r) = 11%, mean burst 1/r = 2.5; a
    Bernoulli device at the same rate has mean run 1/(1-0.11) = 1.12."""
    n = 1200
    with Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair", "dir=egress",
                "--impair-ge", "p=5%,r=40%,1-h=100%,1-k=0%", "--impair-seed", "5",
                name="ge") as g, \
            Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair", "dir=egress,loss=11.1%",
                   "--impair-seed", "5", name="bern") as b:
        by = _ge_run(ge_bin, tmp_path, [g, b], n, 3000, "--type", "non", "--timeout-ms", "300")
        assert g.stop() == 0 and b.stop() == 0
    rg = _runs(r["outcome"] for r in by[0])
    rb = _runs(r["outcome"] for r in by[1])
    lg, lb = sum(rg), sum(rb)
    assert 0.04 * n < lg < 0.20 * n and 0.06 * n < lb < 0.17 * n, (lg, lb)
    mg, mb = lg / len(rg), lb / len(rb)
    # burst lengths are geometric(r = 0.4): mean 2.5, sd 1.9; ~50 bursts -> se ~0.3
    assert mg > 1.7, (mg, rg)
    assert mb < 1.4, (mb, rb)
    assert mg > mb + 0.4
    assert g.summary()["impair"]["dropped_out"] == lg


@pytest.mark.long   # make test-long (CI runs it after make test): 5-15 s of waiting
def test_seed_reproducible(device_bin, tmp_path):
    """Closed loop (one request at a time), so the device sends its datagrams in request order
    whatever the host load: the same seed gives the same losses and delays."""
    spec = "dir=egress,delay=10ms,jitter=8ms,dist=uniform,loss=20%"

    def once(seed, tag):
        lost, rt = [], []
        with Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair", spec,
                    "--impair-seed", str(seed), name=tag) as d:
            c = Client(d.addr)
            for i in range(100):
                r = c.request(GET, "r0", NON, timeout=0.15)
                if r is None:
                    lost.append(i)
                    c.pending.clear()
                rt.append(r["rt_ns"] / MS if r else None)
            c.close()
            assert d.stop() == 0
        assert d.summary()["impair"]["dropped_out"] >= len(lost) - 2
        return lost, rt

    l1, r1 = once(42, "a")
    l2, r2 = once(42, "b")
    l3, r3 = once(43, "c")
    assert len(l1) > 8
    # a response later than 150 ms (a stalled host) would count as lost: allow two such
    assert len(set(l1) ^ set(l2)) <= 2, (l1, l2)
    assert len(set(l1) ^ set(l3)) > 10, (l1, l3)       # ~32 expected for independent draws
    same = [abs(a - b) for a, b in zip(r1, r2) if a is not None and b is not None]
    other = [abs(a - b) for a, b in zip(r1, r3) if a is not None and b is not None]
    assert statistics.median(same) < 1.0, same           # same delays, up to host noise
    assert statistics.median(other) > 2.0, other          # uniform ±8 ms: E|diff| ≈ 5 ms


def test_ingress_loss_and_delay(device_bin, tmp_path):
    """Ingress: a dropped request never reaches a handler or the log; a held request's
    arrival_ns is its release time (so the device log shows no service-side delay)."""
    n = 200
    with Device(device_bin, tmp_path, "r0,0,sleep,4\n", "--impair",
                "dir=ingress,delay=15ms,loss=20%", "--impair-seed", "9") as d:
        c = Client(d.addr)
        rts, lost = [], 0
        for _ in range(n):
            r = c.request(GET, "r0", NON, timeout=0.1)
            if r is None:
                lost += 1
                c.pending.clear()
            else:
                rts.append(r["rt_ns"] / MS)
        c.close()
        assert d.stop() == 0
    imp, s, log = d.summary()["impair"], d.summary(), d.log()
    assert imp["dropped_in"] == lost and imp["dropped_out"] == 0
    assert s["requests"] == n - lost == len(log)
    sd = (n * 0.2 * 0.8) ** 0.5
    assert abs(lost - 0.2 * n) < 4 * sd
    assert 15 <= statistics.median(rts) < 15 + 8, statistics.median(rts)
    waits = [(int(e["end_ns"]) - int(e["arrival_ns"])) / MS for e in log]
    assert statistics.median(waits) < 2, statistics.median(waits)


def test_rate_serialises(device_bin, tmp_path):
    """rate=80kbit: a 1024-byte response (+ CoAP header + 42 bytes L2-L4) takes ~108 ms on
    the wire; a burst of 5 leaves about one wire time apart (FIFO)."""
    with Device(device_bin, tmp_path, "big,0,sleep,1024\n", "--impair",
                "dir=egress,rate=80kbit") as d:
        c = Client(d.addr)
        toks = [c.send(GET, "big", NON) for _ in range(5)]
        c.poll(3.0)
        recv = sorted(c.results[t]["recv_ns"] for t in toks)
        c.close()
        assert d.stop() == 0
    gaps = [(b - a) / MS for a, b in zip(recv, recv[1:])]
    for g in gaps:
        assert 95 < g < 130, gaps
    assert d.summary()["impair"]["delayed_out"] == 5


def test_dup_and_corrupt_counted(device_asan_bin, tmp_path):
    """dup=100%: every response twice (the duplicate is not duplicated again);
    corrupt=100%: every copy differs from the clean response in exactly one bit."""
    with Device(device_asan_bin, tmp_path, "r0,0,sleep,8\n", "--impair",
                "dir=egress,dup=100%,corrupt=100%", "--impair-seed", "2") as d:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            s.settimeout(0.5)
            toks = [bytes([i]) * 8 for i in range(1, 11)]
            for i, tok in enumerate(toks):
                s.sendto(encode(NON, GET, 100 + i, tok, "r0"), d.addr)
            got = []
            try:
                while len(got) < 40:
                    got.append(s.recv(2048))
            except socket.timeout:
                pass
        assert d.stop() == 0
    assert len(got) == 20
    imp = d.summary()["impair"]
    assert imp["duplicated_out"] == 10 and imp["corrupted_out"] == 20
    assert imp["dropped_out"] == 0
    # clean response: NON 2.05, MID, token, 0xFF, 8 x "x" (MID unknown: not compared)
    flips = []
    for g in got:
        assert len(g) == 4 + 8 + 1 + 8
        best = min(sum(bin(a ^ b).count("1") for a, b in zip(g[:2] + g[4:], clean))
                   for clean in (bytes([0x58, 0x45]) + t + b"\xff" + b"x" * 8 for t in toks))
        flips.append(best)
    assert all(f <= 1 for f in flips) and sum(flips) >= 16, flips  # a MID bit flip is invisible


def test_app_backend_args_accepted(device_asan_bin, tmp_path):
    """Every kind of argument wotbench.netimpair's AppBackend produces is accepted (the run
    then stops at the missing --log-dir, which is checked after the --impair options)."""
    from wotbench.netimpair.backends.app import app_args
    from wotbench.netimpair.model import Impairment
    cases = [
        {"delay": {"time_ms": 40, "jitter_ms": 5, "correlation": 25, "distribution": "normal"},
         "loss": {"percent": 2, "correlation": 10}, "rate": "1.5mbit",
         "duplicate": {"percent": 0.5, "correlation": 1}, "corrupt": {"percent": 0.1},
         "direction": "both"},
        {"delay": {"time_ms": 0.5}, "direction": "ingress",
         "loss": {"gilbert_elliott": {"p": 1, "r": 30, "one_minus_h": 100, "one_minus_k": 0}}},
        {"delay": {"time_ms": 10, "jitter_ms": 2, "distribution": "pareto"}, "rate": "100kbps"},
    ]
    res = tmp_path / "r.csv"
    res.write_text(HEADER)
    for c in cases:
        args = app_args(Impairment.model_validate(c), 7, "dev-0")
        p = subprocess.run([str(device_asan_bin), "--resources", str(res), "--log-dir",
                            str(tmp_path / "missing"), *args], capture_output=True, text=True,
                           timeout=20)
        assert p.returncode == 2 and "--log-dir" in p.stderr and "--impair" not in p.stderr, \
            (args, p.stderr)
