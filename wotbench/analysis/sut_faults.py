"""summary.json ``sut_faults`` (issue 35): per fault of ``RUN/sut-faults.json`` (the harness's
record, wotbench.runner.sut_faults), the faulty device's requests sent in ``window_s`` before it, while it
lasted (a pause; a restart: until the server answered again; a kill or a CPU-quota change:
``window_s`` after it) and ``window_s`` after a pause or restart ended —
throughput (ok answers that arrived in the window, per second), failures and R from the
scheduled send p50/p99 of the requests scheduled in it — and one verdict note each."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir import RunDir
from wotbench.analysis.loading import read_model
from wotbench.rundir.sut_faults import FaultFigures, FaultsFile, FaultWindow


def _window(req: pd.DataFrame, start_s: float, end_s: float) -> FaultWindow:
    """The requests scheduled in [start, end) (a request that waited for a busy connection
    has no send instant yet: the schedule places it), with R from the scheduled send."""
    t = req["sched"].to_numpy(np.float64) / 1e9
    m = (t >= start_s) & (t < end_s)
    out = req["outcome"].to_numpy()[m]
    rt = req["rt_sched_ms"].to_numpy(np.float64)[m][out == "ok"]
    rt = rt[~np.isnan(rt)]
    q = np.quantile(rt, [0.5, 0.99]) if len(rt) else (None, None)
    ok = int((out == "ok").sum())
    recv = req["recv"].to_numpy(np.float64) / 1e9   # throughput: answers that arrived in it
    answered = int(((req["outcome"].to_numpy() == "ok") & (recv >= start_s) & (recv < end_s)).sum())
    return FaultWindow(start_s=start_s, end_s=end_s, sent=int(m.sum()), ok=ok,
                       failed=int(m.sum()) - ok,
                       throughput_rps=answered / max(end_s - start_s, 1e-9),
                       p50_ms=None if q[0] is None else float(q[0]),
                       p99_ms=None if q[1] is None else float(q[1]))


def analyse(run_dir: Path, req: pd.DataFrame, ids: dict[str, int]
            ) -> Optional[list[FaultFigures]]:
    """``ids``: device name -> its trace id (the windows hold the faulty device's requests)."""
    f = RunDir(run_dir).sut_faults_json
    if not f.exists():
        return None
    out = []
    dev = req["device"].to_numpy()
    for r in read_model(f, FaultsFile, "the SUT faults' record").faults:
        mine = req[dev == ids.get(r.device, -1)]
        s = {k: (ns / 1e9 if ns is not None else None) for k, ns in
             (("applied", r.applied_ns), ("resumed", r.resumed_ns), ("stopped", r.stopped_ns))}
        at = s["applied"] if s["applied"] is not None else r.at_s
        ends = r.action in ("pause", "restart")   # a kill or a quota change lasts
        end = s["resumed"] if s["resumed"] is not None else at + (r.for_s or r.window_s)
        w = r.window_s
        out.append(FaultFigures(
            device=r.device, action=r.action, at_s=r.at_s, applied_s=s["applied"],
            resumed_s=s["resumed"], stopped_s=s["stopped"], cpus=r.cpus,
            throttled_periods=r.throttled_periods,
            downtime_s=(s["resumed"] - s["applied"]) if r.action == "restart"
            and s["resumed"] is not None and s["applied"] is not None else None,
            error=r.error, before=_window(mine, max(at - w, 0.0), at),
            during=_window(mine, at, end),
            after=_window(mine, end, end + w) if ends else None))
    return out


def notes(faults: Optional[list[FaultFigures]]) -> list[str]:
    out = []
    for f in faults or []:
        what = f"{f.action} {f.device}" + (f" to {f.cpus:g} cpus" if f.cpus is not None else "")
        if f.applied_s is None:
            out.append(f"sut fault {what} at {f.at_s:g} s was not applied: {f.error}")
            continue
        seq = [f.before, f.during] + ([f.after] if f.after is not None else [])
        lasted = {"restart": f"while it was down ({f.downtime_s:.2f} s until it answered "
                             "again)" if f.downtime_s is not None else
                             f"after it (it did not answer again: {f.error})",
                  "cpu_quota": f"in the {f.during.end_s - f.during.start_s:g} s after it"
                  }.get(f.action, "while it lasted")
        out.append(f"sut fault {what} at {f.applied_s:.2f} s: throughput "
                   + " → ".join(f"{w.throughput_rps:.0f}" for w in seq)
                   + " req/s (before → during" + (" → after" if f.after else "") + "), "
                   + (f"p50 {f.before.p50_ms:.2f} → {f.during.p50_ms:.2f} ms, "
                      if f.action == "cpu_quota" and f.before.p50_ms is not None
                      and f.during.p50_ms is not None else "")
                   + f"{f.during.failed} requests failed {lasted}")
    return out
