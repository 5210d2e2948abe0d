#!/usr/bin/env python3
"""Where a fleet run's GE late share comes from (issue 29; prints figures, asserts nothing).

For each GE of a run directory: the sends the integrity rule counts late (lag beyond the
device's tolerance, wotbench.analysis.ge_integrity), split by the tolerance that judged them:
the floor (``min_tolerance_ms``, 20 µs: where 5 % of the RIT is less, or no device of the GE
has a RIT) or 5 % of the RIT (a device with a single request: the GE's typical device's); and
the send lag's quantiles over all sends.

    .venv/bin/python bench/fleet_ge_late.py RUN_DIR [RUN_DIR ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wotbench.analysis.ge_integrity import _rit_arrays  # noqa: E402
from wotbench.rundir import GeIntegrityParams, RunDir  # noqa: E402
from wotbench.rundir.layout import GE_REQUESTS  # noqa: E402


def ge_late(requests_csv: Path, p: GeIntegrityParams) -> str:
    d = pd.read_csv(requests_csv, usecols=["index", "device", "scheduled_ns", "sent_ns"])
    d = d.rename(columns={"scheduled_ns": "sched", "sent_ns": "sent"})
    a = _rit_arrays(d, p)
    lag_us, tol_ms = a["lag_ms"] * 1e3, a["tol_ms"]
    late = a["lag_ms"] > tol_ms
    floor = tol_ms <= p.min_tolerance_ms
    n = len(lag_us)
    q = np.percentile(lag_us, [50, 90, 99, 99.9]) if n else [np.nan] * 4
    return (f"{n} sends, late {late.sum()} ({late.mean():.2%}); of them on the {p.min_tolerance_ms * 1e3:.0f} µs "
            f"floor {(late & floor).sum()} (the floor judges {floor.sum()} sends = {floor.mean():.1%}, "
            f"{(late & floor).sum() / max(floor.sum(), 1):.0%} of them late), on 5 % of the RIT "
            f"{(late & ~floor).sum()}; lag p50 {q[0]:.1f} p90 {q[1]:.1f} p99 {q[2]:.0f} "
            f"p99.9 {q[3]:.0f} µs; > 20 µs {(lag_us > 20).mean():.1%}, > 1 ms {(lag_us > 1000).mean():.2%}")


def main(argv: list[str]) -> int:
    p = GeIntegrityParams()
    for run in argv:
        rd = Path(run)
        rd = next(iter(sorted(rd.glob("*/run.json"))), rd / "run.json").parent
        for f in sorted(RunDir(rd).ges_dir.glob(f"ge-*/{GE_REQUESTS}")):
            print(f"{rd.name} {f.parent.name}: {ge_late(f, p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
