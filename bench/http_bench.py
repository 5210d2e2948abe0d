"""HTTP: the GE's http:// transport against Debian's nginx beside `wrk` (Debian), in one run on
the same cores: nginx (one worker) on core 1, the load generator (the GE, or wrk with one
thread) on core 0, the same URL (GET /index.html, 12 bytes) and the same number of connections.

1. Closed loop at 1, 10 and 100 connections (the fair comparison with wrk: each of wrk's
   connections sends its next request when the previous response ends; the GE's --clients N
   are N keep-alive connections doing the same, think 0): throughput (answered req/s) of both,
   GE / wrk, and CPU per request of each (utime + stime from /proc/PID/stat over the same
   window), with the GE's integrity figures (its stalls as a share of the clients' cycle time,
   send lag p99).
2. Open loop at 50 % of the highest closed-loop rate measured: the GE's latency from the
   scheduled send (no coordinated omission: its 100 keep-alive connections, a request waiting
   for a free one charged its wait) beside wrk2's corrected latency (-R: also from the intended
   send). wrk2 is not in Debian; it is built from its source beside the project
   (/work/thirdparty/wrk2, `make` there; its code is never committed) and the row says why it is
   absent otherwise. Debian's wrk 4 cannot stand in: it has no rate option and no wall clock in
   its Lua API, so a constant-rate script could pace it but not measure from the intended send.

Targets (GE >= 0.95 x wrk's throughput at each connection count, GE CPU per request <= wrk's)
are printed as met / not met with the load average beside every figure, never asserted. Holds
the host lock (testkit/hostlock.py). A point whose GE, wrk or wrk2 fails or times out prints n/a
with the reason, and the bench goes on.

usage: http_bench.py [--seconds S] [--rounds R] [--connections 1,10,100] [--wrk2 PATH] [--smoke]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from closed_loop_bench import cpu_s, load, stall_share  # noqa: E402  (bench/ is the script dir)
from testkit import hostlock  # noqa: E402
from testkit.bench import (CLIENT_CPU, GE_BIN, SERVER_CPU, SMOKE_BANNER, SMOKE_HELP,  # noqa: E402
                           PeerFailed, na, q, run_peer, stop)
from testkit.nginx import Nginx, nginx_path  # noqa: E402

WRK2 = Path("/work/thirdparty/wrk2/wrk")
EDGE_S = 0.3          # the CPU window leaves out each run's first and last 0.3 s


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ge_closed(tmp: Path, url: str, conns: int, seconds: float) -> dict:
    """The GE's closed loop: conns keep-alive clients, think 0, for `seconds`."""
    trace = tmp / "t.csv"
    trace.write_text(f"device_id,send_time_us,method,uri\n0,0,GET,{url}\n")
    out = tmp / f"ge-{conns}"
    start = time.monotonic_ns() + int(0.5e9 + conns * 100_000)   # connections open first
    ge = subprocess.Popen([str(GE_BIN), "--trace", str(trace), "--out", str(out), "--clients",
                           str(conns), "--duration-ms", str(int(seconds * 1000)), "--cpu",
                           CLIENT_CPU, "--start-at", str(start), "--warmup-ms", "400",
                           "--spin-us", "0", "--timeout-ms", "2000",
                           "--max-requests", str(int(200_000 * seconds) + 1000)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9) + EDGE_S)
    c0, t0 = cpu_s(ge.pid), time.monotonic_ns()
    time.sleep(seconds - 2 * EDGE_S)
    c1, t1 = cpu_s(ge.pid), time.monotonic_ns()
    try:
        _, err = ge.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        stop(ge)
        raise PeerFailed(f"gateway-emulator did not finish within {seconds + 120:g} s") from None
    if ge.returncode != 0:
        raise PeerFailed(f"gateway-emulator exited {ge.returncode}: {err.strip()[-200:]}")
    lo, hi = t0 - start, t1 - start          # the CPU window, relative to the GE's start
    ok = errors = in_window = 0
    with open(out / "requests.csv", newline="") as f:
        for r in csv.DictReader(f):
            ok += r["outcome"] == "ok"
            errors += r["outcome"] != "ok"
            if r["outcome"] == "ok" and lo <= int(r["received_ns"]) < hi:
                in_window += 1
    s = json.loads((out / "summary.json").read_text())
    return {"rps": in_window / ((hi - lo) / 1e9), "cpu_us": (c1 - c0) / max(in_window, 1) * 1e6,
            "busy": (c1 - c0) / ((hi - lo) / 1e9), "errors": errors, "ok": ok,
            "stall_share": stall_share(out), "lag_p99_us": s["send_lag_us"]["p99"],
            "connects": s["http"]["connects"]}


WRK_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")
WRK_ERR = re.compile(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)")


def wrk_closed(url: str, conns: int, seconds: float) -> dict:
    """Debian's wrk, one thread on the client core, `conns` connections."""
    p = subprocess.Popen(["taskset", "-c", CLIENT_CPU, "wrk", "-t1", f"-c{conns}",
                          f"-d{round(seconds)}s", url], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    time.sleep(EDGE_S)
    c0, t0 = cpu_s(p.pid), time.monotonic()
    time.sleep(seconds - 2 * EDGE_S)
    c1, t1 = cpu_s(p.pid), time.monotonic()
    try:
        text, _ = p.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        stop(p)
        raise PeerFailed(f"wrk did not finish within {seconds + 60:g} s") from None
    m = WRK_RPS.search(text)
    if p.returncode != 0 or not m:
        raise PeerFailed(f"wrk exited {p.returncode}: {text.strip()[-200:]}")
    rps = float(m.group(1))   # over its whole run: the window's count is rps x window
    return {"rps": rps, "cpu_us": (c1 - c0) / (rps * (t1 - t0)) * 1e6,
            "busy": (c1 - c0) / (t1 - t0), "errors": "; ".join(
                x.group(0) for x in WRK_ERR.finditer(text)) or "none"}


def ge_open(tmp: Path, url: str, rate: float, seconds: float) -> dict:
    """The GE's open loop at `rate` req/s over 100 keep-alive connections; latency from the
    scheduled send to the response's kernel receive stamp (the first and last 10 % left out)."""
    n = int(rate * seconds)
    step = 1e6 / rate
    trace = tmp / "open.csv"
    with open(trace, "w") as f:
        f.write("device_id,send_time_us,method,uri\n")
        for i in range(n):
            f.write(f"0,{round(i * step)},GET,{url}\n")
    out = tmp / "ge-open"
    run_peer([str(GE_BIN), "--trace", str(trace), "--out", str(out), "--cpu", CLIENT_CPU,
              "--http-connections", "100", "--warmup-ms", "400", "--timeout-ms", "2000"],
             "gateway-emulator", timeout=seconds + 120)
    lat, bad = [], 0
    with open(out / "requests.csv", newline="") as f:
        for i, r in enumerate(csv.DictReader(f)):
            if r["outcome"] != "ok":
                bad += 1
            elif n // 10 <= i < n - n // 10:
                lat.append((int(r["received_kernel_ns"] or r["received_ns"]) -
                            int(r["scheduled_ns"])) / 1e3)
    s = json.loads((out / "summary.json").read_text())
    return {"p": [q(lat, x) for x in (0.5, 0.9, 0.99, 0.999)], "not_ok": bad,
            "lag_p99_us": s["send_lag_us"]["p99"], "queued": s["http"]["queued"]}


WRK2_LINE = re.compile(r"^\s*(50\.0|90\.0|99\.0|99\.9)0*%\s+([\d.]+)(us|ms|s)\s*$", re.M)
UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6}
WRK2_CALIBRATION_S = 10   # wrk2 records only after its ~10 s calibration: run it that much longer


def wrk2_open(wrk2: Path, url: str, rate: float, seconds: float) -> dict:
    """wrk2 -R rate over 100 connections: its corrected latency (from the intended send), as
    recorded after its calibration; the achieved rate is over its whole run."""
    p = run_peer(["taskset", "-c", CLIENT_CPU, str(wrk2), "-t1", "-c100",
                  f"-d{round(seconds) + WRK2_CALIBRATION_S}s", f"-R{rate:.0f}", "--latency", url],
                 "wrk2", timeout=seconds + 90)
    got = {m.group(1): float(m.group(2)) * UNIT_US[m.group(3)]
           for m in WRK2_LINE.finditer(p.stdout)}
    if len(got) < 4:
        raise PeerFailed(f"wrk2 printed no latency distribution: {p.stdout.strip()[-200:]}")
    return {"p": [got["50.0"], got["90.0"], got["99.0"], got["99.9"]],
            "rps": float(WRK_RPS.search(p.stdout).group(1))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=4)   # wrk takes whole seconds
    ap.add_argument("--connections", default="1,10,100")
    ap.add_argument("--wrk2", type=Path, default=WRK2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    missing = [x for x, ok in (("nginx (apt-get install nginx)", nginx_path()),
                               ("wrk (apt-get install wrk)", shutil.which("wrk")),
                               (f"the GE ({GE_BIN}: make build)", GE_BIN.exists())) if not ok]
    if missing:
        print("skipped: " + ", ".join(missing) + " not installed")
        return 0
    if a.smoke:
        print(SMOKE_BANNER)
        a.seconds, a.rounds, a.connections = 1, 1, "1"
    else:
        held = hostlock.hold()   # an fd released at exit; None when the caller holds the lock
        del held
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: nginx (1 worker) on core "
          f"{SERVER_CPU}, GE / wrk -t1 on core {CLIENT_CPU}, GET /index.html (12 B), "
          f"{a.seconds:g} s per point, {a.rounds} rounds per row (medians; ratios: median of "
          "each round's); CPU = utime+stime over the window")
    print(f"{'conns':>6} {'GE req/s':>10} {'wrk req/s':>10} {'GE/wrk':>7} {'GE µs/req':>10} "
          f"{'wrk µs/req':>10} {'CPU GE/wrk':>10} {'GE stall':>8} {'GE busy':>7}  targets"
          f"                       load avg")
    best = 0.0
    with tempfile.TemporaryDirectory() as td, Nginx(cpu=int(SERVER_CPU)) as ng:
        tmp, url = Path(td), ng.uri()
        for conns in (int(x) for x in a.connections.split(",")):
            try:
                best = max(best, closed_row(tmp, url, conns, a.seconds, a.rounds))
            except PeerFailed as e:
                print(f"{conns:>6} {na(e.why)}  {load()}", flush=True)
        rate = best / 2
        print(f"\nopen loop at 50 % of the highest closed-loop rate ({best:.0f} req/s): "
              f"{rate:.0f} req/s, 100 connections, latency from the intended send (µs)")
        print(f"{'':>14} {'p50':>9} {'p90':>9} {'p99':>9} {'p99.9':>9}  load avg")
        g = None
        if rate <= 0:
            print(f"{'GE':>14} {na('no closed-loop rate was measured')}")
        else:
            try:
                g = ge_open(tmp, url, rate, a.seconds)
                print(f"{'GE':>14} " + " ".join(f"{x:>9.1f}" for x in g["p"]) + f"  {load()}"
                      f"   (not ok {g['not_ok']}, queued {g['queued']}, send lag p99 "
                      f"{g['lag_p99_us']:.1f} µs)", flush=True)
            except PeerFailed as e:
                print(f"{'GE':>14} {na(e.why)}  {load()}", flush=True)
        if a.smoke:
            print(f"{'wrk2':>14} not run in a smoke run (its {WRK2_CALIBRATION_S} s calibration)")
            return 0
        if not a.wrk2.exists():
            print(f"{'wrk2':>14} absent: {a.wrk2} not built (wrk2 is not in Debian; fetch "
                  "github.com/giltene/wrk2 into /work/thirdparty/wrk2 and run make there)")
            return 0
        if rate <= 0:
            print(f"{'wrk2 -R':>14} {na('no closed-loop rate was measured')}")
            return 0
        try:
            w = wrk2_open(a.wrk2, url, rate, a.seconds)
        except PeerFailed as e:
            print(f"{'wrk2 -R':>14} {na(e.why)}  {load()}")
            return 0
        print(f"{'wrk2 -R':>14} " + " ".join(f"{x:>9.1f}" for x in w["p"]) + f"  {load()}"
              f"   (achieved {w['rps']:.0f} req/s)")
        if g is not None:
            print(f"{'GE / wrk2':>14} " + " ".join(f"{x / y:>9.3f}" for x, y in zip(g["p"], w["p"])))
    return 0


def closed_row(tmp: Path, url: str, conns: int, seconds: float, rounds: int) -> float:
    """One closed-loop row (GE and wrk alternating over `rounds`); returns its best rate."""
    gs, ws = [], []
    for k in range(rounds):   # alternating who goes first: drift hits both alike
        if k % 2:
            gs.append(ge_closed(tmp, url, conns, seconds))
        ws.append(wrk_closed(url, conns, seconds))
        if not k % 2:
            gs.append(ge_closed(tmp, url, conns, seconds))
    # per round ratios (the same minute's noise), their median; the figures' medians
    rs = sorted(x["rps"] / y["rps"] for x, y in zip(gs, ws))
    cs = sorted(x["cpu_us"] / y["cpu_us"] for x, y in zip(gs, ws))
    r, c = median(rs), median(cs)
    g = {k: median([x[k] for x in gs]) for k in ("rps", "cpu_us", "stall_share", "busy")}
    g |= {k: sum(x[k] for x in gs) for k in ("errors", "ok")}
    w = {"rps": median([x["rps"] for x in ws]),
         "cpu_us": median([x["cpu_us"] for x in ws]),
         "errors": "; ".join(sorted({x["errors"] for x in ws}))}
    print(f"{conns:>6} {g['rps']:>10.0f} {w['rps']:>10.0f} {r:>7.3f} "
          f"{g['cpu_us']:>10.2f} {w['cpu_us']:>10.2f} {c:>10.3f} "
          f"{g['stall_share']:>8.4f} {g['busy']:>7.2f}  throughput {met(r >= 0.95)}, "
          f"CPU/req {met(c <= 1.0)}  {load()}", flush=True)
    print(f"       rounds: GE/wrk {rs[0]:.3f}..{rs[-1]:.3f}, CPU GE/wrk "
          f"{cs[0]:.3f}..{cs[-1]:.3f}")
    if g["errors"] or w["errors"] != "none":
        print(f"       not ok: GE {g['errors']} of {g['ok'] + g['errors']}, wrk "
              f"{w['errors']}")
    return max(g["rps"], w["rps"])


if __name__ == "__main__":
    sys.exit(main())
