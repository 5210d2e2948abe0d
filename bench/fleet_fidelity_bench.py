#!/usr/bin/env python3
"""Process form vs wot-fleet engine on the same workload (issue 29, docs/FLEET.md "Fidelity").

Cells: 100 and 1 000 devices x sleep and busy service x `engine: process` and `engine: fleet`,
each run through `wotbench run` on the same generated config but for `devices[0].engine` (and
`per_container`: pods of 8 for processes at 1 000 devices, as SCALE.md runs them; auto for the
engine). The two forms alternate (process, fleet, process, fleet, ...) within every repeat, so
both see the same host load. Prints, per run: R from the send p50/p95/p99, R - S p99 (the
service-time error, analysis decomposition), testbed loss, the verdict, the device-side read
delay p99 (decomposition `device_in`: kernel arrival to the device's read, for both forms), the
engine's own loop lag p99 (read lag, timer lateness or busy overrun; fleet only) and the load
average; then the median of each figure per cell. Asserts nothing; holds the host lock.

Workloads (both forms): sleep = exponential S mean 5 ms at 1 000 req/s over the group;
busy = exponential S mean 1 ms of CPU at 300 req/s (0.3 core offered); 2 resources per device,
piggy-backed responses, one service thread per device, one GE.

    .venv/bin/python bench/fleet_fidelity_bench.py [--repeats 3] [--duration 20] [--sizes 100,1000]
        [--modes sleep,busy] [--backend docker|process]
    .venv/bin/python bench/fleet_fidelity_bench.py --smoke   # 10 devices, sleep, 3 s, process
                                                             # backend, no lock
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP  # noqa: E402

ENGINES = ("process", "fleet")
# mode -> (service time mean ms, requests/s over the group)
WORKLOADS = {"sleep": (5.0, 1000.0), "busy": (1.0, 300.0)}
PROCESS_POD = 8            # processes per container at 1 000 devices (SCALE.md)


@dataclass
class Cell:
    devices: int
    mode: str

    @property
    def label(self) -> str:
        return f"{self.devices} {self.mode}"


def config(cell: Cell, engine: str, duration_s: float, calibration_s: float) -> dict:
    s_ms, rate = WORKLOADS[cell.mode]
    per = "auto" if engine == "fleet" or cell.devices <= 100 else PROCESS_POD
    if engine == "process" and cell.devices <= 100:
        per = 1                     # one container per device (a pod size keeps auto off)
    return {
        "name": f"fidelity-{cell.devices}-{cell.mode}-{engine}",
        "duration_s": duration_s,
        "devices": [{
            "group": "dev", "count": cell.devices, "engine": engine, "per_container": per,
            "mode": cell.mode, "response": "piggyback", "threads": 1, "resources": 2,
            "service_time": {"dist": "exponential", "mean": s_ms},
            # each device's mean inter-request time (ms) so that the group offers `rate`
            "rit": {"dist": "exponential", "mean": cell.devices * 1000.0 / rate},
        }],
        "gateways": {"count": 1},
        "contention_detector": {"calibration_s": calibration_s},
        "report": {"enabled": False},
    }


def _get(d: dict | None, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _worst(loops: list[dict], key: str) -> float | None:
    vals = [v for lp in loops if (v := _get(lp, key, "p99_us")) is not None]
    return max(vals) if vals else None


def run_one(cell: Cell, engine: str, a, out_root: Path) -> dict:
    cfg = config(cell, engine, a.duration, a.calibration)
    path = out_root / f"{cfg['name']}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = Path(tempfile.mkdtemp(prefix=f"{cfg['name']}-", dir=out_root))
    load0 = os.getloadavg()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wotbench.cli", "run", str(path), "--out-root",
                           str(out), "--backend", a.backend], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)
    row = {"cell": cell.label, "engine": engine, "rc": proc.returncode,
           "wall_s": time.monotonic() - t0, "load0": load0, "load1": os.getloadavg()}
    sums = sorted(out.glob("*/summary.json"))
    if not sums:
        row["error"] = (proc.stdout + proc.stderr).strip()[-600:]
        return row
    s = json.loads(sums[0].read_text())
    rt = _get(s, "overall", "response_time_ms", "from_sent") or {}
    split = _get(s, "decomposition", "overall") or {}
    loops = [lp for e in (_get(s, "fleet", "engines") or []) for lp in e.get("per_loop", [])]
    lag_key = "timer_late" if cell.mode == "sleep" else "busy_over"
    row.update(requests=_get(s, "overall", "requests"),
               r50=rt.get("p50_ms"), r95=rt.get("p95_ms"), r99=rt.get("p99_ms"),
               rms99=_get(split, "r_minus_s", "p99_us"),
               device_in99=_get(split, "device_in", "p99_us"),
               loss=_get(s, "loss", "testbed"), verdict=_get(s, "verdict", "status"),
               read_lag99=_worst(loops, "read_lag"), svc_lag99=_worst(loops, lag_key))
    return row


def _f(v, spec: str = ".2f") -> str:
    return "–" if v is None else format(v, spec) if isinstance(v, float) else str(v)


HEAD = ("| devices mode | form | R p50 / p95 / p99 ms | R−S p99 µs | device_in p99 µs | "
        "engine read lag / service lag p99 µs | testbed loss | verdict | load before → after |")


def print_row(r: dict, rep: int) -> None:
    la = lambda t: "/".join(f"{x:.1f}" for x in t)  # noqa: E731
    if r.get("error") or r.get("r50") is None:
        print(f"| {r['cell']} | {r['engine']} #{rep} | failed (exit {r['rc']}): "
              f"{(r.get('error') or '').splitlines()[-1:] } | | | | | | {la(r['load0'])} |",
              flush=True)
        return
    print(f"| {r['cell']} | {r['engine']} #{rep} | {_f(r['r50'])} / {_f(r['r95'])} / "
          f"{_f(r['r99'])} | {_f(r['rms99'], '.0f')} | {_f(r['device_in99'], '.0f')} | "
          f"{_f(r['read_lag99'], '.0f')} / {_f(r['svc_lag99'], '.0f')} | {_f(r['loss'])} | "
          f"{r['verdict']} | {la(r['load0'])} → {la(r['load1'])} |", flush=True)


def median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def print_medians(rows: list[dict], cells: list[Cell]) -> None:
    print("\nmedians per cell (runs that produced a summary):")
    print("| devices mode | form | runs | R p50 / p95 / p99 ms | R−S p99 µs | device_in p99 µs "
          "| engine lag p99 µs | testbed loss (sum) | verdicts | 1-min load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        for e in ENGINES:
            rs = [r for r in rows if r["cell"] == c.label and r["engine"] == e
                  and r.get("r50") is not None]
            loss = sum(r["loss"] for r in rs if r.get("loss") is not None) if rs else None
            verdicts = ",".join(sorted({r["verdict"] for r in rs if r.get("verdict")})) or "–"
            print(f"| {c.label} | {e} | {len(rs)} | {_f(median(rs, 'r50'))} / "
                  f"{_f(median(rs, 'r95'))} / {_f(median(rs, 'r99'))} | "
                  f"{_f(median(rs, 'rms99'), '.0f')} | {_f(median(rs, 'device_in99'), '.0f')} | "
                  f"{_f(median(rs, 'svc_lag99'), '.0f')} | {_f(loss)} | {verdicts} | "
                  f"{_f(statistics.median([r['load0'][0] for r in rs]) if rs else None)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=20.0, help="test seconds per run")
    ap.add_argument("--calibration", type=float, default=10.0, help="CD calibration seconds")
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--modes", default="sleep,busy")
    ap.add_argument("--backend", choices=["docker", "process"], default="docker")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args(argv)
    if a.smoke:
        print(SMOKE_BANNER)
        a.repeats, a.duration, a.calibration, a.sizes, a.modes = 1, 3.0, 1.0, "10", "sleep"
        a.backend = "process"       # seconds, and no Docker needed
    bad = [m for m in a.modes.split(",") if m not in WORKLOADS]
    if bad or a.repeats < 1:
        ap.error(f"--modes takes {', '.join(WORKLOADS)}; --repeats at least 1")
    cells = [Cell(int(n), m) for n in a.sizes.split(",") for m in a.modes.split(",")]
    if a.backend == "docker" and subprocess.run(["docker", "info"],
                                                capture_output=True).returncode != 0:
        print("fleet fidelity bench skipped: `docker info` fails (no reachable Docker daemon)")
        return 0
    if not a.smoke:
        hostlock.hold(timeout_s=3600)   # the host lock is much sought after
    print(f"fleet fidelity bench, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"{os.cpu_count()} cores, backend {a.backend}, {a.repeats} repeat(s), test "
          f"{a.duration:g} s + calibration {a.calibration:g} s; sleep: S exp 5 ms at 1000 req/s, "
          f"busy: S exp 1 ms CPU at 300 req/s", flush=True)
    print(HEAD)
    print("|---|---|---|---|---|---|---|---|---|")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fleet-fidelity-") as tmp:
        for rep in range(1, a.repeats + 1):
            for c in cells:
                for e in ENGINES:       # interleaved: both forms under the same host load
                    r = run_one(c, e, a, Path(tmp))
                    rows.append(r)
                    print_row(r, rep)
    print_medians(rows, cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
