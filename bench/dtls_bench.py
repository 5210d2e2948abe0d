#!/usr/bin/env python3
"""DTLS benchmark (issue 13 item 6; figures, not pass/fail): the GE's DTLS 1.2 PSK client against
libcoap3-bin's coap-server-openssl, next to libcoap's own client measured in the same run.

Figures, each printed with the 1-minute load average at the time it was taken:
- handshake time p50/p99: GE ``--dtls-sessions per-request`` (ClientHello sent -> server
  Finished received, handshakes.csv) vs libcoap's client library (bench/dtls_libcoap_client.c:
  session created -> COAP_EVENT_DTLS_CONNECTED), sequential sessions at a low rate;
- libcoap's coap-client-openssl binary: median wall time of one invocation over coaps:// minus
  over coap:// (the handshake plus DTLS set-up as its users see it; process start cancels out);
- max requests/s with and without DTLS: the GE (NON, busy wait, reuse sessions) stepping the
  offered rate until a step is not sustained (an answer for every request and >= 97 % of the
  offered rate), vs libcoap's client library with 32 NON requests in flight in one session.
The server is pinned to core 0, the clients to core 1. Holds the host lock (testkit/hostlock.py).
A figure whose server or client fails or times out prints n/a with the reason; the bench goes on.
Usage: bench/dtls_bench.py [--quick] [--smoke]
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit import hostlock
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, PeerFailed, na, q, run_peer, stop

ROOT = Path(__file__).resolve().parents[1]
GE_DIR = ROOT / "gateway-emulator"
BUILD = GE_DIR / "build"
HOST = "127.0.78.1"          # coap-server-openssl: CoAP on 5683, DTLS on 5684
IDENTITY, KEY = "wotbench", "bench-secret-key"
GE_CPU, SRV_CPU = "1", "0"


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def write_trace(path: Path, scheme: str, rate: int, n: int) -> Path:
    with open(path, "w") as f:
        f.write("device_id,send_time_us,method,uri\n")
        f.writelines(f"0,{1000 + i * 1_000_000 // rate},GET,{scheme}://{HOST}/\n" for i in range(n))
    return path


def run_ge(tmp: Path, name: str, scheme: str, rate: int, n: int, *args: str) -> tuple[dict, Path]:
    trace = write_trace(tmp / f"{name}.csv", scheme, rate, n)
    out = tmp / name
    dtls = ["--dtls-psk-identity", IDENTITY, "--dtls-psk-key-file", str(tmp / "key")] \
        if scheme == "coaps" else []
    run_peer([str(BUILD / "gateway-emulator"), "--trace", str(trace), "--out", str(out),
              "--cpu", GE_CPU, "--timeout-ms", "2000", *dtls, *args], "gateway-emulator",
             timeout=n / rate + 60)
    return json.loads((out / "summary.json").read_text()), out


def libcoap_client(*args: str) -> str:
    env = {**os.environ, "PSK_ID": IDENTITY, "PSK_KEY": KEY}
    return run_peer(["taskset", "-c", GE_CPU, str(BUILD / "dtls_libcoap_client"), *args],
                    f"dtls_libcoap_client {args[0]}", timeout=120, env=env).stdout


def coap_client_wall(scheme: str, n: int) -> list[float]:
    cmd = ["taskset", "-c", GE_CPU, "coap-client-openssl", "-B", "5"]
    if scheme == "coaps":
        cmd += ["-u", IDENTITY, "-k", KEY]
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        run_peer(cmd + [f"{scheme}://{HOST}/"], f"coap-client-openssl {scheme}://", timeout=10)
        out.append((time.monotonic() - t0) * 1e6)
    return out


def max_rate(tmp: Path, scheme: str, steps: list[int], seconds: float, *args: str,
             lags: dict | None = None) -> tuple[int, list[str], str]:
    best, notes = 0, []
    for rate in steps:
        s, _ = run_ge(tmp, f"rate-{scheme}-{rate}{''.join(args)}", scheme, rate, int(rate * seconds),
                      "--wait", "busy", *(args or ("--type", "non")))
        if lags is not None:
            lags[rate] = s["send_lag_us"]
        ok = s["outcomes"]["ok"] == s["requests"] and s["achieved_rate"] >= 0.97 * s["offered_rate"]
        notes.append(f"{rate}/s: {s['outcomes']['ok']}/{s['requests']} ok, achieved "
                     f"{s['achieved_rate']:.0f}/s (load {load()})")
        if not ok:
            break
        best = rate
    return best, notes, load()


class Server:
    """A fresh coap-server-openssl for one group of measurements: it keeps a session per client
    address:port (300 s idle), and a server holding thousands of them slows down (libcoap notes,
    pitfall 3), which would tilt every later figure."""

    def __enter__(self):
        self.p = subprocess.Popen(["taskset", "-c", SRV_CPU, "coap-server-openssl", "-A", HOST,
                                   "-k", KEY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.4)
        if self.p.poll() is not None:
            raise PeerFailed(f"coap-server-openssl did not start (exit {self.p.returncode})")
        return self

    def __exit__(self, *exc):
        stop(self.p)


def bench(a) -> int:
    subprocess.run(["make", "--no-print-directory", "-C", str(GE_DIR), "all", "bench-tools"],
                   check=True, capture_output=True)
    rows: list[tuple[str, str, str, str]] = []   # figure, GE, libcoap, load
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        (tmp / "key").write_text(KEY)
        for group in (handshakes, client_invocations, max_rates):
            try:
                group(tmp, a, rows, notes)
            except PeerFailed as e:
                rows.append((f"{group.__name__.replace('_', ' ')} (the rest of the group)", "-",
                             na(e.why), load()))
    print(f"\nDTLS benchmark against coap-server-openssl (core {SRV_CPU}); clients on core {GE_CPU}; "
          f"{os.cpu_count()} cores\n")
    w = max(len(r[0]) for r in rows)
    print(f"{'figure':{w}s}  {'GE':>12s}  {'libcoap client':>26s}  load avg")
    for r in rows:
        print(f"{r[0]:{w}s}  {r[1]:>12s}  {r[2]:>26s}  {r[3]}")
    print()
    for line in notes:
        print(line)
    print("\nThe max-rate figures are bounded by coap-server-openssl on one core (a libcoap example "
          "server), not only by the clients; libcoap's client keeps 32 NON requests in flight.")
    return 0


def handshakes(tmp: Path, a, rows: list, notes: list) -> None:
    """sequential sessions (one every 10 ms; a handshake takes ~1 ms), GE vs libcoap's library"""
    n_hs = 10 if a.smoke else 100 if a.quick else 300
    with Server():
        s, out = run_ge(tmp, "hs", "coaps", 100, n_hs, "--dtls-sessions", "per-request")
    d = s["dtls"]
    ge_load = load()
    with Server():
        sb, _ = run_ge(tmp, "hs-busy", "coaps", 100, n_hs, "--dtls-sessions", "per-request",
                       "--wait", "busy")
    db = sb["dtls"]
    with Server():
        lc = [line.split() for line in
              libcoap_client("hs", HOST, "5684", "dtls", str(n_hs)).splitlines()]
    hs = [float(x[1]) for x in lc if float(x[1]) > 0]
    lc_load = load()
    rows.append(("handshake p50 (µs)", f"{d['handshake_p50_us']:.0f}", f"{q(hs, .5):.0f}",
                 f"{ge_load} / {lc_load}"))
    rows.append(("handshake p99 (µs)", f"{d['handshake_p99_us']:.0f}", f"{q(hs, .99):.0f}",
                 f"{ge_load} / {lc_load}"))
    rows.append(("handshake p50/p99 (µs), GE --wait busy", f"{db['handshake_p50_us']:.0f}/"
                 f"{db['handshake_p99_us']:.0f}", "-", load()))
    rows.append(("handshakes ok", f"{d['handshakes_ok']}/{d['sessions']}",
                 f"{len(hs)}/{n_hs}", f"{ge_load} / {lc_load}"))
    rows.append(("OpenSSL allocations per request (GE)", f"{d['openssl_allocs_per_request']:.0f}",
                 "-", ge_load))
    # the GE's request after its own handshake: R from the first application record
    with open(out / "requests.csv") as f:
        rt = [(int(r["received_ns"]) - int(r["sent_ns"])) / 1e3 for r in csv.DictReader(f)
              if r["outcome"] == "ok"]
    first = [float(x[3]) for x in lc if float(x[3]) > 0]
    a.first_response_us = statistics.median(first) if first else None
    rows.append(("per-request: R after handshake p50 (µs) / libcoap first response", f"{q(rt, .5):.0f}",
                 f"{q(first, .5):.0f} (incl. handshake)", load()))


def client_invocations(tmp: Path, a, rows: list, notes: list) -> None:
    """coap-client-openssl, the binary: coaps:// minus coap:// wall time"""
    n_inv = 2 if a.smoke else 10 if a.quick else 30
    with Server():
        w_s, w_p = coap_client_wall("coaps", n_inv), coap_client_wall("coap", n_inv)
    rows.append(("coap-client-openssl invocation coaps−coap (µs, median)", "-",
                 f"{statistics.median(w_s) - statistics.median(w_p):.0f} "
                 f"({statistics.median(w_s):.0f} − {statistics.median(w_p):.0f})", load()))


def max_rates(tmp: Path, a, rows: list, notes: list) -> None:
    """max request rates with and without DTLS, and a handshake storm"""
    steps = [2000] if a.smoke else [2000, 5000, 10000, 20000, 30000, 40000, 50000, 60000, 80000,
                                    100000, 120000, 150000]
    secs = 0.2 if a.smoke else 0.5 if a.quick else 1.0
    lag_plain: dict = {}
    lag_dtls: dict = {}
    with Server():
        best_plain, notes_plain, l_plain = max_rate(tmp, "coap", steps, secs, lags=lag_plain)
    with Server():
        best_dtls, notes_dtls, l_dtls = max_rate(tmp, "coaps", steps, secs, lags=lag_dtls)
    # a handshake storm: one new session per request (CON), stepping the rate
    storm_steps = [250] if a.smoke else [250, 500, 1000, 2000, 3000, 4000, 6000]
    with Server():
        best_storm, notes_storm, l_storm = max_rate(tmp, "coaps", storm_steps, secs,
                                                    "--dtls-sessions", "per-request")
    notes += ["GE rate steps, plain:  " + "; ".join(notes_plain),
              "GE rate steps, DTLS:   " + "; ".join(notes_dtls),
              "GE per-request steps:  " + "; ".join(notes_storm)]
    n_rate = 2000 if a.smoke else 20000 if a.quick else 50000
    lc_plain = lc_dtls = None
    try:
        with Server():
            lc_plain = libcoap_client("rate", HOST, "5683", "udp", str(n_rate), "32").split()[1]
        lc_plain_load = load()
        with Server():
            lc_dtls = libcoap_client("rate", HOST, "5684", "dtls", str(n_rate), "32").split()[1]
    except PeerFailed as e:
        lc_plain_load = load()
        why = na(e.why)
        lc_plain, lc_dtls = lc_plain or why, lc_dtls or why
    rows.append(("max req/s plain CoAP (GE: highest sustained step)", str(best_plain), lc_plain,
                 f"{l_plain} / {lc_plain_load}"))
    rows.append(("max req/s DTLS reuse", str(best_dtls), lc_dtls, f"{l_dtls} / {load()}"))
    first = getattr(a, "first_response_us", None)
    rows.append(("max req/s DTLS per-request (a handshake each)", str(best_storm),
                 f"{1e6 / first:.0f} (sequential)" if first else na("no handshake measured"),
                 l_storm))
    for rate in (10000, 40000):
        if rate in lag_plain and rate in lag_dtls:
            rows.append((f"GE send lag p50/p99 at {rate // 1000}k/s NON busy, plain vs DTLS (µs)",
                         f"{lag_plain[rate]['p50']:.1f}/{lag_plain[rate]['p99']:.1f}",
                         f"DTLS: {lag_dtls[rate]['p50']:.1f}/{lag_dtls[rate]['p99']:.1f}",
                         l_dtls))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer handshakes, shorter rate steps")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if shutil.which("coap-server-openssl") is None or shutil.which("coap-client-openssl") is None:
        print("dtls_bench: libcoap3-bin's coap-server-openssl/coap-client-openssl are not installed",
              file=sys.stderr)
        return 1
    if a.smoke:
        print(SMOKE_BANNER, flush=True)
        return bench(a)
    held = hostlock.hold()   # an fd released at exit; None when the caller holds the lock
    print("host lock: " + ("held by the caller" if held is None else "taken"), flush=True)
    return bench(a)


if __name__ == "__main__":
    sys.exit(main())
