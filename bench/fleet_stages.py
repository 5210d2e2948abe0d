#!/usr/bin/env python3
"""Where a fleet run's service-time error (end_ns - due_ns) goes (issue 29; prints figures,
asserts nothing).

From the engines' own logs (fleets/*/fleet-log-<loop>.csv, CONTRACTS §3b) of a run directory,
for every sleep-mode service in the test window, each row split in two by the loop's own
stamps (arrival_ns of every request it read, end_ns and response_sent_ns of every service):

- **wake**: due -> the loop's first stamp after due (its own end_ns when nothing else came
  first). The loop did nothing it logs in this span: it was asleep in epoll_wait (timer
  interrupt, wake-up, waiting for the core behind other threads) or preempted;
- **queue**: that first stamp -> end_ns: the loop was running, on other devices' reads and
  services first (queueing on the loop);
- **send**: end_ns -> response_sent_ns (building and sending the response).

Prints, pooled over the fleet: p50/p99/p99.9 of the error and of each part, and for the
services later than 50 µs (the issue's bound) which part was the larger.

    .venv/bin/python bench/fleet_stages.py RUN_DIR [RUN_DIR ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wotbench.rundir import RunDir  # noqa: E402
from wotbench.rundir.layout import FLEET_LOG_GLOB  # noqa: E402

BOUND_NS = 50_000


def test_window(rd: Path) -> tuple[int, int]:
    """The run's test window [start, end) on CLOCK_MONOTONIC ns, from its run.json."""
    test = RunDir(rd).read_run().test
    return test.start_mono_ns, test.start_mono_ns + int(test.duration_s * 1e9)


def fleet_logs(rd: Path) -> list[Path]:
    """Every engine loop's log of the run (fleets/<fleet>/fleet-log-<loop>.csv)."""
    return sorted(RunDir(rd).fleets_dir.glob(f"*/{FLEET_LOG_GLOB}"))


def loop_parts(f: Path, t0: int, t1: int) -> np.ndarray:
    """(error, wake, queue, send) in ns, one row per service of one loop in [t0, t1)."""
    d = pd.read_csv(f, usecols=["arrival_ns", "end_ns", "response_sent_ns", "due_ns"])
    stamps = np.sort(np.concatenate([d[c].dropna().to_numpy(np.int64)
                                     for c in ("arrival_ns", "end_ns", "response_sent_ns")]))
    s = d.dropna(subset=["end_ns", "due_ns"])
    s = s[(s.arrival_ns >= t0) & (s.arrival_ns < t1)]
    due, end = s.due_ns.to_numpy(np.int64), s.end_ns.to_numpy(np.int64)
    sent = s.response_sent_ns.to_numpy(np.float64)
    first = stamps[np.minimum(np.searchsorted(stamps, due, side="right"), len(stamps) - 1)]
    first = np.minimum(first, end)        # nothing logged before its own end: woke for it
    first = np.maximum(first, due)
    return np.column_stack([end - due, first - due, end - first, sent - end])


def report(rd: Path) -> str:
    t0, t1 = test_window(rd)
    parts = [loop_parts(f, t0, t1) for f in fleet_logs(rd)]
    a = np.concatenate(parts) / 1e3
    a = a[a[:, 0] >= 0]
    q = lambda x: "/".join(f"{v:.0f}" for v in np.nanpercentile(x, [50, 99, 99.9]))  # noqa: E731
    late = a[:, 0] > BOUND_NS / 1e3
    wake_led = late & (a[:, 1] >= a[:, 2])
    return (f"{rd.name}: {len(a)} services in {len(parts)} loops; p50/p99/p99.9 µs: error {q(a[:, 0])}, "
            f"wake {q(a[:, 1])}, queue {q(a[:, 2])}, send {q(a[:, 3])}; error > 50 µs: "
            f"{late.mean():.2%} of services, of them {wake_led.sum() / max(late.sum(), 1):.0%} "
            f"mostly wake, {1 - wake_led.sum() / max(late.sum(), 1):.0%} mostly queue")


def main(argv: list[str]) -> int:
    for arg in argv:
        p = Path(arg)
        for rj in ([p / "run.json"] if (p / "run.json").exists() else sorted(p.glob("*/run.json"))):
            print(report(rj.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
