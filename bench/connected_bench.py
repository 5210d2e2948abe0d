#!/usr/bin/env python3
"""Connected devices benchmark (issue 30; not pass/fail: prints figures, asserts nothing).

Against Debian's nginx + nchan on loopback (configs/attached-devices-nchan.conf):
1. Attach and hold: --devices WebSocket devices in wot-fleet engines (one conn loop each; at
   most --per-engine connections per process: the hard RLIMIT_NOFILE of this host is the
   limit, printed), each device on one of 16 loopback source addresses (a source address
   and the server's address:port give ~28 000 ephemeral ports). Time until every device
   attached, host memory per attached device (MemAvailable before the start and with all
   attached: engines, nginx workers and the kernel's sockets together; and the processes' RSS
   apart), then held for --hold-s: connections lost, by cause, counted by the engines.
2. RPC round trip, inside the hold: --apps applications (wot-rpcapp, closed loop, think
   uniform --think-ms, the study's 1-3 s: 1 000 RPC/s from 2 000 applications) POST an RPC to a
   random device through nchan, the device replies after --service-us with --reply-bytes, the
   reply comes back on the application process's WebSocket subscriptions. Latency from the
   application's send; the testbed's share per RPC = the engine's own delay (timer lateness
   end - due, plus building and writing the reply sent - end) out of the round trip, from the
   device log joined by id. The rest is nchan, the kernel and the application's read.

Then where the RPCs' time went, span by span (server in, service, engine, server out), and how
the slowest 1 % split between them and over the seconds; `--spans RUN_DIR` prints only that
for a `wotbench run` of a connected config (the open-loop table of docs/CONNECTED.md).

Holds the host lock (testkit/hostlock.py) while measuring; prints the load average before and
after. usage: .venv/bin/python bench/connected_bench.py [--devices 100000] [--hold-s 300]
  [--apps 2000] [--rpc-s 60] [--per-engine 19000] [--smoke] | --spans RUN_DIR
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from testkit import hostlock  # noqa: E402
from wotbench.configfile.yaml_loader import load_config  # noqa: E402
from wotbench.connected.spans import SPANS, spans  # noqa: E402
from wotbench.rundir import MergedRunDir, RunDir  # noqa: E402
from wotbench.rundir.layout import CONN_LOG_GLOB, RPC_LOG  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, na  # noqa: E402
from testkit.connected import (NCHAN_TEMPLATE, ConnFleet, ConnSpec, NchanServer,  # noqa: E402
                               build, missing_prerequisite, run_rpcapp)

SOURCES = tuple(f"127.0.{1 + k // 250}.{1 + k % 250}" for k in range(16))
SHARDS = 16


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def rss(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def print_spans(sp: dict[str, np.ndarray]) -> None:
    """Percentiles of every span, then what the slowest 1 % of round trips spent where and
    how they bunch in time (a tail spread over the run vs a few bad seconds)."""
    rtt = sp["round_trip"]
    if not len(rtt):
        print("spans: no answered RPC joined with its device")
        return
    print(f"where the time goes ({len(rtt)} answered RPCs; ms): span p50 / p99 / p99.9 / max")
    for k in SPANS:
        q = np.quantile(sp[k], [0.5, 0.99, 0.999]) / 1e6
        print(f"  {k:11} {q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f} / {sp[k].max() / 1e6:.3f}")
    top = rtt >= np.quantile(rtt, 0.99)
    total = rtt[top].sum()
    parts = ", ".join(f"{k} {sp[k][top].sum() / total * 100:.1f} %"
                      for k in ("server_in", "service", "engine", "server_out"))
    print(f"  slowest 1 % ({int(top.sum())} RPCs, >= {np.quantile(rtt, 0.99) / 1e6:.2f} ms, mean "
          f"{rtt[top].mean() / 1e6:.2f} ms): {parts}")
    secs, n = np.unique((sp["t_ns"][top] - sp["t_ns"].min()) // 1e9, return_counts=True)
    worst = np.argsort(n)[::-1][:3]
    print(f"  they fall in {len(secs)} of {int(np.ptp(sp['t_ns']) // 1e9) + 1} seconds; the "
          f"busiest: " + ", ".join(f"s {int(secs[i])} ({n[i]})" for i in worst)
          + f" = {n[worst].sum() / top.sum() * 100:.0f} % of them")


def run_spans(run_dir: Path) -> int:
    """--spans RUN_DIR: the breakdown of a `wotbench run` of a connected config (its RPCs
    after the warm-up); measures nothing."""
    rd = RunDir(run_dir)
    if MergedRunDir(run_dir).cells_dir.is_dir():   # each cell's engines log on its own clock
        print(f"{run_dir}: a run across hosts: its cells' logs are on their own clocks; "
              "give one cell's run directory")
        return 2
    logs = sorted(run_dir.rglob(CONN_LOG_GLOB))
    if not logs or not (rd.apps_dir / RPC_LOG).is_file():
        print(f"{run_dir}: no apps/{RPC_LOG} or {CONN_LOG_GLOB} (not a connected run?)")
        return 2
    apps = load_config(rd.config_resolved).applications
    warm = rd.read_summary().run.test_start_mono_ns + int((apps.warmup_s if apps else 0) * 1e9)
    print_spans(spans(rd.apps_dir / RPC_LOG, logs, warm))
    return 0


def replied_timeouts(app_dir: Path, fleets: list[ConnFleet]) -> int:
    """RPCs the application timed out although their device sent the reply (the relay's)."""
    sent = {r["id"] for f in fleets for r in f.log_rows() if r["outcome"] == "sent"}
    with (app_dir / "rpc-log.csv").open() as fp:
        return sum(1 for r in csv.DictReader(fp) if r["outcome"] == "timeout" and r["id"] in sent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=100000)
    ap.add_argument("--hold-s", type=int, default=300)
    ap.add_argument("--apps", type=int, default=2000)
    ap.add_argument("--rpc-s", type=int, default=60)
    ap.add_argument("--think-ms", default="1000:3000")
    ap.add_argument("--service-us", type=int, default=1000)
    ap.add_argument("--reply-bytes", type=int, default=256)
    ap.add_argument("--per-engine", type=int, default=0,
                    help="connections per engine (0: the hard RLIMIT_NOFILE minus a margin)")
    ap.add_argument("--nginx-workers", type=int, default=0, help="0: enough for the connections")
    ap.add_argument("--attach-rate", type=int, default=5000)
    ap.add_argument("--nchan-buffer", type=int, default=0,
                    help="nchan_message_buffer_length instead of the template's (0: keep)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ap.add_argument("--spans", type=Path, metavar="RUN_DIR",
                    help="only print where the time of a connected run's RPCs went (no run)")
    a = ap.parse_args()
    if a.spans:
        return run_spans(a.spans)
    if a.smoke:
        a.devices, a.hold_s, a.apps, a.rpc_s, a.think_ms = 300, 4, 50, 3, "50:150"
        print(SMOKE_BANNER)
    why = missing_prerequisite()
    if why:
        print(f"connected bench: {na(why)}")
        return 0
    fleet_bin = build("wot-device", "wot-fleet-conn")
    app_bin = build("rpc-app", "wot-rpcapp")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per = a.per_engine or max(100, hard - 64)
    engines = -(-a.devices // per)
    conns = a.devices + a.apps + SHARDS
    workers = a.nginx_workers or max(1, -(-conns // max(100, hard - 1000)))
    tmin, tmax = (int(x) for x in a.think_ms.split(":"))
    lock = None if a.smoke else hostlock.hold()
    tmp = Path(tempfile.mkdtemp(prefix="wb-connected-bench-"))
    print(f"host: {os.cpu_count()} cores, RLIMIT_NOFILE hard {hard}: {engines} engine(s) of <= "
          f"{per} connections, nginx+nchan {workers} worker(s) (each <= {hard} descriptors)")
    print(f"load average before: {loadavg()}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    fleets: list[ConnFleet] = []
    template = NCHAN_TEMPLATE
    if a.nchan_buffer:
        template = tmp / NCHAN_TEMPLATE.name
        template.write_text(NCHAN_TEMPLATE.read_text().replace(
            "nchan_message_buffer_length 8;", f"nchan_message_buffer_length {a.nchan_buffer};"))
        print(f"nchan_message_buffer_length {a.nchan_buffer}")
    srv = NchanServer(workers=workers, worker_connections=max(1024, hard - 1000),
                      template=template)
    try:
        srv.start()
        m0 = mem_available()
        t0 = time.monotonic()
        for e in range(engines):
            first, n = e * per, min(per, a.devices - e * per)
            spec = ConnSpec(n, "websocket", first, SHARDS, heartbeat_ms=60000,
                            service_us=a.service_us, reply_bytes=a.reply_bytes,
                            reconnect_ms=1000, sources=SOURCES)
            fleets.append(ConnFleet(fleet_bin, tmp, srv.server, [spec], "--attach-rate",
                                    str(a.attach_rate // engines or 1), name=f"engine{e}")
                          .start(wait=False))
        deadline = time.monotonic() + 60 + a.devices / max(1, a.attach_rate) * 2
        while time.monotonic() < deadline and not all((f.out / "attached").exists() for f in fleets):
            if any(f.proc.poll() is not None for f in fleets):
                break
            time.sleep(0.1)
        attached = all((f.out / "attached").exists() for f in fleets)
        t_att = time.monotonic() - t0
        time.sleep(1.0)
        m1 = mem_available()
        eng_rss = rss([f.proc.pid for f in fleets if f.proc])
        srv_rss = rss(srv.pids())
        print(f"attach: {'every device attached' if attached else na('not every device attached')}"
              f" after {t_att:.1f} s ({a.devices} devices, {a.attach_rate}/s staggered)")
        per_dev = (m0 - m1) / a.devices
        parts = (f"engines RSS {eng_rss / 2**20:.0f} MiB = {eng_rss / a.devices:.0f} B/device, "
                 f"nginx RSS {srv_rss / 2**20:.0f} MiB = {srv_rss / a.devices:.0f} B/device")
        if m0 > m1:
            print(f"host memory per attached device: {per_dev / 1024:.1f} KiB (MemAvailable -"
                  f"{(m0 - m1) / 2**20:.0f} MiB: {parts}, the rest kernel sockets and buffers)")
        else:   # the host freed more than the fleet took (a small fleet): RSS is a lower bound
            print(f"host memory per attached device: ≥ {(eng_rss + srv_rss) / a.devices / 1024:.1f}"
                  f" KiB ({parts}; MemAvailable rose by {(m1 - m0) / 2**20:.0f} MiB: the host's "
                  "other processes freed more than the fleet took, so its drop cannot be read)")
        t_hold = time.monotonic()
        app = None
        if attached:
            app = run_rpcapp(app_bin, tmp / "app", srv.server, (0, a.devices), apps=a.apps,
                             shards=SHARDS, duration_s=a.rpc_s, think_ms=(tmin, tmax),
                             timeout_ms=5000, warmup_s=min(5, a.rpc_s - 1), cpu=0,
                             source="127.0.0.250")
        rest = a.hold_s - (time.monotonic() - t_hold)
        if rest > 0:
            time.sleep(rest)
        held = time.monotonic() - t_hold
        sums = [f.stop() for f in fleets]
        srv_ok = srv.proc is not None and srv.proc.poll() is None
    finally:
        for f in fleets:
            if f.proc:
                f.stop()
        srv.stop()
        try:                                      # nchan's own account of what it dropped
            server_said = srv.stderr().splitlines()
        except OSError:
            server_said = []
        srv.__exit__()
    disc = {k: sum(s["disconnects"][k] for s in sums) for k in sums[0]["disconnects"]}
    cf = {k: sum(s["connect_failures"][k] for s in sums) for k in sums[0]["connect_failures"]}
    at_exit = sum(s["attached_at_exit"] for s in sums)
    print(f"held {held:.0f} s: attached at the end {at_exit} of {a.devices}; disconnects "
          f"{disc}; connect failures {cf}; nginx {'still running' if srv_ok else 'ENDED'}")
    print(f"  testbed-attributed connection losses: {disc['testbed'] + cf['testbed']}")
    if app:
        sp = spans(tmp / "app" / RPC_LOG,
                   [f for fl in fleets for f in sorted(fl.out.glob(CONN_LOG_GLOB))])
        rtt, mine = sp["round_trip"], sp["engine"]
        secs = a.rpc_s - min(5, a.rpc_s - 1)
        print(f"RPCs: {app['apps']} applications, {app['rpcs']} scheduled, {app['sent']} sent; "
              f"per second after the warm-up: offered {app['offered_per_s']:.0f}, sent "
              f"{app['sent_per_s']:.0f}, answered {app['answered_per_s']:.0f}; "
              f"ok {app['ok']}, timeout {app['timeout']}, lost {app['lost']}, rejected "
              f"{app['rejected']}, published to no subscriber (202) {app['post_202']}")
        print(f"  timeouts whose device sent the reply: {replied_timeouts(tmp / 'app', fleets)}; "
              f"replies after their timeout: {app['late_replies']}, unmatched {app['unmatched']}")
        lat = app["latency_ns"] or {}
        if lat:
            print(f"  round trip (app send -> reply) p50 {lat['p50'] / 1e6:.2f} ms, p90 "
                  f"{lat['p90'] / 1e6:.2f}, p99 {lat['p99'] / 1e6:.2f}, max {lat['max'] / 1e6:.2f}"
                  f" (service {a.service_us / 1000:g} ms inside)")
        if len(rtt):
            share = mine / rtt
            print(f"  testbed share (engine timer lateness + reply write, of the round trip): "
                  f"p50 {np.median(share) * 100:.1f} %, p99 {np.quantile(share, 0.99) * 100:.1f} %;"
                  f" engine part p50 {np.median(mine) / 1e3:.0f} µs, p99 "
                  f"{np.quantile(mine, 0.99) / 1e3:.0f} µs")
        print(f"  app send lag p99 {(app['send_lag_ns'] or {}).get('p99', 0) / 1e6:.2f} ms; "
              f"app traffic out {app['bytes_out'] / secs / 1024:.0f} kB/s, in "
              f"{app['bytes_in'] / secs / 1024:.0f} kB/s")
        print_spans(sp)
        b_in = sum(s["bytes_in"] for s in sums)
        b_out = sum(s["bytes_out"] for s in sums)
        msgs = sum(s["msgs_in"] for s in sums)
        print(f"  devices: {msgs} messages in, {sum(s['replies'] for s in sums)} replies; bytes "
              f"in {b_in / 2**20:.1f} MiB, out {b_out / 2**20:.1f} MiB over the hold")
    cpu = sum(sum(l["cpu_ns"] for l in s["loop"]) for s in sums) / 1e9
    print(f"engines' loop CPU {cpu:.1f} s over {held:.0f} s; timer lateness p99 (worst engine) "
          f"{max((l['timer_late_ns']['p99'] or 0) for s in sums for l in s['loop']) / 1e3:.0f} µs")
    kinds: dict[str, int] = {}
    for line in server_said:   # "DATE TIME [warn] PID#TID: *CONN message": by level + message
        m = re.search(r"\[(\w+)\] \d+#\d+: (?:\*\d+ )?(.*)", line)
        key = re.sub(r"\d+", "N", f"[{m.group(1)}] {m.group(2)}" if m else line)[:100]
        kinds[key] = kinds.get(key, 0) + 1
    print(f"nginx/nchan stderr (error_log warn): {len(server_said)} line(s)"
          + "".join(f"\n  {n} x {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:6]))
    print(f"load average after: {loadavg()}")
    if lock is not None:
        os.close(lock)
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
