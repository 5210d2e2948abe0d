#!/usr/bin/env python3
"""wot-device benchmark (not pass/fail).

1. Service-time emulation error (measured - S) for sleep and busy at 1 ms and 5 ms: from the
   device log (end - start) and from a client (response time - S, which adds loopback, the
   Python client and the I/O-thread hand-off). Device pinned to one core, client to another.
2. Max responses/s of a 0 µs resource (closed loop, NON, 64 in flight, C load generator).

A row whose device or load generator fails prints n/a with the reason; the bench goes on.

usage: .venv/bin/python bench/device_bench.py [--n 300] [--device-cpu 1] [--client-cpu 0]
                                              [--load-seconds 3] [--smoke]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from testkit.coap import GET, NON, Client  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, PeerFailed, na, run_peer  # noqa: E402
from testkit.device import Device  # noqa: E402


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def build() -> tuple[Path, Path]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "wot-device")], check=True)
    load = ROOT / "wot-device" / "build" / "device_load"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(load),
                    str(ROOT / "bench" / "device_load.c")], check=True)
    return ROOT / "wot-device" / "build" / "wot-device", load


def service_error(binary: Path, tmp: Path, mode: str, us: int, n: int, cpu: int):
    with Device(binary, tmp, f"r,{us},{mode},0\n", name=f"{mode}{us}", cpu=cpu) as d:
        c = Client(d.addr)
        rts = []
        for _ in range(n):
            r = c.request(GET, "r", NON, timeout=2)
            if r:
                rts.append(r["rt_ns"])
        c.close()
        d.stop()
        log = d.log()
    S = us * 1000
    dev = [(int(r["end_ns"]) - int(r["start_ns"]) - S) / 1000 for r in log]
    cli = [(rt - S) / 1000 for rt in rts]
    return dev, cli


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--device-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--load-seconds", type=float, default=3.0, help="each max-rate run")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.n, a.load_seconds = 10, 0.3
    binary, load = build()
    os.sched_setaffinity(0, {a.client_cpu})
    tmp = Path(tempfile.mkdtemp(prefix="device-bench-"))
    print(f"service-time error in µs (measured - S), n={a.n} sequential NON GETs, "
          f"device on cpu {a.device_cpu}, client on cpu {a.client_cpu}")
    print(f"{'mode':6} {'S':>5} | {'log p50':>8} {'log p99':>8} {'log max':>8} | "
          f"{'client p50':>10} {'client p99':>10}")
    for mode in ("sleep", "busy"):
        for us in (1000, 5000):
            n = a.n if us == 1000 else max(5 if a.smoke else 50, a.n // 2)
            try:
                dev, cli = service_error(binary, tmp, mode, us, n, a.device_cpu)
            except (RuntimeError, OSError, ValueError, KeyError) as e:   # no device, no log
                print(f"{mode:6} {us // 1000:>3}ms | {na(e)}")
                continue
            if not dev or not cli:
                print(f"{mode:6} {us // 1000:>3}ms | {na(f'{len(dev)} logged, {len(cli)} answered of {n}')}")
                continue
            print(f"{mode:6} {us // 1000:>3}ms | {pct(dev, 50):8.1f} {pct(dev, 99):8.1f} "
                  f"{max(dev):8.1f} | {pct(cli, 50):10.1f} {pct(cli, 99):10.1f}")
    rates = []
    for threads in (1,) if a.smoke else (1, 2):
        try:
            with Device(binary, tmp, "z,0,sleep,16\n", "--threads", str(threads),
                        name=f"rate{threads}", cpu=a.device_cpu) as d:
                out = run_peer([str(load), d.addr[0], str(d.addr[1]), "z", "64",
                                str(a.load_seconds)], "device_load", timeout=a.load_seconds + 30,
                               preexec_fn=lambda: os.sched_setaffinity(0, {a.client_cpu}))
                d.stop()
                rates.append((threads, float(out.stdout.split()[1]), d.summary()))
        except (PeerFailed, RuntimeError) as e:
            rates.append((threads, getattr(e, "why", str(e)), None))
    for threads, rate, s in rates:
        what = f"0 µs resource, {threads} worker thread(s), 64 in flight (NON): "
        if s is None:
            print(what + na(rate))
            continue
        print(what + f"{rate:,.0f} responses/s  (503s: {s['overload_503']}, log entries "
              f"{s['log_entries']})")


if __name__ == "__main__":
    main()
