#!/usr/bin/env python3
"""wot-fleet engine benchmark (issue 29; not pass/fail: prints figures, asserts nothing).

1. Start-up and memory per size: N devices, each its own loopback address 127.x.y.z:5683 and
   its own UDP socket, in wot-fleet processes (2 loops each) of at most what RLIMIT_NOFILE lets
   one process open (the hard limit cannot be raised without CAP_SYS_RESOURCE; the split is
   printed). Time from start to every DIR/ready, RSS per device (VmRSS of the processes), kernel
   memory per device: the socket-related slab caches (/proc/slabinfo: UDP, sock_inode_cache,
   filp, dentry, eventpoll_epi, eventpoll_pwq) and the whole Slab of /proc/meminfo (noisy: other
   processes allocate too), and UDP buffer memory (/proc/net/sockstat).
2. Service-time error under load at the largest size: the gateway emulator sends --rate req/s
   for --duration-s, spread round-robin over a random permutation of the devices, to a sleep
   resource of --service-us; the engines' logs give end_ns - due_ns (timer lateness), arrival_ns -
   arrival_kernel_ns (read lag) and start_ns - arrival_ns (device queueing); the GE gives its
   outcomes and send lag. With --warmup-ms the GE pings every device first (warmup.json).
3. Observe (--observe N,..; replaces 1 and 2): N devices, each with one observable resource
   (deterministic --observe-period-ms, a --observe-read-us sleep read, --observe-type
   notifications), each observed by the gateway emulator (registrations spread over the first
   second, CANCEL after --duration-s), once in wot-fleet engines and, for sizes up to
   --observe-process-max, once as N wot-device processes (the process form), one after the
   other. Per run: notifications emitted (the devices' logs) and received (the GE's), loss
   (emitted >= 1 s before its CANCEL and never received), the GE's sequence gaps, and
   lateness: emission - scheduled tick (the device's own: timer, queue, read) and GE kernel
   receive - tick (what an observer sees), with the load average.

Holds the host lock (testkit/hostlock.py) while measuring; prints the load average.
usage: .venv/bin/python bench/fleet_engine_bench.py [--sizes 10000,100000] [--load-sizes N,..]
         [--rate 10000]
         [--duration-s 20] [--service-us 5000] [--response auto] [--type con] [--warmup-ms 0]
         [--observe 200,10000 [--observe-period-ms 1000] [--observe-read-us 0]
          [--observe-type con] [--observe-process-max 500]]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from testkit import hostlock  # noqa: E402
from testkit.bench import DEV_BIN, GE_BIN, SMOKE_BANNER, SMOKE_HELP, stop  # noqa: E402
from testkit.fleet import DEVICES_HEADER  # noqa: E402

FLEET_BIN = ROOT / "wot-device" / "build" / "wot-fleet"
SLABS = ("UDP", "sock_inode_cache", "filp", "dentry", "eventpoll_epi", "eventpoll_pwq")
GE_MAX_ENDPOINTS = 60000   # one gateway emulator takes at most 65535 distinct endpoints
FD_MARGIN = 64          # beside the device sockets: epoll, timerfd, eventfd, signalfd, stdio


def host_line(what: str) -> str:
    la = os.getloadavg()
    return (f"{what} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
            f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, {os.cpu_count()} cores, nothing pinned")


def addr(i: int) -> str:
    """Device i's own loopback address (127.10.0.1 onwards, 250 per /24)."""
    return f"127.{10 + i // 62500}.{(i // 250) % 250}.{i % 250 + 1}"


def slab_bytes() -> dict[str, int]:
    out = {}
    for line in Path("/proc/slabinfo").read_text().splitlines()[2:]:
        f = line.split()
        if f[0] in SLABS:
            out[f[0]] = int(f[2]) * int(f[3])     # num_objs * objsize
    return out


def meminfo_kib(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def udp_mem_pages() -> int:
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("UDP:"):
            f = line.split()
            return int(f[f.index("mem") + 1])
    return 0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sched_stats(pid: int) -> dict[str, tuple[int, int, int, int]]:
    """Per thread of pid, by name: (CPU ns, run-queue wait ns, time slices, involuntary context
    switches) from /proc/PID/task/*/schedstat and status; {} once the process is gone."""
    out = {}
    for t in Path(f"/proc/{pid}/task").glob("*"):
        try:
            cpu, wait, slices = (int(x) for x in (t / "schedstat").read_text().split())
            name = (t / "comm").read_text().strip()
            inv = next(int(line.split()[1]) for line in (t / "status").read_text().splitlines()
                       if line.startswith("nonvoluntary_ctxt_switches"))
        except (OSError, ValueError, StopIteration):
            continue
        out[f"{name}/{t.name}"] = (cpu, wait, slices, inv)
    return out


def sched_line(what: str, stats: list[dict[str, tuple[int, int, int, int]]], match: str) -> str:
    """Sum over the threads whose name starts with `match`: CPU, run-queue wait per slice."""
    rows = [v for st in stats for k, v in st.items() if k.startswith(match)]
    if not rows:
        return f"  {what}: no thread named {match}*"
    cpu, wait, slices, inv = (sum(r[i] for r in rows) for i in range(4))
    return (f"  {what} ({len(rows)} threads): CPU {cpu / 1e9:.2f} s, run-queue wait "
            f"{wait / 1e9:.2f} s over {slices} slices = {wait / max(1, slices) / 1e3:.1f} µs per "
            f"wake-up (max thread {max(r[1] for r in rows) / 1e9:.2f} s), involuntary switches "
            f"{inv}")


CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks() -> dict[str, list[int]]:
    """/proc/stat per core: the first 8 fields (USER_HZ ticks)."""
    return {f[0]: [int(x) for x in f[1:9]] for f in
            (line.split() for line in Path("/proc/stat").read_text().splitlines())
            if f[0].startswith("cpu") and f[0] != "cpu"}


def cpu_line(t0: dict[str, list[int]], t1: dict[str, list[int]]) -> str:
    """Each core's time over the run by kind, in % (softirq: the network stack's receive
    and transmit work, which no thread's CPU time includes; steal: the hypervisor's)."""
    parts = []
    for core in sorted(t1):
        d = [b - a for a, b in zip(t0[core], t1[core])]
        tot = max(1, sum(d))
        parts.append(f"{core} " + " ".join(f"{k} {100 * v / tot:.0f}" for k, v in
                                           zip(CPU_FIELDS, d) if k not in ("nice", "iowait")))
    return "  cores (% of the load run): " + "; ".join(parts)


class Engines:
    """N devices in ceil(N / per_process) wot-fleet processes."""

    def __init__(self, tmp: Path, n: int, per_process: int, service_us: int, response: str,
                 loops: int, spin_us: int = 0, cpus: str = ""):
        self.spin_us, self.cpus = spin_us, cpus
        self.dirs, self.procs = [], []
        nproc = -(-n // per_process)
        per_process = -(-n // nproc)                    # equal shares
        loops = max(1, loops // nproc)                  # --loops threads in all, not per process
        res = tmp / "res.csv"
        res.write_text(f"path,service_time_us,mode,payload_bytes\nr0,{service_us},sleep,16\n")
        for k, first in enumerate(range(0, n, per_process)):
            d = tmp / f"engine{k}"
            (d / "out").mkdir(parents=True)
            lines = [DEVICES_HEADER] + [f"{i},d{i},{addr(i)}:5683,{res},1,16,{response},1000"
                                        for i in range(first, min(n, first + per_process))]
            (d / "devices.csv").write_text("\n".join(lines) + "\n")
            self.dirs.append(d)
        self.loops = loops

    def start(self) -> float:
        t0 = time.monotonic()
        for d in self.dirs:
            self.procs.append(subprocess.Popen(
                [str(FLEET_BIN), "--devices", str(d / "devices.csv"), "--log-dir", str(d / "out"),
                 "--loops", str(self.loops), "--name", d.name, "--spin-us", str(self.spin_us)]
                + (["--cpus", self.cpus] if self.cpus else []),
                stderr=open(d / "stderr.txt", "w")))
        pending = list(self.dirs)
        while pending:
            pending = [d for d in pending if not (d / "out" / "ready").exists()]
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("wot-fleet exited: " + " | ".join(
                    (d / "stderr.txt").read_text() for d in self.dirs))
            if time.monotonic() - t0 > 300:
                raise RuntimeError("wot-fleet not ready after 300 s")
            time.sleep(0.01)
        return time.monotonic() - t0

    def rss_kib(self) -> int:
        return sum(rss_kib(p.pid) for p in self.procs)

    def stop(self) -> list[int]:
        for p in self.procs:
            stop(p)
        return [p.returncode for p in self.procs]

    def logs(self):
        for d in self.dirs:
            for path in sorted((d / "out").glob("fleet-log-*.csv")):
                with open(path) as f:
                    yield from csv.DictReader(f)

    def summaries(self) -> list[dict]:
        return [json.loads((d / "out" / "fleet-summary.json").read_text()) for d in self.dirs]


def pcts(v, unit=1e3) -> str:
    v = np.asarray(v, float)
    if not len(v):
        return "no samples"
    q = np.quantile(v, [0.5, 0.99, 0.999]) / unit
    return f"p50 {q[0]:8.1f}  p99 {q[1]:8.1f}  p99.9 {q[2]:8.1f}  max {v.max() / unit:9.1f} µs"


def startup(tmp: Path, n: int, per_process: int, args) -> None:
    e = Engines(tmp, n, per_process, args.service_us, args.response, args.loops)
    slab0, total0, udp0 = slab_bytes(), meminfo_kib("Slab"), udp_mem_pages()
    try:
        ready_s = e.start()
        time.sleep(0.5)
        slab1, total1, udp1 = slab_bytes(), meminfo_kib("Slab"), udp_mem_pages()
        rss = e.rss_kib()
    finally:
        rcs = e.stop()
    named = sum(slab1.values()) - sum(slab0.values())
    per = {k: (slab1.get(k, 0) - slab0.get(k, 0)) / n for k in SLABS}
    print(f"{n:>7} devices in {len(e.dirs)} process(es) x {args.loops} loops: ready after "
          f"{ready_s:6.2f} s; RSS {rss / 1024:7.1f} MiB = {rss * 1024 / n:6.0f} B/device; "
          f"socket slabs {named / n:6.0f} B/device ("
          + ", ".join(f"{k} {v:.0f}" for k, v in per.items()) + "); "
          f"all Slab {(total1 - total0) * 1024 / n:6.0f} B/device; UDP buffers "
          f"{(udp1 - udp0) * 4096 / n:4.0f} B/device; exit codes {sorted(set(rcs))}", flush=True)


def load_run(tmp: Path, n: int, per_process: int, args) -> None:
    e = Engines(tmp, n, per_process, args.service_us, args.response, args.loops, args.spin_us,
                args.engine_cpus)
    count = int(args.rate * args.duration_s)
    order = list(range(n))
    random.Random(1).shuffle(order)
    gap = 1e6 / args.rate
    # one GE takes at most 65535 endpoints: the devices are split over ceil(n / 60000) GEs,
    # each sending its share of the schedule from the same start instant
    n_ge = -(-n // GE_MAX_ENDPOINTS)
    traces = [open(tmp / f"trace{g}.csv", "w") for g in range(n_ge)]
    for f in traces:
        f.write("device_id,send_time_us,method,uri\n")
    for k in range(count):
        i = order[k % n]
        traces[i % n_ge].write(f"{i},{int(k * gap)},GET,coap://{addr(i)}:5683/r0\n")
    for f in traces:
        f.close()
    try:
        ready_s = e.start()
        start_at = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + (args.warmup_ms + 1000) * 1_000_000
        ges = []
        for g in range(n_ge):
            (tmp / f"ge{g}").mkdir()
            cmd = [str(GE_BIN), "--trace", str(tmp / f"trace{g}.csv"), "--out",
                   str(tmp / f"ge{g}"), "--type", args.type, "--timeout-ms", "5000",
                   "--start-at", str(start_at)]
            if args.warmup_ms:
                cmd += ["--warmup-ms", str(args.warmup_ms)]
            cmd += args.ge_args.split()
            pin = ({int(c) for c in args.ge_cpus.split(",")} if args.ge_cpus else None)
            ges.append(subprocess.Popen(
                cmd, stderr=open(tmp / f"ge{g}.err", "w"),
                preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None))
        t0 = time.monotonic()
        ticks0 = cpu_ticks()
        ge_sched: dict[int, dict] = {}
        deadline = t0 + args.duration_s + args.warmup_ms / 1e3 + 120
        while any(p.poll() is None for p in ges) and time.monotonic() < deadline:
            for p in ges:       # the GE's last figures before it exits
                ge_sched[p.pid] = sched_stats(p.pid) or ge_sched.get(p.pid, {})
            time.sleep(0.2)
        for p in ges:
            p.wait(timeout=10)
        ge_s = time.monotonic() - t0
        ticks1 = cpu_ticks()
        eng_sched = [sched_stats(p.pid) for p in e.procs]
        load = os.getloadavg()
    finally:
        rcs = e.stop()
    ge_rcs = [p.returncode for p in ges]
    sge = []
    for g in range(n_ge):
        try:
            sge.append(json.loads((tmp / f"ge{g}" / "summary.json").read_text()))
        except FileNotFoundError:
            print(f"  GE {g} wrote no summary: {(tmp / f'ge{g}.err').read_text().strip()[-400:]}")
    late, lag, queue = [], [], []
    for r in e.logs():
        if r["start_ns"]:
            late.append(int(r["end_ns"]) - int(r["due_ns"]))
            queue.append(int(r["start_ns"]) - int(r["arrival_ns"]))
        if r["arrival_kernel_ns"]:
            lag.append(int(r["arrival_ns"]) - int(r["arrival_kernel_ns"]))
    sums = e.summaries()
    print(f"load: {n} devices ({len(e.dirs)} process(es) x {args.loops} loops, ready "
          f"{ready_s:.1f} s), GE {args.rate} req/s x {args.duration_s} s {args.type.upper()}, "
          f"sleep {args.service_us} µs, response {args.response}, spin {args.spin_us} µs; {n_ge} GE(s) exit {ge_rcs} after "
          f"{ge_s:.1f} s; engines exit {sorted(set(rcs))}; load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for g, s in enumerate(sge):
        if s.get("warmup"):
            print(f"  GE {g} warm-up: {s['warmup']}")
        print(f"  GE {g} outcomes {s['outcomes']}, achieved {s['achieved_rate']:.0f} req/s, send "
              f"lag (µs) {s['send_lag_us']}")
    print(f"  engine rows {len(late)} served of "
          f"{sum(x['requests'] for x in sums)} requests; 5.03 {sum(x['overload_503'] for x in sums)}"
          f", pool_503 {sum(lp['pool_503'] for x in sums for lp in x['loop'])}, rtx_sent "
          f"{sum(lp['rtx_sent'] for x in sums for lp in x['loop'])}, duplicates "
          f"{sum(lp['duplicates'] for x in sums for lp in x['loop'])}")
    busy = [lp["busy_ns"] / 1e9 for x in sums for lp in x["loop"]]
    cpu = sum(lp["cpu_ns"] for x in sums for lp in x["loop"])
    print(f"  loop CPU per request {cpu / max(1, sum(x['requests'] for x in sums)) / 1e3:.1f} µs")
    print(f"  loops: busy (outside epoll_wait) {[round(b, 2) for b in busy]} s, CPU "
          f"{[round(lp['cpu_ns'] / 1e9, 2) for x in sums for lp in x['loop']]} s, wake-ups "
          f"{[lp['wakeups'] for x in sums for lp in x['loop']]}")
    print(cpu_line(ticks0, ticks1))
    print(sched_line("engine loops", eng_sched, "fleet-loop"))
    print(sched_line("GE threads", list(ge_sched.values()), ""))
    print(f"  timer lateness end-due : {pcts(late)}")
    print(f"  read lag arrival-kernel: {pcts(lag)}")
    print(f"  device queueing start-arrival: {pcts(queue)}", flush=True)


OBS_HEADER = ("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
              "notify_jitter_us,notify_service_us,notify_type,max_age_s\n")


class Processes:
    """N wot-device processes (the process form), each on its own loopback address."""

    def __init__(self, tmp: Path, n: int, res: Path):
        self.dirs = [tmp / f"dev{i}" for i in range(n)]
        self.res, self.procs = res, []

    def start(self) -> float:
        t0 = time.monotonic()
        for i, d in enumerate(self.dirs):
            d.mkdir(parents=True)
            self.procs.append(subprocess.Popen(
                [str(DEV_BIN), "--resources", str(self.res), "--log-dir", str(d), "--listen",
                 f"{addr(i)}:5683", "--name", f"d{i}"], stderr=open(d / "stderr.txt", "w")))
        while not all((d / "ready").exists() for d in self.dirs):
            if any(p.poll() is not None for p in self.procs) or time.monotonic() - t0 > 120:
                raise RuntimeError("wot-device did not start")
            time.sleep(0.02)
        return time.monotonic() - t0

    def stop(self) -> list[int]:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            stop(p)
        return [p.returncode for p in self.procs]

    def notify_rows(self):
        for i, d in enumerate(self.dirs):
            with open(d / "notify-log.csv") as f:
                for r in csv.DictReader(f):
                    yield r


def engine_notify_rows(e: Engines):
    for d in e.dirs:
        for path in sorted((d / "out").glob("fleet-notify-*.csv")):
            with open(path) as f:
                yield from csv.DictReader(f)


def observe_run(tmp: Path, n: int, form: str, per_process: int, args) -> None:
    """One Observe run (module docstring, part 3)."""
    period_us = int(args.observe_period_ms * 1000)
    res = tmp / "obs.csv"
    res.write_text(OBS_HEADER + f"o,0,sleep,16,deterministic,{period_us},0,{args.observe_read_us},"
                   f"{args.observe_type},60\n")
    if form == "engine":
        e = Engines(tmp, n, per_process, 0, "piggyback", args.loops)
        for d in e.dirs:   # every device gets the observable resource
            text = (d / "devices.csv").read_text().replace(str(tmp / "res.csv"), str(res))
            (d / "devices.csv").write_text(text)
    else:
        e = Processes(tmp, n, res)
    n_ge = -(-n // GE_MAX_ENDPOINTS)
    rnd = random.Random(2)
    traces = [open(tmp / f"trace{g}.csv", "w") for g in range(n_ge)]
    for f in traces:
        f.write("device_id,send_time_us,method,uri\n")
    end_us = int(args.duration_s * 1e6)
    rows = sorted((rnd.randrange(1_000_000), i) for i in range(n))   # the trace is in time order
    for t, i in rows:
        traces[i % n_ge].write(f"{i},{t},OBSERVE,coap://{addr(i)}:5683/o\n")
    for i in range(n):
        traces[i % n_ge].write(f"{i},{end_us},CANCEL,coap://{addr(i)}:5683/o\n")
    for f in traces:
        f.close()
    load0 = os.getloadavg()
    try:
        ready_s = e.start()
        start_at = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 1_000_000_000
        expect = int(n * args.duration_s * 1000 / args.observe_period_ms * 1.5) + 1000
        ges = []
        for g in range(n_ge):
            (tmp / f"ge{g}").mkdir()
            ges.append(subprocess.Popen(
                [str(GE_BIN), "--trace", str(tmp / f"trace{g}.csv"), "--out", str(tmp / f"ge{g}"),
                 "--type", "con", "--timeout-ms", "5000", "--start-at", str(start_at),
                 "--max-notifications", str(expect)], stderr=open(tmp / f"ge{g}.err", "w")))
        for p in ges:
            p.wait(timeout=args.duration_s + 120)
        time.sleep(0.5)
        load1 = os.getloadavg()
    finally:
        rcs = e.stop()
    emitted: dict[tuple[str, int], tuple[int, int]] = {}
    for r in (engine_notify_rows(e) if form == "engine" else e.notify_rows()):
        if r["kind"] == "notify":
            emitted[(r["token"], int(r["seq"]))] = (int(r["emit_ns"]), int(r["tick_ns"]))
    received, gaps, cancel_at, by_dev = set(), 0, {}, {}
    own, seen = [], []
    for g in range(n_ge):
        out = tmp / f"ge{g}"
        if not (out / "summary.json").is_file():
            print(f"observe {form}: GE {g} wrote no summary: "
                  f"{(tmp / f'ge{g}.err').read_text().strip()[-400:]}", flush=True)
            return
        summ = json.loads((out / "summary.json").read_text())
        obs = json.loads((out / "observe.json").read_text())
        gaps += obs["gaps"]
        salt, start = int(summ["token_salt"], 16), summ["start_mono_ns"]
        tok = {}
        with open(out / "requests.csv") as f:
            for r in csv.DictReader(f):
                if r["method"] == "OBSERVE":
                    tok[int(r["index"])] = f"{salt >> 32:08x}{(salt & 0xFFFFFFFF) ^ int(r['index']):08x}"
                elif r["method"] == "CANCEL" and r["sent_ns"]:
                    cancel_at[int(r["device"])] = int(r["sent_ns"]) + start
        with open(out / "requests.csv") as f:
            for r in csv.DictReader(f):
                if r["method"] == "OBSERVE":
                    by_dev[tok[int(r["index"])]] = int(r["device"])
        with open(out / "notifications.csv") as f:
            for r in csv.DictReader(f):
                key = (tok[int(r["observation"])], int(r["seq"]))
                received.add(key)
                if key in emitted:
                    emit, tick = emitted[key]
                    recv = int(r["received_kernel_ns"] or r["received_ns"]) + start
                    own.append(emit - tick)
                    seen.append(recv - tick)
    lost = sum(1 for (t, q), (emit, _) in emitted.items() if (t, q) not in received and
               emit + 1_000_000_000 < cancel_at.get(by_dev.get(t, -1), 0))
    exp_n = n * (args.duration_s - 0.5) * 1000 / args.observe_period_ms   # registered at ~0.5 s
    print(f"observe {form:7s}: {n} devices ({'%d engine(s) x %d loops' % (len(e.dirs), args.loops) if form == 'engine' else 'one wot-device each'}, ready {ready_s:.1f} s), "
          f"{args.observe_type.upper()} every {args.observe_period_ms:g} ms for {args.duration_s:g} s, "
          f"read {args.observe_read_us} µs; load {load0[0]:.2f} -> {load1[0]:.2f} (1 min); "
          f"exit codes GE {[p.returncode for p in ges]}, devices {sorted(set(rcs))}", flush=True)
    print(f"  notifications: ~{exp_n:.0f} due, {len(emitted)} emitted, {len(received)} received, "
          f"lost {lost} ({lost / max(1, len(emitted)) * 100:.3f} %), GE sequence gaps {gaps}")
    print(f"  lateness emit - tick        : {pcts(own)}")
    print(f"  lateness GE receive - tick  : {pcts(seen)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--load-sizes", default="",
                    help="sizes of the load runs (default: the largest of --sizes)")
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--duration-s", type=float, default=20)
    ap.add_argument("--service-us", type=int, default=5000)
    ap.add_argument("--response", default="auto", choices=("auto", "piggyback", "separate"))
    ap.add_argument("--type", default="con", choices=("con", "non"))
    ap.add_argument("--loops", type=int, default=2)
    ap.add_argument("--warmup-ms", type=int, default=0)
    ap.add_argument("--spin-us", default="0", help="wot-fleet --spin-us, a list: one load run each")
    ap.add_argument("--engine-cpus", default="", help="wot-fleet --cpus (pin the loops)")
    ap.add_argument("--ge-cpus", default="", help="pin the GEs to these cpus, e.g. 0")
    ap.add_argument("--ge-args", default="", help="extra gateway-emulator options")
    ap.add_argument("--no-startup", action="store_true", help="only the load run(s)")
    ap.add_argument("--no-load", action="store_true", help="only the start-up/memory part")
    ap.add_argument("--observe", default="", help="Observe runs instead (part 3): sizes N,..")
    ap.add_argument("--observe-period-ms", type=float, default=1000)
    ap.add_argument("--observe-read-us", type=int, default=0)
    ap.add_argument("--observe-type", default="con", choices=("con", "non"))
    ap.add_argument("--observe-process-max", type=int, default=500,
                    help="sizes up to this also run as wot-device processes")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER, flush=True)
        args.sizes, args.load_sizes, args.rate, args.duration_s = "300", "300", 300, 1.0
        if args.observe:
            args.observe, args.duration_s = "20", 2.0
    for d in ("wot-device", "gateway-emulator"):
        subprocess.run(["make", "-s", "-C", str(ROOT / d)], check=True,
                       stderr=subprocess.DEVNULL)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_process = hard - FD_MARGIN
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"RLIMIT_NOFILE soft {soft} hard {hard}: at most {per_process} devices per wot-fleet "
          f"process here (one UDP socket per device)")
    if not args.smoke:
        hostlock.hold()
    print(host_line("fleet_engine_bench"), flush=True)
    if args.observe:
        for n in [int(x) for x in args.observe.split(",")]:
            for form in ("engine", "process") if n <= args.observe_process_max else ("engine",):
                with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
                    observe_run(Path(tmp), n, form, per_process, args)
        print(host_line("done"))
        return
    for n in ([] if args.no_startup else sizes):
        with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
            startup(Path(tmp), n, per_process, args)
    spins = [int(x) for x in args.spin_us.split(",")]
    for n in ([] if args.no_load else
              [int(x) for x in args.load_sizes.split(",")] if args.load_sizes else [max(sizes)]):
        for spin in spins:
            args.spin_us = spin
            with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
                load_run(Path(tmp), n, per_process, args)
    print(host_line("done"))


if __name__ == "__main__":
    main()
