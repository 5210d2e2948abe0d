"""summary.json ``phases``: the figures of ``gateways.http.setup`` / ``verify`` (issue 35) from
their own gateway-emulator runs (``RUN/phases/<name>/ge/``), and the verdict's note when a
verify request was not answered 2xx."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.loading import read_model
from wotbench.rundir import GeSummary, RunDir
from wotbench.rundir.layout import GE_REQUESTS, GE_SUMMARY
from wotbench.rundir.phases import PhaseFigures, PhasesBlock


def figures(ge_dir: Path) -> Optional[PhaseFigures]:
    if not (ge_dir / GE_SUMMARY).exists():
        return None
    s = read_model(ge_dir / GE_SUMMARY, GeSummary,
                   f"summary.json of the {ge_dir.parent.name} phase's GE")
    req = pd.read_csv(ge_dir / GE_REQUESTS, usecols=["sent_ns", "received_ns", "code", "outcome"],
                      dtype={"code": str})
    ok = req[req["outcome"] == "ok"]
    rt = (ok["received_ns"].to_numpy(np.float64) - ok["sent_ns"].to_numpy(np.float64)) / 1e6
    q = np.quantile(rt, [0.5, 0.99]) if len(rt) else [None, None]
    o = s.outcomes
    return PhaseFigures(
        requests=s.requests, ok=o.ok, error=o.error, timeout=o.timeout, reset=o.reset,
        unsent=o.unsent,
        codes={str(k): int(v) for k, v in req["code"].fillna("").value_counts().items()},
        took_s=s.duration_s,
        latency_p50_ms=None if q[0] is None else float(q[0]),
        latency_p99_ms=None if q[1] is None else float(q[1]),
        latency_max_ms=float(rt.max()) if len(rt) else None)


def block(run_dir: Path) -> Optional[PhasesBlock]:
    rd = RunDir(run_dir)
    b = PhasesBlock(setup=figures(rd.phase_ge_dir("setup")),
                    verify=figures(rd.phase_ge_dir("verify")))
    return b if b.setup is not None or b.verify is not None else None


def verify_note(b: Optional[PhasesBlock]) -> Optional[str]:
    v = b.verify if b is not None else None
    if v is None or v.ok == v.requests:
        return None
    codes = ", ".join(f"{k or 'none'}: {n}" for k, n in sorted(v.codes.items()))
    return (f"gateways.http.verify: {v.requests - v.ok} of {v.requests} requests after the test "
            f"were not answered 2xx ({codes}): what the test left is not what it should be")
