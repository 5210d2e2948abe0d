#!/usr/bin/env python3
"""Gateway-emulator benchmark (not pass/fail). GE pinned to core 1, the responder to core 0.

Measures: raw floors (bare UDP sendto loop; bare libcoap client, 32 in flight, NON and CON),
the GE's max sustained rate (every response received, achieved rate >= 97 % of offered, and
kept up by the analysis's GE-integrity rule) for NON and CON in busy wait, and the
GE's send lag p50/p99/max at 10k/50k/100k req/s in busy mode. Prints a table.
A step whose GE or responder fails prints n/a with the reason and the bench goes on.
Usage: bench/ge_bench.py [--seconds S] [--quick] [--smoke]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.bench import SMOKE_BANNER, SMOKE_HELP, PeerFailed, na, run_peer

ROOT = Path(__file__).resolve().parents[1]
GE_DIR = ROOT / "gateway-emulator"
BUILD = GE_DIR / "build"
HOST, PORT = "127.0.77.1", 16000
GE_CPU, RESP_CPU = "1", "0"


def floor(what: str, cmd: list[str]) -> float | str:
    """req/s of a floor tool (its second word), or why it could not be measured"""
    try:
        return float(run_peer(cmd, what, timeout=60).stdout.split()[1])
    except PeerFailed as e:
        return e.why
    except (IndexError, ValueError):
        return f"{what} printed no rate"


def write_trace(path: Path, rate: int, seconds: float) -> int:
    n = int(rate * seconds)
    uri = f"coap://{HOST}:{PORT}/r"
    with open(path, "w") as f:
        f.write("device_id,send_time_us,method,uri\n")
        f.writelines(f"0,{1000 + i * 1_000_000 // rate},GET,{uri}\n" for i in range(n))
    return n


def run_ge(tmp: Path, rate: int, seconds: float, mtype: str) -> dict:
    trace = tmp / f"t-{rate}.csv"
    if not trace.exists():
        write_trace(trace, rate, seconds)
    out = tmp / f"o-{rate}-{mtype}"
    run_peer([str(BUILD / "gateway-emulator"), "--trace", str(trace), "--out", str(out),
              "--type", mtype, "--wait", "busy", "--cpu", GE_CPU, "--timeout-ms", "1000"],
             "gateway-emulator", timeout=seconds + 30)
    return json.loads((out / "summary.json").read_text()) | {"_out": out}


def kept_up(out: Path) -> tuple[bool, str]:
    """The analysis's own GE-integrity rule (wotbench.analysis.ge_integrity) on this run's
    requests.csv: sends within 5 % of the trace's RIT (at least 20 µs), judged by the binomial
    test, and matching RIT distributions. A GE that averages the rate but drifts behind its
    schedule did not sustain it: the devices did not get the trace's workload."""
    import pandas as pd
    from wotbench.analysis.ge_integrity import ge_integrity
    from wotbench.rundir import GeIntegrityParams
    req = pd.read_csv(out / "requests.csv", usecols=["index", "device", "scheduled_ns",
                                                     "sent_ns"])
    df = req.rename(columns={"scheduled_ns": "sched", "sent_ns": "sent"}).astype(
        {"sched": "float64", "sent": "float64"})
    block, _, _ = ge_integrity(df, "ge", {}, GeIntegrityParams())
    return bool(block.kept_up), "; ".join(block.problems)


def _ratio(value: float, base: float | str) -> str:
    """value / base, or n/a when the base was not measured or measured nothing."""
    if isinstance(base, str):
        return "n/a"
    return f"{value / base:.2f}" if base > 0 else "n/a"


def sustained(s: dict, out: Path) -> bool:
    return (s["outcomes"]["ok"] == s["requests"]
            and s["achieved_rate"] >= 0.97 * s["offered_rate"]
            and kept_up(out)[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0, help="length of each GE run")
    ap.add_argument("--quick", action="store_true", help="fewer rate steps")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs 2 cores", file=sys.stderr)
        return 1
    subprocess.run(["make", "--no-print-directory", "-C", str(GE_DIR), "all", "bench-tools"],
                   check=True, capture_output=True)
    if a.smoke:
        print(SMOKE_BANNER)
        a.seconds = 0.2
    udp_n, coap_n = ("20000", "5000") if a.smoke else ("500000", "200000")
    load = os.getloadavg()[0]
    resp = subprocess.Popen(["taskset", "-c", RESP_CPU, str(BUILD / "ge_responder"), HOST,
                             str(PORT), "600"], stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td)
            udp = floor("ge_udp_floor", ["taskset", "-c", GE_CPU, str(BUILD / "ge_udp_floor"),
                                         HOST, str(PORT), udp_n])
            lc = {t: floor(f"ge_coap_floor {t.upper()}",
                           ["taskset", "-c", GE_CPU, str(BUILD / "ge_coap_floor"), HOST,
                            str(PORT), t, coap_n, "32"]) for t in ("non", "con")}
            steps = [50_000] if a.smoke else [50_000, 100_000, 150_000, 200_000] if a.quick \
                else [50_000, 100_000, 125_000, 150_000, 175_000, 200_000, 250_000]
            best = {}
            for t in ("non", "con"):
                best[t] = 0
                for rate in steps:
                    name = f"GE {t.upper()} {rate // 1000}k/s"
                    try:
                        s = run_ge(tmp, rate, a.seconds, t)
                    except PeerFailed as e:
                        rows.append((name, e.why))
                        break
                    ok = sustained(s, s["_out"])
                    rows.append((name, (s["achieved_rate"], s["outcomes"]["ok"] / s["requests"],
                                        s["send_lag_us"]["p99"],
                                        "sustained" if ok else "NOT sustained")))
                    if not ok:
                        break
                    best[t] = rate
            lag = {}
            for rate in (10_000,) if a.smoke else (10_000, 50_000, 100_000):
                try:
                    lag[rate] = run_ge(tmp, rate, a.seconds, "con")["send_lag_us"]
                except PeerFailed as e:
                    lag[rate] = e.why
    finally:
        resp.terminate()
        resp.wait(10)

    def fl(v) -> str:
        return f"{v:10.0f}" if not isinstance(v, str) else na(v)

    print(f"\nGE benchmark  (load average before start: {load:.2f}; GE core {GE_CPU}, "
          f"responder core {RESP_CPU}, {a.seconds:g} s per run)\n")
    print(f"{'floor':34s} {'req/s':>10s}")
    print(f"{'bare UDP sendto loop':34s} {fl(udp)}")
    print(f"{'bare libcoap client NON, 32 inflt':34s} {fl(lc['non'])}")
    print(f"{'bare libcoap client CON, 32 inflt':34s} {fl(lc['con'])}\n")
    print(f"{'GE run':22s} {'achieved':>10s} {'answered':>9s} {'lag p99 us':>11s}  verdict")
    for name, r in rows:
        if isinstance(r, str):
            print(f"{name:22s} {na(r)}")
            continue
        ach, frac, p99, v = r
        print(f"{name:22s} {ach:10.0f} {frac:9.4f} {p99:11.1f}  {v}")
    for name, base in (("bare UDP sendto loop", udp), ("libcoap NON", lc["non"]),
                       ("libcoap CON", lc["con"])):
        if not isinstance(base, str) and base <= 0:
            print(f"note: the {name} floor measured 0 req/s (the responder on core {RESP_CPU} "
                  "did not answer?): ratios against it are shown as n/a")
    print(f"\n{'GE max sustained':22s} {'req/s':>10s} {'x libcoap':>10s} {'x UDP':>8s}  target")
    for t, tgt in (("non", 150_000), ("con", 100_000)):
        print(f"{t.upper():22s} {best[t]:10d} {_ratio(best[t], lc[t]):>10s} "
              f"{_ratio(best[t], udp):>8s}  >= {tgt // 1000}k and >= 0.8 x libcoap")
    print(f"\n{'send lag (busy, CON)':22s} {'p50 us':>8s} {'p99 us':>8s} {'max us':>9s}"
          f" {'p99 / floor send':>17s}")
    per_send_us = 1e6 / udp if not isinstance(udp, str) and udp > 0 else "no floor"
    for rate, l in lag.items():
        if isinstance(l, str):
            print(f"{rate // 1000:>3d}k req/s{'':12s} {na(l)}")
            continue
        print(f"{rate // 1000:>3d}k req/s{'':12s} {l['p50']:8.2f} {l['p99']:8.2f} {l['max']:9.1f}"
              f" {_ratio(l['p99'], per_send_us):>17s}")
    print("target: p99 <= 10 us at 50k req/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
