"""How long the analysis takes for a wot-fleet run of 10^5 devices (issue 29): a synthetic run
directory (tests/unit/fleet_fixtures.py: one engine, two loops, 10 000 req/s for 60 s =
600 000 requests and fleet-log rows), analysed with the host lock held. Prints the figures and
the load average; no pass/fail.

    .venv/bin/python bench/fleet_analysis_bench.py [--devices 100000] [--rate 10000] [--repeats 3]
    .venv/bin/python bench/fleet_analysis_bench.py --smoke   # 1 000 devices, 5 s, no host lock
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from fleet_fixtures import FleetSpec, make_fleet_run  # noqa: E402
from testkit import hostlock  # noqa: E402
try:   # main's make test runs every bench's --smoke (tests/bench/test_bench_smoke.py)
    from testkit.bench import SMOKE_BANNER, SMOKE_HELP  # noqa: E402
except ImportError:   # a tree from before it: the same words
    SMOKE_HELP = "one short step of a tiny shape, without the host lock (figures are not measurements)"
    SMOKE_BANNER = ("SMOKE RUN (--smoke): a tiny shape to prove the bench runs; figures are not "
                    "measurements")
from wotbench.analysis import analyze  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.devices, a.rate, a.duration, a.repeats = 1000, 200.0, 5.0, 1
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        t0 = time.perf_counter()
        root = make_fleet_run(Path(tmp), FleetSpec(n_devices=a.devices, loops=2,
                                                   duration_s=a.duration, rate_total=a.rate))
        print(f"generated {a.devices} devices, {int(a.rate * a.duration)} requests in "
              f"{time.perf_counter() - t0:.1f} s")
        fd = None if a.smoke else hostlock.hold()   # released below (or at exit)
        try:
            for i in range(a.repeats):
                load = os.getloadavg()
                t = time.perf_counter()
                s = analyze(root)
                dt = time.perf_counter() - t
                size = (root / "summary.json").stat().st_size
                series = sum(p.stat().st_size for p in (root / "series").iterdir())
                print(f"run {i + 1}: analyze {dt:.2f} s ({s.rd.join.matched} log rows joined), "
                      f"summary.json {size / 1e3:.0f} kB, series {series / 1e6:.1f} MB, "
                      f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        finally:
            if fd is not None:
                os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
