#!/usr/bin/env python3
"""Fleet benchmark (issue 29): configs/fleet-100k.yaml through `wotbench run` on Docker.

Prints the issue's targets as figures, asserts nothing: whether every device the trace names
answered the GE's warm-up, the time from the start of the engines to ready (bound + warm-up),
requests lost inside the testbed over the test at the configured rate, whether the GEs kept to
the trace, what teardown left behind, and the host memory a device costs (the engines' memory
cgroups at their peak: RSS plus the kernel's socket memory charged to them; the engines' own
RSS beside it), with the engines' loop lag and timer lateness, the service-time error pooled
over the fleet, what the core isolation did (``--isolate``) and the load average. Holds the
host lock (testkit/hostlock.py) while it measures.

    .venv/bin/python bench/fleet_bench.py [--set duration_s=30] [--backend docker|process]
        [--isolate [--isolate-except COMM ...]]   # placement.isolate_cores for the run (root)
    .venv/bin/python bench/fleet_bench.py --smoke   # 300 devices, 3 s, no host lock
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runpin import RunCorePin  # noqa: E402  (bench/ is the script's directory)
from scale_bench import Sampler, _leftovers  # noqa: E402
from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, run_lines  # noqa: E402
from wotbench.labels import ROLE_LABEL  # noqa: E402
from wotbench.rundir import RunDir  # noqa: E402
from wotbench.rundir.layout import FLEET_DEVICES_IN, FLEET_LOG_GLOB  # noqa: E402
from wotbench.monitor.recorder import container_cgroup_dirs  # noqa: E402

CONFIG = REPO / "configs" / "fleet-100k.yaml"


class EngineMemory(threading.Thread):
    """Peak memory of every wot-fleet container (1 s period). The containers are listed until
    every engine the runner laid out (a ``fleets/<engine>/devices.csv`` each) is found, then
    only their cgroup files are read: a Docker API call a second would make the daemon work on
    the device core during the test."""

    def __init__(self, out_root: Path) -> None:
        super().__init__(daemon=True)
        self.stop_flag = threading.Event()
        self.out_root = out_root
        self.pinning = RunCorePin(out_root)
        self.peak: dict[str, int] = {}

    def run(self) -> None:
        import docker
        client = docker.from_env()
        known: dict[str, dict[str, Path]] = {}
        settled = False
        while not self.stop_flag.wait(1.0):
            self.pinning.pin()
            if not settled:
                try:
                    found = client.containers.list(filters={"label": f"{ROLE_LABEL}=fleet"})
                except Exception:  # noqa: BLE001 - the daemon is busy; the next sample counts
                    continue
                known = {c.name: container_cgroup_dirs(c.id) for c in found}
                laid_out = sum(len(list(RunDir(d).fleets_dir.glob(f"*/{FLEET_DEVICES_IN}")))
                               for d in self.out_root.iterdir() if d.is_dir())
                settled = laid_out > 0 and len(known) >= laid_out
            for name, dirs in known.items():
                v = _cgroup_memory(dirs)
                if v is not None:
                    self.peak[name] = max(self.peak.get(name, 0), v)


def _cgroup_memory(dirs: dict[str, Path]) -> int | None:
    """A container's memory (its peak where the kernel keeps one): the v1 memory controller's
    max_usage_in_bytes, else v2's memory.peak or memory.current."""
    for ctl, names in (("memory", ("memory.max_usage_in_bytes", "memory.usage_in_bytes")),
                       ("v2", ("memory.peak", "memory.current"))):
        for name in names:
            try:
                return int((dirs[ctl] / name).read_text())
            except (KeyError, OSError, ValueError):
                continue
    return None


def _core_shares(rd: Path) -> dict[int, tuple[float, float]]:
    """core -> (busy share, steal share) over the run's monitor/cores.csv (cumulative /proc/stat
    counters: busy = user + nice + system + irq + softirq; the kernel's network work for a
    datagram counts there even where no thread's CPU time includes it)."""
    import csv
    first: dict[int, list[int]] = {}
    last: dict[int, list[int]] = {}
    try:
        with open(rd / "monitor" / "cores.csv") as f:
            for r in csv.DictReader(f):
                v = [int(r["busy_ns"]), int(r["steal_ns"]), int(r["idle_ns"])]
                first.setdefault(int(r["core"]), v)
                last[int(r["core"])] = v
    except (OSError, KeyError, ValueError):
        return {}
    out = {}
    for c, v in last.items():
        d = [b - a for a, b in zip(first[c], v)]
        tot = sum(d) or 1
        out[c] = (d[0] / tot, d[1] / tot)
    return out


def _quantile_us(loops: list[dict], key: str, q: str) -> float | None:
    vals = [lp[key][q] for lp in loops if lp[key][q] is not None]
    return max(vals) / 1e3 if vals else None


def service_error_us(rd: Path, run: dict) -> dict[str, float] | None:
    """The service-time error (measured - S = end_ns - due_ns) of every sleep-mode service the
    engines logged in the test window, pooled over the fleet: p50/p95/p99/p99.9 and max, µs."""
    import numpy as np
    import pandas as pd
    test = run.get("test") or {}
    if not test:
        return None
    t0 = test["start_mono_ns"]
    t1 = t0 + int(test["duration_s"] * 1e9)
    parts = []
    for f in sorted(rd.glob(f"fleets/*/{FLEET_LOG_GLOB}")):
        d = pd.read_csv(f, usecols=["arrival_ns", "end_ns", "due_ns"]).dropna()
        d = d[(d.arrival_ns >= t0) & (d.arrival_ns < t1)]
        parts.append((d.end_ns - d.due_ns).to_numpy(dtype=np.int64))
    if not parts or not sum(map(len, parts)):
        return None
    err = np.concatenate(parts) / 1e3
    q = np.percentile(err, [50, 95, 99, 99.9])
    return {"n": int(err.size), "p50": q[0], "p95": q[1], "p99": q[2], "p999": q[3],
            "max": float(err.max())}


def measure(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="wotbench-fleet-"))
    cmd = [sys.executable, "-m", "wotbench.cli", "run", str(CONFIG), "--out-root", str(out),
           "--backend", args.backend] + [x for s in args.set for x in ("--set", s)]
    if args.isolate:
        cmd += ["--isolate-cores"]
    if args.isolate_except:
        cmd += ["--set", f"placement.isolate_except={json.dumps(args.isolate_except)}"]
    load0 = os.getloadavg()
    host, engines = Sampler(out), EngineMemory(out)
    host.start()
    if args.backend == "docker":
        engines.start()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    host.stop_flag.set()
    engines.stop_flag.set()
    row = {"rc": proc.returncode, "wall_s": wall, "load_before": load0,
           "load_after": os.getloadavg(), "conntrack_peak": host.peak["conntrack"],
           "host_mem_delta_mib": (host.mem0 - host.min_mem) / 1024, "dir": str(out)}
    runs = sorted(out.glob("*/run.json"))
    if not runs:
        row["error"] = (proc.stdout + proc.stderr)[-1500:]
        return row
    rd = runs[0].parent
    run = json.loads(runs[0].read_text())
    row["error"] = run.get("error")
    fleets = run.get("fleets") or []
    devices = sum(f["devices"] for f in fleets)
    ph = run.get("phases") or {}
    row.update(devices=devices, engines=len(fleets),
               start_s=ph.get("start_devices_s"), listening_s=ph.get("listening_s"),
               warmup_s=ph.get("warmup_s"), stop_s=ph.get("stop_s"),
               teardown_s=ph.get("teardown_s"), failures=len(run.get("failures") or []))
    if ph.get("start_devices_s") is not None:
        row["ready_s"] = sum(ph.get(k) or 0.0 for k in ("start_devices_s", "listening_s",
                                                        "warmup_s"))
    warm = [json.loads(p.read_text()) for p in sorted(rd.glob("ge/ge-*/warmup.json"))]
    row["warm_targets"] = sum(w["endpoints"] for w in warm)
    row["warm_answered"] = sum(w["answered"] for w in warm)
    summaries = [json.loads(p.read_text()) for p in sorted(rd.glob("fleets/*/fleet-summary.json"))]
    loops = [lp for s in summaries for lp in s["loop"]]
    row.update(engine_requests=sum(s["requests"] for s in summaries),
               engine_responses=sum(s["responses"] for s in summaries),
               engine_rss_mib=sum(s["rss_bytes"] for s in summaries) / 2**20,
               read_lag_p99_us=_quantile_us(loops, "read_lag_ns", "p99"),
               timer_late_p99_us=_quantile_us(loops, "timer_late_ns", "p99"),
               timer_late_max_us=_quantile_us(loops, "timer_late_ns", "max"),
               send_errors=sum(lp["send_errors"] for lp in loops),
               engines_cpu_s=sum(lp.get("cpu_ns") or 0 for lp in loops) / 1e9,
               cores=_core_shares(rd))
    if engines.peak:
        row["engine_cgroup_mib"] = sum(engines.peak.values()) / 2**20
        row["kib_per_device"] = sum(engines.peak.values()) / 1024 / max(devices, 1)
    row["service_error_us"] = service_error_us(rd, run)
    row["isolation"] = run.get("isolation")
    sfile = rd / "summary.json"
    if sfile.exists():
        s = json.loads(sfile.read_text())
        integ = (s.get("ge_integrity") or {}).get("per_ge", {})
        row.update(requests=s["overall"].get("requests"),
                   testbed_loss=(s.get("loss") or {}).get("testbed"),
                   ge_kept_up=all(g.get("kept_up") for g in integ.values()) if integ else None,
                   ge_lag={gid: (g.get("late_share"), g.get("late_abs_share"),
                                 *((g.get("lag_ms") or {}).get(q) for q in ("p99", "p999", "max")))
                           for gid, g in sorted(integ.items())},
                   verdict=s["verdict"]["status"])
    row["leftovers"] = _leftovers(run["run_id"]) if args.backend == "docker" else "n/a"
    return row


def _f(v, spec: str = "") -> str:
    return "–" if v is None else (format(v, spec) if spec else str(v))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to wotbench run, e.g. duration_s=30")
    ap.add_argument("--backend", choices=["docker", "process"], default="docker")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ap.add_argument("--isolate", action="store_true",
                    help="wotbench run --isolate-cores (placement.isolate_cores, root): the "
                         "host's work off the device core for the run")
    ap.add_argument("--isolate-except", action="append", default=[], metavar="COMM",
                    help="with --isolate: a command name whose processes stay where they are "
                         "(placement.isolate_except; repeatable)")
    a = ap.parse_args(argv)
    if a.smoke:    # the same path through wotbench run, at a size that takes seconds
        print(SMOKE_BANNER)
        a.set = ["devices[0].count=300", "devices[0].rit.mean=1000", "gateways.count=1",
                 "duration_s=3", "contention_detector.calibration_s=1"] + a.set
    if a.backend == "docker" and subprocess.run(["docker", "info"],
                                                capture_output=True).returncode != 0:
        print("fleet bench skipped: `docker info` fails (no reachable Docker daemon)")
        return 0
    if not a.smoke:
        hostlock.hold()
    print(f"fleet bench: {CONFIG.name} {' '.join(a.set)} on {a.backend} ...", flush=True)
    r = measure(a)
    print("\n".join(run_lines("fleet bench", r)))
    print(f"  devices {_f(r.get('devices'))} in {_f(r.get('engines'))} engines; warm-up: "
          f"{_f(r.get('warm_answered'))} of {_f(r.get('warm_targets'))} targets answered")
    print(f"  ready {_f(r.get('ready_s'), '.1f')} s (start {_f(r.get('start_s'), '.1f')}, bound "
          f"{_f(r.get('listening_s'), '.1f')}, GE warm-up {_f(r.get('warmup_s'), '.1f')})")
    print(f"  requests {_f(r.get('requests'))}, lost in the testbed {_f(r.get('testbed_loss'))}, "
          f"GE kept up {_f(r.get('ge_kept_up'))}, verdict {_f(r.get('verdict'))}, "
          f"failures {_f(r.get('failures'))}")
    for gid, (late, late_abs, p99, p999, mx) in (r.get("ge_lag") or {}).items():
        print(f"  {gid}: sends late (beyond their device's tolerance) {_f(late, '.2%')}, later "
              f"than 1 ms {_f(late_abs, '.2%')}; send lag p99 {_f(p99, '.3f')} ms, p99.9 "
              f"{_f(p999, '.3f')} ms, max {_f(mx, '.1f')} ms")
    print(f"  engines: {_f(r.get('engine_requests'))} requests, {_f(r.get('engine_responses'))} "
          f"responses, send errors {_f(r.get('send_errors'))}, read lag p99 "
          f"{_f(r.get('read_lag_p99_us'), '.0f')} µs, timer lateness p99 "
          f"{_f(r.get('timer_late_p99_us'), '.0f')} µs (max {_f(r.get('timer_late_max_us'), '.0f')})"
          " (worst loop)")
    e = r.get("service_error_us")
    print("  service-time error (end - due) over the fleet, test window: " + (
        f"n {e['n']}, p50 {e['p50']:.1f}, p95 {e['p95']:.1f}, p99 {e['p99']:.1f}, p99.9 "
        f"{e['p999']:.0f}, max {e['max']:.0f} µs" if e else "–"))
    iso = r.get("isolation")
    print("  core isolation: " + (
        f"cores {iso['shielded_cores']} shielded, workqueue cpumask "
        f"{iso['workqueue_cpumask_before']} -> {iso['workqueue_cpumask_during']}, "
        f"{iso['moved']} task(s) of {iso['moved_processes']} process(es) moved "
        f"({', '.join(f'{k} {v}' for k, v in iso['moved_by_command'].items())}), "
        f"{iso['refused']} refused, {iso['per_cpu_kthreads']} per-CPU kthreads, "
        f"{iso['pinned_there']} pinned, {iso['excepted']} excepted left; restored "
        f"{iso['restored']} (+{iso['restored_inherited']} born during the run), "
        f"{iso['left_changed']} re-pinned by others left" if iso else "off"))
    if r.get("cores"):
        print("  cores over the run (monitor/cores.csv): " + "; ".join(
            f"core {c} busy {b:.0%} steal {st:.0%}" for c, (b, st) in sorted(r["cores"].items()))
            + f"; the engines' loop threads' own CPU {r['engines_cpu_s']:.1f} s")
    print(f"  memory: engines' cgroups peak {_f(r.get('engine_cgroup_mib'), '.0f')} MiB = "
          f"{_f(r.get('kib_per_device'), '.1f')} KiB per device; engines' RSS at exit "
          f"{_f(r.get('engine_rss_mib'), '.0f')} MiB; host MemAvailable fell by "
          f"{r['host_mem_delta_mib']:.0f} MiB (everything on the host); conntrack peak "
          f"{r['conntrack_peak']}")
    print(f"  stop {_f(r.get('stop_s'), '.1f')} s, teardown {_f(r.get('teardown_s'), '.1f')} s, "
          f"left behind: {_f(r.get('leftovers'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
