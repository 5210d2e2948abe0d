"""wot-device timing tests (release build): service-time accuracy, busy-mode CPU accounting,
threads vs a single-server queue, idle cost. Bounds are loose enough for a shared 2-core host
and use medians where a single scheduler hiccup could otherwise fail the test."""
import os
import statistics
import subprocess
import sys
import time

import pytest

from testkit.coap import CON, GET, NON, Client, code_str
from testkit.device import Device

MS = 1_000_000


def pinned(core: int):
    return lambda: os.sched_setaffinity(0, {core})


def test_sleep_5ms_at_20_per_s(device_bin, tmp_path):
    with Device(device_bin, tmp_path, "r0,5000,sleep,16\n") as d:
        c = Client(d.addr)
        _, wait0 = d.schedstat()
        t0 = time.monotonic()
        rts = []
        for i in range(60):  # 20 req/s for 3 s
            r = c.request(GET, "r0", CON, timeout=2)
            assert r is not None and code_str(r["code"]) == "2.05"
            rts.append(r["rt_ns"])
            pause = t0 + (i + 1) * 0.05 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        c.close()
        # run-queue wait of the device's threads: > 2 ms means other load on this host kept
        # the device off the CPU, and only the medians can be held to tight bounds
        quiet = d.schedstat()[1] - wait0 < 2 * MS
        assert d.stop() == 0
        log = d.log()
    assert min(rts) >= 5 * MS
    # client-side bound: median and p90 (a loaded shared host delays the Python client too)
    assert statistics.median(rts) <= 5 * MS + 1.5 * MS, statistics.median(rts)
    assert max(rts) <= 5 * MS + (15 * MS if quiet else 100 * MS), sorted(rts)
    assert len(log) == 60
    svc = []
    for row in log:
        a, s, e = int(row["arrival_ns"]), int(row["start_ns"]), int(row["end_ns"])
        assert a <= s <= e
        svc.append(e - s)
    assert min(svc) >= 5 * MS
    assert statistics.median(svc) <= 5 * MS + 50_000
    assert max(svc) <= 5 * MS + (2 * MS if quiet else 50 * MS), sorted(svc)


HOG = "import time\nend = time.monotonic() + {secs}\nwhile time.monotonic() < end: pass\n"


def _busy_round(dev: Device, n: int) -> tuple[int, int]:
    """n sequential requests; returns (process CPU ns, run-queue wait ns) they took."""
    c = Client(dev.addr)
    cpu0, wait0 = dev.schedstat()
    for _ in range(n):
        r = c.request(GET, "b", NON, timeout=5)
        assert r is not None and code_str(r["code"]) == "2.05"
    cpu, wait = dev.schedstat()
    c.close()
    return cpu - cpu0, wait - wait0


def test_busy_cpu_time_and_contention(device_bin, tmp_path):
    core = max(os.sched_getaffinity(0))
    S, n = 20 * MS, 10
    with Device(device_bin, tmp_path, "b,20000,busy,0\n", cpu=core) as d:
        cpu_idle, wait_idle = _busy_round(d, n)
        hog = subprocess.Popen([sys.executable, "-c", HOG.format(secs=4)], preexec_fn=pinned(core))
        try:
            time.sleep(0.1)
            cpu_cont, _ = _busy_round(d, n)
        finally:
            hog.kill()
            hog.wait()
        assert d.stop() == 0
        log = d.log()
    # fixed work: CPU time per request ~ S, with or without a competitor on the core
    for cpu in (cpu_idle, cpu_cont):
        assert n * S * 0.97 <= cpu <= n * S * 1.15 + 5 * MS, (cpu_idle, cpu_cont)
    wall = [int(r["end_ns"]) - int(r["start_ns"]) for r in log]
    idle, cont = statistics.median(wall[:n]), statistics.median(wall[n:])
    assert min(wall) >= S, wall
    if wait_idle < 0.1 * n * S:  # else other work on this host already shared the core
        assert idle <= S * 1.2, wall
    assert cont >= 1.6 * S, wall     # one competitor on the core: about 2x wall time


@pytest.mark.parametrize("threads", [4, 1])
def test_threads_vs_single_server(device_bin, tmp_path, threads):
    k, S = 4, 50 * MS
    with Device(device_bin, tmp_path, "s,50000,sleep,0\n", "--threads", str(threads)) as d:
        c = Client(d.addr)
        toks = [c.send(GET, "s", NON) for _ in range(k)]
        c.poll(5)
        rts = sorted(c.results[t]["rt_ns"] for t in toks)
        c.close()
        assert d.stop() == 0
    if threads == k:
        assert S <= rts[-1] <= S + 25 * MS, rts
    else:
        assert [S * (i + 1) <= rt <= S * (i + 1) + 25 * MS for i, rt in enumerate(rts)] == [True] * k, rts


def test_idle_rss_and_cpu(device_bin, tmp_path):
    with Device(device_bin, tmp_path, "r0,1000,sleep,16\n", "--threads", "2") as d:
        c = Client(d.addr)
        assert c.request(GET, "r0") is not None
        c.close()
        time.sleep(0.2)
        cpu0 = d.cpu_ns()
        time.sleep(2)
        cpu = d.cpu_ns() - cpu0
        rss, anon = d.rss_kib(), d.rss_kib("RssAnon")
        assert d.stop() == 0
    # The OpenSSL build (DTLS) touches more of the static binary's text: file-backed pages,
    # shared by every device running the same image; its private memory is what each costs.
    assert anon < 1024, f"idle private RSS {anon} KiB"
    assert rss < 6144, f"idle RSS {rss} KiB"
    assert cpu < 2 * MS, f"idle CPU {cpu} ns over 2 s"
