#!/usr/bin/env python3
"""Scale benchmark (issue 10): the scale-200 workload at growing device counts, on Docker.

For each size it runs `wotbench run` on configs/scale-200.yaml with devices[0].count = N and
prints what a performance engineer needs to size a host: how fast devices start, whether any
request was lost inside the testbed, whether the GE kept to the trace, how long stop and teardown
took, what was left behind, and the host resources a device costs (memory, neighbour entries,
conntrack entries, tasks, dockerd file descriptors) sampled every second during the run.

    .venv/bin/python bench/scale_bench.py --sizes 100,300,1000,1100 [--duration 30] [--smoke]

A size whose run fails or does not finish prints its row with the reason; the bench goes on.
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

import yaml

from wotbench.runner.prepare.hostlimits import read_int
from wotbench.runner.backends.docker.scalelimits import dockerd_pid

from testkit.bench import SMOKE_BANNER, SMOKE_HELP
from runpin import RunCorePin  # bench/ is the script's directory

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "configs" / "scale-200.yaml"


def _mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def _neigh_entries() -> int | None:
    # /proc/net/stat/arp_cache: a header, then one hex row per CPU; "entries" (the first column)
    # is the global count -- the neighbour table is shared by every network namespace
    try:
        return int(Path("/proc/net/stat/arp_cache").read_text().splitlines()[1].split()[0], 16)
    except (OSError, ValueError, IndexError):
        return None


def _softnet_drops() -> int:
    """Packets the kernel dropped because a CPU's backlog was full (all CPUs, since boot)."""
    try:
        return sum(int(line.split()[1], 16)
                   for line in Path("/proc/net/softnet_stat").read_text().splitlines())
    except (OSError, ValueError, IndexError):
        return 0


def _open_fds(pid: int | None) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd")) if pid else None
    except OSError:
        return None


class Sampler(threading.Thread):
    """Peaks of host-wide resources while a run is under way (1 s period, stops on demand)."""

    def __init__(self, out_root: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.stop_flag = threading.Event()
        self.pinning = RunCorePin(out_root)   # off the run's device cores once it has a plan
        self.mem0 = _mem_available_kib()
        self.min_mem = self.mem0
        self.peak = {"neigh": 0, "conntrack": 0, "tasks": 0, "dockerd_fds": 0}
        self.dockerd = dockerd_pid()     # looked up once: the daemon outlives the run

    def run(self) -> None:
        while not self.stop_flag.wait(1.0):
            self.pinning.pin()
            self.min_mem = min(self.min_mem, _mem_available_kib())
            tasks = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
            for k, v in (("neigh", _neigh_entries()),
                         ("conntrack", read_int("/proc/sys/net/netfilter/nf_conntrack_count")),
                         ("tasks", tasks), ("dockerd_fds", _open_fds(self.dockerd))):
                if v is not None:
                    self.peak[k] = max(self.peak[k], v)


def _leftovers(run_id: str) -> str:
    def ls(*cmd: str) -> list[str]:
        r = subprocess.run(["docker", *cmd, "--filter", f"label=wotbench.run={run_id}", "-q"],
                           capture_output=True, text=True)
        return r.stdout.split()
    c, n = ls("ps", "-a"), ls("network", "ls")
    return "none" if not (c or n) else f"{len(c)} containers, {len(n)} networks"


def run_size(n: int, duration_s: float, out_root: Path, per_container: str = "auto",
             calibration_s: float | None = None) -> dict:
    cfg = yaml.safe_load(BASE.read_text())
    if calibration_s is not None:
        cfg["contention_detector"]["calibration_s"] = calibration_s
    cfg["name"] = f"scale-{n}"
    cfg["duration_s"] = duration_s
    cfg["devices"][0]["count"] = n
    cfg["devices"][0]["per_container"] = per_container if per_container == "auto" else int(per_container)
    cfg["report"] = {"enabled": False}
    path = out_root / f"scale-{n}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    load0 = os.getloadavg()[0]
    drops0 = _softnet_drops()
    sampler = Sampler()
    sampler.start()
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=out_root))   # one per repetition
    limit = duration_s + 60 + n * 1.0
    try:
        proc = subprocess.run([sys.executable, "-m", "wotbench.cli", "run", str(path),
                               "--out-root", str(root)], cwd=REPO, capture_output=True, text=True,
                              timeout=limit)
    except subprocess.TimeoutExpired as e:   # killed: its leftovers are `wotbench clean`'s
        proc = subprocess.CompletedProcess(e.cmd, f"timeout after {limit:g} s",
                                           e.stdout or "", e.stderr or "")
        proc.stdout = proc.stdout.decode() if isinstance(proc.stdout, bytes) else proc.stdout
        proc.stderr = (proc.stderr.decode() if isinstance(proc.stderr, bytes) else proc.stderr) \
            + f"\nwotbench run did not finish within {limit:g} s"
    wall = time.monotonic() - t0
    sampler.stop_flag.set()
    sampler.join()
    runs = sorted(root.glob("*/run.json"))
    row = {"devices": n, "rc": proc.returncode, "wall_s": wall, "load_before": load0,
           "load_after": os.getloadavg()[0],
           "mem_per_device_mib": (sampler.mem0 - sampler.min_mem) / 1024 / n,
           "backlog_drops": _softnet_drops() - drops0, **sampler.peak}
    if not runs:
        row["error"] = (proc.stdout + proc.stderr)[-800:]
        return row
    run = json.loads(runs[0].read_text())
    if run.get("error"):
        row["error"] = run["error"]
    elif proc.returncode not in (0, 3, 4):   # no verdict: say why (the run's own last words)
        row["error"] = (proc.stdout + proc.stderr)[-800:]
    ph = run.get("phases") or {}
    row.update({k: ph.get(k) for k in ("start_devices_s", "listening_s", "warmup_s", "stop_s",
                                       "teardown_s")})
    # devices (and the CD node) run in this many containers (devices[].per_container)
    row["containers"] = len({d.get("container") or d["name"] for d in run.get("devices", [])})
    if row.get("start_devices_s") is not None:   # started, listening, and warm from the GE
        row["ready_s"] = sum(row.get(k) or 0.0 for k in ("start_devices_s", "listening_s",
                                                         "warmup_s"))
    row["leftovers"] = _leftovers(run["run_id"])
    cost = runs[0].parent / "monitor" / "cost.json"
    if cost.exists():   # the monitor's own CPU: per-component schedstat, host counters, /proc scan
        c = json.loads(cost.read_text())
        row["monitor_core_share"] = c.get("share_of_a_core")
        row["monitor_scan_ms"] = c["process_scan_cpu_ns"] / max(c["samples"], 1) / 1e6
        row["monitor_components_ms"] = c["components_cpu_ns"] / max(c["samples"], 1) / 1e6
    sfile = runs[0].parent / "summary.json"
    if sfile.exists():
        s = json.loads(sfile.read_text())
        loss = s.get("loss") or {}
        ge = (s.get("ge_integrity") or {}).get("per_ge", {}).get("ge-0", {})
        cd = (s.get("ge_integrity") or {}).get("cd_ge") or {}
        row.update({"requests": s["overall"].get("requests"), "testbed_loss": loss.get("testbed"),
                    "ge_kept_up": ge.get("kept_up"), "late_share": ge.get("late_share"),
                    "late_abs_share": ge.get("late_abs_share"),
                    "cd_late_abs_share": cd.get("late_abs_share"),
                    "verdict": s["verdict"]["status"]})
    return row


def _fmt(v, spec: str = "") -> str:
    if v is None:
        return "–"
    return format(v, spec) if spec else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000,1100")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--per-container", default="auto",
                    help="devices[].per_container for every size: auto (default) or a number")
    ap.add_argument("--calibration-s", type=float, default=None,
                    help="contention_detector.calibration_s (default: the config's)")
    ap.add_argument("--out", type=Path, default=None, help="run directories go here (default: a "
                    "new directory under /tmp)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args(argv)
    if a.smoke:
        print(SMOKE_BANNER)
        a.sizes, a.duration, a.calibration_s = "4", 3.0, 1.0
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        print("scale bench skipped: `docker info` fails (no reachable Docker daemon)")
        return 0
    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    out = a.out or Path(tempfile.mkdtemp(prefix="wotbench-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        print(f"scale bench: {n} devices ...", flush=True)
        rows.append(run_size(n, a.duration, out, a.per_container, a.calibration_s))
        r = rows[-1]
        if "error" in r:
            print(f"  run failed (exit {r['rc']}):\n{r['error']}")
    print(f"\nscale bench, {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, "
          f"run dirs under {out}, per_container {a.per_container}")
    head = ("| devices | containers | start (s) | devices/s | ready (s) | warm-up (s) | requests | lost in testbed | GE kept up"
            " (late share) | > 1 ms late (GE / CD-GE) | verdict | stop (s) | teardown (s) | left behind |"
            " host MiB/device | backlog drops | neighbour / conntrack / tasks / dockerd fds (peak) |"
            " monitor CPU: share of a core (per sample: components / process scan, ms) |"
            " load before→after | exit |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        st = r.get("start_devices_s")
        print(f"| {r['devices']} | {_fmt(r.get('containers'))} | {_fmt(st, '.1f')}"
              f" | {_fmt(r['devices'] / st if st else None, '.1f')} | {_fmt(r.get('ready_s'), '.1f')}"
              f" | {_fmt(r.get('warmup_s'), '.1f')} | {_fmt(r.get('requests'))}"
              f" | {_fmt(r.get('testbed_loss'))} | {_fmt(r.get('ge_kept_up'))}"
              f" ({_fmt(r.get('late_share'), '.2%')}) | {_fmt(r.get('late_abs_share'), '.2%')}"
              f" / {_fmt(r.get('cd_late_abs_share'), '.2%')}"
              f" | {_fmt(r.get('verdict'))} | {_fmt(r.get('stop_s'), '.1f')}"
              f" | {_fmt(r.get('teardown_s'), '.1f')} | {_fmt(r.get('leftovers'))}"
              f" | {r['mem_per_device_mib']:.1f} | {r['backlog_drops']} | {r['neigh']} / {r['conntrack']} / {r['tasks']}"
              f" / {r['dockerd_fds']} | {_fmt(r.get('monitor_core_share'), '.2%')}"
              f" ({_fmt(r.get('monitor_components_ms'), '.1f')} / {_fmt(r.get('monitor_scan_ms'), '.1f')})"
              f" | {r['load_before']:.1f}→{r['load_after']:.1f} | {r['rc']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
