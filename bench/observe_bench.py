#!/usr/bin/env python3
"""Observe (RFC 7641) benchmark (issue 13), figures not pass/fail: the notifications/s one
server sustains and the notification latency, wot-device against libcoap's own example server
measured in the same run.

  wot-device (core 1), observed by the gateway emulator (core 0): one observable resource with
    a deterministic notification period and a 0 µs sensor read; N observers (OBSERVE lines with
    distinct queries, one GE source port), CANCEL after --seconds. Latency: one way = GE receive
    − the device's emission stamp (both CLOCK_MONOTONIC of this host), and trigger → receive =
    GE receive − the read's scheduled tick (the device's whole notification path).
  coap-server-notls (libcoap 4.3.1's example server, core 1), driven by bench/obs_probe.c
    (core 0): its /time notifies only once a second, but every PUT to /example_data notifies
    that resource's observers, so the probe PUTs at the step's trigger rate (NON, paced on an
    absolute schedule) and observes with N sockets (one server session each). Latency: trigger
    → receive = the probe's kernel receive stamp − the PUT's send instant (so it includes one
    more loopback hop and the PUT's handling: libcoap's server has no emission stamp).

Two series per implementation and message type, stepped up until a step is not sustained
fails its "delivered" half (testkit/notify_stats.py: >= 97 % of the configured rate, not more than
1 % undelivered); each step also says whether it was on time (not more than 1 % received more
than max(1 ms, one trigger interval) after the trigger); sustained = both:
  rate:    1 observer, trigger period stepped down (1k ... 100k notifications/s);
  fan-out: 100 triggers/s, observers stepped up (10 ... 1000 => 1k ... 100k notifications/s).
The floor printed beside them: a raw UDP ping-pong round trip (bench/udp_pingpong.c) in the same
run. Cross-checks by observers nobody here wrote (counts, not timing): coap-client-notls -s and
aiocoap against wot-device.

A step whose server, probe or GE fails prints n/a with the reason and ends its series; the bench
goes on.

usage: .venv/bin/python bench/observe_bench.py [--seconds 1.5] [--quick] [--types non,con]
                                               [--no-cross-checks] [--smoke]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from testkit.bench import (CLIENT_CPU as LOAD_CPU, DEV_BIN, GE_BIN, HOST, SERVER_CPU,  # noqa: E402
                          SMOKE_BANNER, SMOKE_HELP, PeerFailed, build, host_line, na,
                          pingpong, q, run_peer, stop)
from testkit.notify_stats import Step, device_step, judge, probe_step  # noqa: E402

PROBE_BIN = Path(__file__).resolve().parent / "build" / "obs_probe"
DEV_PORT, LC_PORT, PP_PORT = 17101, 17102, 17103
OBS_HEADER = ("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
              "notify_jitter_us,notify_service_us,notify_type,max_age_s\n")
RATE_STEPS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)   # 1 observer: per s
FANOUT_STEPS = (10, 50, 100, 200, 500, 1000)                           # at 100 triggers/s
FANOUT_RATE = 100


def _wait_ready(d: Path, p: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while not (d / "ready").exists():
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"wot-device did not start (exit {p.poll()})")
        time.sleep(0.02)


def start_device(d: Path, period_us: int, mtype: str) -> subprocess.Popen:
    d.mkdir(parents=True)
    (d / "res.csv").write_text(OBS_HEADER + f"o,0,sleep,16,deterministic,{period_us},0,0,{mtype},60\n")
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU, str(DEV_BIN), "--resources", str(d / "res.csv"),
                          "--log-dir", str(d), "--listen", f"{HOST}:{DEV_PORT}"],
                         stderr=subprocess.DEVNULL)
    _wait_ready(d, p)
    return p


def device_run(d: Path, n_obs: int, period_us: int, mtype: str, secs: float) -> Step:
    dev = start_device(d, period_us, mtype)
    try:
        u = f"coap://{HOST}:{DEV_PORT}/o"
        rows = ["device_id,send_time_us,method,uri"]
        rows += [f"0,{k * 10},OBSERVE,{u}?o={k}" for k in range(n_obs)]
        rows += [f"0,{int(secs * 1e6) + k * 10},CANCEL,{u}?o={k}" for k in range(n_obs)]
        (d / "trace.csv").write_text("\n".join(rows) + "\n")
        run_peer(["taskset", "-c", LOAD_CPU, str(GE_BIN), "--trace", str(d / "trace.csv"),
                  "--out", str(d / "ge"), "--type", mtype, "--wait", "hybrid",
                  "--timeout-ms", "2000"], "gateway-emulator", timeout=secs + 60)
    finally:
        stop(dev)
    ge = d / "ge"
    summ = json.loads((ge / "summary.json").read_text())
    dsum = json.loads((d / "device-summary.json").read_text())
    return device_step(pd.read_csv(ge / "notifications.csv", dtype={"flags": str}),
                       pd.read_csv(d / "notify-log.csv", dtype={"token": str}),
                       pd.read_csv(ge / "requests.csv"), int(summ["token_salt"], 16),
                       int(summ["start_mono_ns"]), period_us * 1e3,
                       int(dsum["observe"]["reads_skipped"]))


def libcoap_run(d: Path, n_obs: int, rate: int, mtype: str, secs: float) -> Step:
    d.mkdir(parents=True)
    args = ["-A", HOST, "-p", str(LC_PORT), "-v", "0"] + (["-N"] if mtype == "non" else [])
    srv = subprocess.Popen(["taskset", "-c", SERVER_CPU, "coap-server-notls", *args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        out = run_peer(["taskset", "-c", LOAD_CPU, str(PROBE_BIN), HOST, str(LC_PORT),
                        "example_data", str(n_obs), str(rate), str(secs), str(d / "p.csv")],
                       "obs_probe against coap-server-notls", timeout=secs + 30)
    finally:
        stop(srv)
    registered, puts, _, _ = (int(x) for x in out.stdout.split())
    if registered < n_obs:
        raise PeerFailed(f"libcoap server: {registered} of {n_obs} observers registered")
    return probe_step(pd.read_csv(d / "p.csv"), n_obs, rate, puts)


def series(tmp: Path, impl: str, mtype: str, kind: str, secs: float, quick: bool,
           smoke: bool = False) -> list[dict]:
    steps = [(1, r) for r in RATE_STEPS] if kind == "rate" else [(n, FANOUT_RATE) for n in FANOUT_STEPS]
    if quick:
        steps = steps[::2]
    if smoke:
        steps = steps[:1]
    rows = []
    for n_obs, trig in steps:
        d = tmp / f"{impl}-{mtype}-{kind}-{n_obs}-{trig}"
        try:
            if impl == "wot-device":
                s = device_run(d, n_obs, round(1e6 * n_obs / trig) if kind == "rate" else 10_000,
                               mtype, secs)
            else:
                s = libcoap_run(d, n_obs, trig, mtype, secs)
        except (PeerFailed, RuntimeError, OSError, ValueError) as e:
            rows.append({"impl": impl, "type": mtype, "series": kind, "observers": n_obs,
                         "configured": n_obs * trig, "na": getattr(e, "why", str(e)),
                         "load": os.getloadavg()[0]})
            shutil.rmtree(d, ignore_errors=True)
            break
        v = judge(s)
        rows.append({"impl": impl, "type": mtype, "series": kind, "observers": n_obs, "step": s,
                     "verdict": v, "load": os.getloadavg()[0]})
        shutil.rmtree(d, ignore_errors=True)
        if not v.delivered:
            break
    return rows


# ----------------------------------------------------------------------------- cross-checks

def coap_client_check(tmp: Path, period_us: int, secs: int) -> str:
    """coap-client-notls -s against wot-device: notifications it printed vs the device's count."""
    if not shutil.which("coap-client-notls"):
        return "coap-client-notls: not installed, skipped"
    d = tmp / "cc"
    dev = start_device(d, period_us, "non")
    try:
        r = subprocess.run(["taskset", "-c", LOAD_CPU, "coap-client-notls", "-s", str(secs), "-B",
                            str(secs + 2), "-v", "0", "-w", f"coap://{HOST}:{DEV_PORT}/o"],
                           capture_output=True, text=True, timeout=secs + 20)
    finally:
        stop(dev)
    got = sum(1 for line in r.stdout.splitlines() if line.strip())
    emitted = json.loads((d / "device-summary.json").read_text())["observe"]["notifications"]
    return (f"coap-client-notls -s {secs} at {1e6 / period_us:.0f}/s (NON): printed {got} values, "
            f"the device emitted {emitted} notifications (registration response included in the "
            f"printed values)")


def aiocoap_check(tmp: Path, period_us: int, count: int) -> str:
    try:
        import aiocoap
    except ImportError:
        return "aiocoap: not installed, skipped"
    d = tmp / "aio"
    dev = start_device(d, period_us, "non")
    recv: list[tuple[int, int]] = []

    async def go():
        ctx = await aiocoap.Context.create_client_context()
        try:
            pr = ctx.request(aiocoap.Message(code=aiocoap.GET, uri=f"coap://{HOST}:{DEV_PORT}/o",
                                             observe=0))
            await asyncio.wait_for(pr.response, 5)

            async def collect():
                async for m in pr.observation:
                    recv.append((m.opt.observe, time.monotonic_ns()))
                    if len(recv) >= count:
                        break
            await asyncio.wait_for(collect(), 10 + count * period_us / 1e6 * 3)
            pr.observation.cancel()
        finally:
            await ctx.shutdown()
    try:
        asyncio.run(go())
    except asyncio.TimeoutError:
        pass
    finally:
        stop(dev)
    log = pd.read_csv(d / "notify-log.csv", dtype={"token": str})
    emit = dict(zip(log.loc[log["kind"] == "notify", "seq"].astype(int), log.loc[log["kind"] == "notify", "emit_ns"]))
    lat = pd.Series([(t - emit[s]) / 1e3 for s, t in recv if s in emit])
    seqs = [s for s, _ in recv]
    gaps = sum(b - a - 1 for a, b in zip(seqs, seqs[1:]) if b > a)
    return (f"aiocoap observer at {1e6 / period_us:.0f}/s (NON): {len(recv)} notifications, "
            f"{gaps} sequence gaps, emission -> aiocoap (Python) p50 {q(lat, 0.5):.0f} µs, "
            f"p99 {q(lat, 0.99):.0f} µs")


def cross_check(f, tmp: Path, *args) -> str:
    name = f.__name__.replace("_check", "").replace("_", "-")
    try:
        return f(tmp, *args)
    except (PeerFailed, RuntimeError, OSError, ValueError, KeyError,
            subprocess.SubprocessError) as e:
        return f"{name}: {na(getattr(e, 'why', str(e)))}"


# ----------------------------------------------------------------------------- report

def fmt(r: dict) -> str:
    if "na" in r:
        return (f"{r['impl']:12s} {r['type']:4s} {r['series']:8s} {r['observers']:5d} "
                f"{r['configured']:9.0f} {na(r['na'])}")
    s: Step = r["step"]
    ow = (f"{q(s.one_way_us, 0.5):7.1f} {q(s.one_way_us, 0.99):8.1f}" if len(s.one_way_us)
          else f"{'-':>7s} {'-':>8s}")
    v = r["verdict"]
    verdict = "sustained" if v.sustained else (
        ("delivered, not on time: " if v.delivered else "NOT delivered: ") + "; ".join(v.problems))
    return (f"{r['impl']:12s} {r['type']:4s} {r['series']:8s} {r['observers']:5d} "
            f"{s.configured_per_s:9.0f} {s.delivered_per_s:9.0f} {s.undelivered:6d} {s.late:6d} "
            f"{ow} {q(s.trigger_us, 0.5):8.1f} {q(s.trigger_us, 0.99):9.1f} {r['load']:5.2f}  {verdict}")


def best(rows: list[dict], impl: str, mtype: str, kind: str, what: str) -> float:
    """The highest configured rate whose step passed `what` (sustained|delivered), every lower
    step included (a pass above a failure does not count)."""
    top = 0.0
    for r in rows:
        if (r["impl"], r["type"], r["series"]) != (impl, mtype, kind):
            continue
        if "na" in r or not getattr(r["verdict"], what):
            break
        top = r["step"].configured_per_s
    return top


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.5, help="observation length per step")
    ap.add_argument("--quick", action="store_true", help="every other step")
    ap.add_argument("--types", default="non,con")
    ap.add_argument("--no-cross-checks", action="store_true")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.seconds, a.types = 0.3, "non"
    if (os.cpu_count() or 1) < 2:
        print("observe bench: needs 2 cores (load and server pinned apart); skipped")
        return 0
    if not shutil.which("coap-server-notls"):
        print("observe bench: coap-server-notls (libcoap3-bin) missing: make build installs it")
        return 1
    build(("obs_probe",))
    types = [t for t in a.types.split(",") if t]
    print(host_line("observe bench") + f"; {a.seconds:g} s per step", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="wb-observe-") as td:
        tmp = Path(td)
        pp = pingpong(PP_PORT, 300, 1000)
        pp_load = os.getloadavg()[0]
        for mtype in types:
            for kind in ("rate", "fan-out"):
                for impl in ("wot-device", "libcoap"):
                    rows += series(tmp, impl, mtype, kind, a.seconds, a.quick, a.smoke)
        checks = [] if a.no_cross_checks else [
            cross_check(coap_client_check, tmp, 1000, 1 if a.smoke else 2),
            cross_check(aiocoap_check, tmp, 1000, 50 if a.smoke else 1000)]
    pp50 = q(pp, 0.5)
    print(f"\nfloor: raw UDP ping-pong round trip, 1 ms gap: p50 {pp50:.1f} µs, p99 "
          f"{q(pp, 0.99):.1f} µs (load {pp_load:.2f})\n")
    print(f"{'server':12s} {'type':4s} {'series':8s} {'obs':>5s} {'config/s':>9s} {'deliv/s':>9s} "
          f"{'undeliv':>6s} {'late':>6s} {'1way50':>7s} {'1way99':>8s} {'trig50':>8s} "
          f"{'trig99':>9s} {'load':>5s}  verdict   (latencies µs)")
    for r in rows:
        print(fmt(r))
    print("\nnotifications/s, highest step passing (every lower one too); ratio = wot-device / libcoap")
    print(f"{'':14s} {'delivered: dev':>15s} {'libcoap':>8s} {'ratio':>6s} | {'sustained: dev':>15s} "
          f"{'libcoap':>8s} {'ratio':>6s}")
    for mtype in types:
        for kind in ("rate", "fan-out"):
            cells = []
            for what in ("delivered", "sustained"):
                dv, lc = (best(rows, i, mtype, kind, what) for i in ("wot-device", "libcoap"))
                cells.append(f"{dv:15.0f} {lc:8.0f} " + (f"{dv / lc:6.2f}" if lc else f"{'-':>6s}"))
            print(f"{mtype.upper() + ' ' + kind:14s} " + " | ".join(cells))
    print(f"\nlatency at 1 k notifications/s (1 observer), p50 as a multiple of the ping-pong p50:")
    for r in rows:
        if r["series"] == "rate" and "na" not in r and r["step"].configured_per_s == 1000:
            s = r["step"]
            ow = f"one way {q(s.one_way_us, 0.5) / pp50:.2f}, " if len(s.one_way_us) else ""
            print(f"  {r['impl']:12s} {r['type']}: {ow}trigger -> receive "
                  f"{q(s.trigger_us, 0.5) / pp50:.2f}")
    for c in checks:
        print("cross-check: " + c)
    l1 = os.getloadavg()
    print(f"load average after: {l1[0]:.2f} {l1[1]:.2f} {l1[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
