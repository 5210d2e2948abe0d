"""A run whose harness was killed (SIGKILL, OOM, a lost machine): its run.json still says
``in_progress`` (written when the run started, never completed). What the components wrote
when their lease lapsed (wotbench.runner.deployment.lease: the GEs' requests.csv, the device logs) is
analysed, and the verdict is invalid, naming the kill and the last moment measured."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from wotbench.analysis.errors import AnalysisError
from wotbench.rundir import RunDir, RunRecord
from wotbench.runner.deployment.lease import LEASE_FILE, lease_state


def check(rd: RunDir, run: RunRecord) -> None:
    """AnalysisError when an unfinished run cannot be analysed: its harness still runs, or it
    was stopped before the test started (nothing was measured)."""
    if not run.in_progress:
        return
    lease = rd.lease_dir / LEASE_FILE
    if lease_state(lease) == "live":
        age = time.time() - lease.stat().st_mtime
        raise AnalysisError(f"{rd.run_json}: run {run.run_id} is still in progress (its harness "
                            f"renewed its lease {age:.0f} s ago); analyse it when it has ended")
    if run.test is None:
        raise AnalysisError(f"{rd.run_json}: the harness of run {run.run_id} was killed before "
                            "the test started (run.json was never completed): nothing was "
                            "measured")


def reason(run: RunRecord, req: pd.DataFrame, duration_s: float) -> str:
    """The verdict's reason for a killed run (``req``: the GEs' requests, ns from the test
    start)."""
    times = np.concatenate([req[c].to_numpy(np.float64) for c in ("sent", "recv")
                            if c in req.columns] or [np.zeros(0)])
    times = times[np.isfinite(times)]
    last = (f"the last moment measured is {times.max() / 1e9:.1f} s into the "
            f"{duration_s:g} s test" if len(times) else "no request was sent before it")
    return ("the harness was killed during the run (run.json was written at the start and "
            f"never completed: SIGKILL, out of memory or a lost machine); {last}; what the "
            "components wrote when their lease lapsed is analysed")
