#!/usr/bin/env python3
"""What the device core did while a fleet run's late services waited (issue 29; prints figures,
asserts nothing). Reads an ftrace text dump of one core (events sched_switch, sched_wakeup,
irq_handler_entry/exit, softirq_entry/exit; ``trace_clock`` mono, so its stamps are the engines'
CLOCK_MONOTONIC) and the run's fleet logs; prints the core's time by task / irq / softirq over
the trace, and for the services more than 50 and 200 µs late, what held the core between their
due time and their end, then the stretches of the named foreign tasks. Record it as root under
the host lock, e.g. (docs/FLEET.md, "Where the service-time tail comes from"):

    mount -t tracefs nodev /sys/kernel/tracing; cd /sys/kernel/tracing
    echo mono > trace_clock; echo 2 > tracing_cpumask; echo 131072 > buffer_size_kb
    for e in sched/sched_switch sched/sched_wakeup irq/irq_handler_entry irq/irq_handler_exit \\
             irq/softirq_entry irq/softirq_exit; do echo 1 > events/$e/enable; done
    echo 1 > tracing_on; sleep 10; echo 0 > tracing_on; cat trace > /tmp/core1.trace
    (then disable the events, restore buffer_size_kb, tracing_cpumask, trace_clock; umount)

    .venv/bin/python bench/fleet_trace_core.py TRACE RUN_ROOT
"""
import glob
import re
import sys
from collections import defaultdict

import numpy as np
import pandas as pd

from fleet_stages import fleet_logs, test_window   # bench/, beside this script

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s*(.*)$")
if len(sys.argv) != 3:
    sys.exit("usage: fleet_trace_core.py TRACE RUN_ROOT")
trace, root = sys.argv[1], sys.argv[2]
ev = []
for ln in open(trace):
    m = LINE.match(ln)
    if m:
        ev.append((int(float(m.group(4)) * 1e9), m.group(5), m.group(6), m.group(1)))
ev.sort(key=lambda e: e[0])
t_lo, t_hi = ev[0][0], ev[-1][0]
print(f"trace: {len(ev)} events over {(t_hi - t_lo) / 1e9:.2f} s")

# segments: (start, end, what); what = task comm | 'irq:<name>' | 'softirq:<vec>' | 'idle'
segs = []
cur_task = None
stack = []          # nested irq/softirq contexts
last = t_lo


def close(t):
    global last
    if t > last:
        what = stack[-1] if stack else (cur_task or "?")
        segs.append((last, t, what))
    last = t


for t, name, args, comm in ev:
    if cur_task is None:
        cur_task = "idle" if comm == "<idle>" else comm
    close(t)
    if name == "sched_switch":
        m = re.search(r"next_comm=(.+?) next_pid=(\d+)", args)
        nc = m.group(1)
        cur_task = "idle" if nc.startswith("swapper") else nc
    elif name == "irq_handler_entry":
        stack.append("irq:" + re.search(r"name=(\S+)", args).group(1))
    elif name == "softirq_entry":
        stack.append("softirq:" + re.search(r"action=(\w+)", args).group(1))
    elif name in ("irq_handler_exit", "softirq_exit") and stack:
        stack.pop()
starts = np.array([s[0] for s in segs])
ends = np.array([s[1] for s in segs])
whats = [s[2] for s in segs]

totals = defaultdict(int)
for s, e, w in segs:
    totals[w] += e - s
print("core 1 over the trace (ms):", ", ".join(f"{w} {v / 1e6:.1f}" for w, v in
                                                sorted(totals.items(), key=lambda x: -x[1])[:12]))

rd = glob.glob(root + "/*/run.json")[0].rsplit("/", 1)[0]
t0, t1 = test_window(rd)
print(f"test window {t0 / 1e9:.2f} .. {t1 / 1e9:.2f}; trace {t_lo / 1e9:.2f} .. {t_hi / 1e9:.2f}")
d = pd.concat([pd.read_csv(f, usecols=["end_ns", "due_ns"]) for f in fleet_logs(rd)]).dropna()
d = d[(d.due_ns > t_lo) & (d.end_ns < t_hi)]
if not len(d):
    sys.exit("no service of the run lies inside the trace: record the trace during the run's test")
err = (d.end_ns - d.due_ns).to_numpy()
print(f"services in the trace: {len(d)}; error p50 {np.percentile(err, 50) / 1e3:.0f} p99 {np.percentile(err, 99) / 1e3:.0f} µs")


def split(lo, hi):
    out = defaultdict(int)
    i = max(np.searchsorted(ends, lo) - 0, 0)
    while i < len(segs) and starts[i] < hi:
        a, b = max(starts[i], lo), min(ends[i], hi)
        if b > a:
            w = whats[i]
            key = ("engine" if w.startswith("fleet-loop") else w)
            out[key] += b - a
        i += 1
    return out


for bound in (50_000, 200_000):
    late = d[err > bound]
    agg = defaultdict(int)
    for due, end in zip(late.due_ns.to_numpy(), late.end_ns.to_numpy()):
        for k, v in split(int(due), int(end)).items():
            agg[k] += v
    tot = sum(agg.values()) or 1
    print(f"services > {bound / 1e3:.0f} µs late: {len(late)}; core 1 between due and end: " +
          ", ".join(f"{k} {v / tot:.1%}" for k, v in sorted(agg.items(), key=lambda x: -x[1])[:10]))

# stretches of foreign tasks on core 1: merge adjacent segments of the same task (gaps < 20 µs)
for who in ("tokio-rt-worker", "memfd:sealed-91", "softirq:NET_RX"):
    st = [(s, e) for s, e, w in segs if w == who]
    merged = []
    for s, e in st:
        if merged and s - merged[-1][1] < 20_000:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    L = np.array([e - s for s, e in merged]) / 1e3
    if len(L):
        print(f"{who}: {len(L)} stretches, {len(L) / ((t_hi - t_lo) / 1e9):.1f}/s; length p50 {np.percentile(L, 50):.0f} p99 {np.percentile(L, 99):.0f} max {L.max():.0f} µs; > 200 µs: {(L > 200).sum()} ({L[L > 200].sum() / 1e3:.1f} ms)")
