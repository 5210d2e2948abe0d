#!/usr/bin/env python3
"""Device push benchmark (issue 23; not pass/fail): how well the emulated devices keep their
own open-loop schedule (devices[].push), beside the gateway emulator, same cores, one run.

Senders, each pinned to core 1, all against bench/ge_responder.c on core 0 (answers every CoAP
request at once, batched):
  - one wot-device --push (a single client device),
  - a pod of 64 (wot-device --pod, 64 processes on the one core, each with its own address,
    the total rate split evenly),
  - the GE (--wait hybrid, as on a shared core; and busy, its dedicated-core mode).
CON GETs, evenly spaced; at each rate the senders take turns (the same host noise for all), a
sender stops after two rates in a row it did not sustain. Per sender and rate: the send lag (sent - due) p50/p99 and whether
the rate was sustained: every request answered, achieved >= 97 % of offered, and at most 1 %
of the sends later than the verdict's tolerance (max(5 % of one sender's interval, 20 µs),
the send_lag / GE-integrity rule). The load average is printed beside every row. A sender whose
run fails prints n/a with the reason at that rate and counts as not sustained; the bench goes on.
Usage: bench/push_bench.py [--seconds S] [--quick] [--pod N] [--smoke]
"""
import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from testkit.bench import SMOKE_BANNER, SMOKE_HELP, PeerFailed, na, run_peer

ROOT = Path(__file__).resolve().parents[1]
GE = ROOT / "gateway-emulator" / "build"
DEVICE = ROOT / "wot-device" / "build" / "wot-device"
SINK, SINK_PORT = "127.0.77.1", 16011
SEND_CPU, SINK_CPU = "1", "0"
HEADER = "phase,op,at_us,method,type,target,path,content_format,payload_hex"
LEAD_NS = 300_000_000          # push-start this far ahead: every device has armed its timer


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def judge(sched: np.ndarray, sent: np.ndarray, ok: int, n: int, rate: float, senders: int) -> dict:
    """Figures of one run: lag in µs, achieved rate, sustained by the rule above."""
    lag = (sent - sched) / 1e3
    span = (sent.max() - sent.min()) / 1e9 if len(sent) > 1 else 0.0
    achieved = (len(sent) - 1) / span if span > 0 else 0.0
    tol_us = max(0.05 * senders / rate * 1e6, 20.0)
    late = float((lag > tol_us).mean()) if len(lag) else 1.0
    p50, p99 = np.percentile(lag, [50, 99]) if len(lag) else (float("nan"),) * 2
    return {"p50": p50, "p99": p99, "achieved": achieved, "answered": ok / n, "late": late,
            "tol_us": tol_us,
            "sustained": ok == n and achieved >= 0.97 * rate and late <= 0.01}


def run_devices(tmp: Path, count: int, rate: float, seconds: float) -> dict:
    """`count` wot-devices (a pod when > 1) sending `rate` req/s in total."""
    per = rate / count
    n_each = max(1, int(per * seconds))
    res = tmp / "res.csv"
    res.write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,4\n")
    dirs, argv = [], []
    for k in range(count):
        d = tmp / f"d{k}"
        d.mkdir()
        offset = k / rate                     # the devices interleave: even total spacing
        rows = "".join(f"test,b,{int((offset + i / per) * 1e6) + 1000},GET,con,"
                       f"{SINK}:{SINK_PORT},r,,\n" for i in range(n_each))
        (d / "s.csv").write_text(HEADER + "\n" + rows)
        argv.append(["--resources", str(res), "--log-dir", str(d), "--listen",
                     f"127.0.78.{k + 1}:5683", "--push", str(d / "s.csv"), "--push-id", str(k),
                     "--push-timeout-ms", "1000", "--log-capacity", "16"])
        dirs.append(d)
    cmd = [str(DEVICE)] + (argv[0] if count == 1 else
                           ["--pod"] + [x for a in argv for x in ["--", *a]])
    p = subprocess.Popen(["taskset", "-c", SEND_CPU, *cmd], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not all((d / "ready").exists() for d in dirs):
            if p.poll() is not None or time.monotonic() > deadline:
                raise PeerFailed("devices did not start: " + (p.stderr.read().strip()[-200:] if p.poll() is not None else "timeout"))
            time.sleep(0.01)
        for d in dirs:
            (d / "push-go").touch()
        while not all((d / "push-setup.csv").exists() for d in dirs):
            if p.poll() is not None or time.monotonic() > deadline:
                raise PeerFailed("devices did not finish their setup phase")
            time.sleep(0.01)
        start = time.monotonic_ns() + LEAD_NS
        for d in dirs:
            (d / "push-start.tmp").write_text(f"{start}\n")
            os.rename(d / "push-start.tmp", d / "push-start")
        time.sleep(LEAD_NS / 1e9 + seconds + 1.2)     # the last send + the 1 s timeout
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            raise PeerFailed("devices did not stop within 30 s of SIGTERM") from None
    finally:
        if p.poll() is None:
            p.kill()
    sched, sent, ok, n = [], [], 0, 0
    for d in dirs:
        with open(d / "push-requests.csv", newline="") as f:
            for r in csv.DictReader(f):
                n += 1
                ok += r["outcome"] == "ok"
                if r["sent_ns"]:
                    sched.append(int(r["scheduled_ns"]))
                    sent.append(int(r["sent_ns"]))
    # each device's times count from its own start (the same instant for all of them)
    return judge(np.array(sched, float), np.array(sent, float), ok, n, rate, count)


def run_ge(tmp: Path, rate: float, seconds: float, wait: str) -> dict:
    n = int(rate * seconds)
    trace = tmp / "t.csv"
    with open(trace, "w") as f:
        f.write("device_id,send_time_us,method,uri\n")
        f.writelines(f"0,{1000 + int(i * 1e6 / rate)},GET,coap://{SINK}:{SINK_PORT}/r\n"
                     for i in range(n))
    out = tmp / "ge"
    run_peer([str(GE / "gateway-emulator"), "--trace", str(trace), "--out", str(out),
              "--type", "con", "--wait", wait, "--cpu", SEND_CPU, "--timeout-ms", "1000"],
             "gateway-emulator", timeout=seconds + 30)
    s = json.loads((out / "summary.json").read_text())
    with open(out / "requests.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["sent_ns"]]
    return judge(np.array([float(r["scheduled_ns"]) for r in rows]),
                 np.array([float(r["sent_ns"]) for r in rows]), s["outcomes"]["ok"],
                 s["requests"], rate, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each run")
    ap.add_argument("--quick", action="store_true", help="fewer rate steps")
    ap.add_argument("--pod", type=int, default=64, help="devices in the pod sender")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.seconds, a.pod = 0.2, 4
    if (os.cpu_count() or 1) < 2:
        print("needs 2 cores", file=sys.stderr)
        return 1
    for d, t in ((ROOT / "gateway-emulator", ["all", "bench-tools"]), (ROOT / "wot-device", ["all"])):
        subprocess.run(["make", "--no-print-directory", "-C", str(d), *t], check=True,
                       capture_output=True)
    steps = [1_000] if a.smoke else [1_000, 5_000, 20_000, 50_000] if a.quick else \
        [1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 50_000, 75_000, 100_000]
    senders = [("1 device", lambda tmp, r: run_devices(tmp, 1, r, a.seconds)),
               (f"pod of {a.pod}", lambda tmp, r: run_devices(tmp, a.pod, r, a.seconds)),
               ("GE hybrid", lambda tmp, r: run_ge(tmp, r, a.seconds, "hybrid")),
               ("GE busy", lambda tmp, r: run_ge(tmp, r, a.seconds, "busy"))]
    sink = subprocess.Popen(["taskset", "-c", SINK_CPU, str(GE / "ge_responder"), SINK,
                             str(SINK_PORT), "1800"], stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    print(f"push benchmark: senders on core {SEND_CPU}, ge_responder on core {SINK_CPU}, "
          f"CON GETs evenly spaced, {a.seconds:g} s per run (load average 1/5/15 min before: "
          f"{load()})\n")
    print(f"{'sender':10s} {'req/s':>7s} {'achieved':>9s} {'answered':>8s} {'lag p50 us':>10s} "
          f"{'lag p99 us':>10s} {'late':>7s} {'tol us':>7s}  {'verdict':13s} load 1/5/15")
    best = {name: 0 for name, _ in senders}
    misses = {name: 0 for name, _ in senders}
    try:
        for rate in steps:          # the senders take turns at each rate: the same host noise
            for name, run in senders:
                if misses[name] >= 2:       # two steps in a row not sustained: done
                    continue
                with tempfile.TemporaryDirectory() as td:
                    try:
                        r = run(Path(td), rate)
                    except (PeerFailed, OSError, KeyError, ValueError) as e:
                        print(f"{name:10s} {rate:7d} {na(getattr(e, 'why', str(e)))}  {load()}",
                              flush=True)
                        misses[name] += 1
                        continue
                print(f"{name:10s} {rate:7d} {r['achieved']:9.0f} {r['answered']:8.4f} "
                      f"{r['p50']:10.1f} {r['p99']:10.1f} {r['late']:7.2%} {r['tol_us']:7.0f}  "
                      f"{'sustained' if r['sustained'] else 'NOT sustained':13s} {load()}",
                      flush=True)
                misses[name] = 0 if r["sustained"] else misses[name] + 1
                if r["sustained"]:
                    best[name] = rate
    finally:
        sink.terminate()
        sink.wait(10)
    print(f"\n{'largest sustained rate':24s} {'req/s':>8s}  (of the steps {', '.join(str(s) for s in steps)}; load {load()})")
    for name, r in best.items():
        print(f"{name:24s} {r:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
