"""The cells' run directories into one run directory, with statistics from the raw data.

Layout of the merged directory::

    cells/<node>/        each cell's own run directory, as its agent returned it
    requests.csv         every request of every finished cell (one row each, see COLUMNS)
    cluster.json         MergedRun: per-cell figures and verdicts, the run's, the clocks

Percentiles are computed from the union of the cells' per-request response times, never by
averaging the cells' percentiles (the p99 of two halves is not the mean of their p99s). A
response time is always the difference of two stamps of one GE, so of one clock; times in
requests.csv are relative to the cell's own test start. A cell that failed, or whose
directory cannot be read, is kept out of the merged figures and named in the verdict; the
other cells' data stays.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel

from wotbench.analysis.loading import OUTCOMES, load_run
from wotbench.analysis.responses import combine_ge
from wotbench.analysis.stats import quantiles_of
from wotbench.distributed.clock import ClockCheck
from wotbench.distributed.verdict import (CellVerdict, ClusterVerdict, aggregate, failed_cell,
                                      from_summary)
from wotbench.errors import WotbenchError
from wotbench.rundir import MergedRunDir, RunDir
from wotbench.rundir.summary import Outcomes, ResponseTimes, RtStats

COLUMNS = ["cell", "ge", "index", "device_id", "device", "method", "path", "sched_ns", "sent_ns",
           "recv_ns", "outcome", "rt_sent_ms", "rt_sched_ms"]


class CellOutcome(BaseModel):
    """How a cell ended, as the coordinator saw it; its directory is ``cells/<node>``."""
    node: str
    finished: bool = True
    why: Optional[str] = None     # when not finished: what happened (node lost, agent failed)


class Requests(BaseModel):
    requests: int
    sent: int
    outcomes: Outcomes
    response_time_ms: ResponseTimes


class CellRecord(BaseModel):
    node: str
    run_dir: str                     # relative to the merged directory
    devices: int
    requests: Optional[Requests]     # None: the cell's data is not in the merged figures
    verdict: CellVerdict


class MergedRun(BaseModel):
    cells: list[CellRecord]
    devices: int
    overall: Requests
    verdict: ClusterVerdict
    clock: Optional[ClockCheck] = None
    notes: list[str] = []


def request_stats(rows: pd.DataFrame) -> Requests:
    """Counts and response-time percentiles of rows in COLUMNS, from the raw values."""
    def col(c: str) -> np.ndarray:
        return rows[c].to_numpy(np.float64) if len(rows) else np.zeros(0)
    outcome = rows["outcome"].astype(str).to_numpy() if len(rows) else np.zeros(0, object)
    counts = {o: int((outcome == o).sum()) for o in OUTCOMES}
    return Requests(requests=len(rows), sent=int(np.count_nonzero(~np.isnan(col("sent_ns")))),
                    outcomes=Outcomes(**counts),
                    response_time_ms=ResponseTimes(
                        from_sent=quantiles_of(RtStats, col("rt_sent_ms")),
                        from_scheduled=quantiles_of(RtStats, col("rt_sched_ms"))))


def _cell_rows(node: str, path: Path) -> tuple[pd.DataFrame, CellVerdict, int]:
    """One finished cell's requests (COLUMNS), its verdict and its device count; raises when
    its run directory cannot be read."""
    run = load_run(path)
    summary = RunDir(path).read_summary()
    req = combine_ge(run.ges, run.test_start_ns)
    names = {int(d.id): n for n, d in run.devices.items() if d.id is not None}
    ids = req["device"].to_numpy(np.int64) if len(req) else np.zeros(0, np.int64)
    rows = pd.DataFrame({
        "cell": node, "ge": req["ge"].astype(str), "index": req["index"], "device_id": ids,
        "device": [names.get(int(i), "") for i in ids], "method": req["method"].astype(str),
        "path": req["path"].astype(str), "sched_ns": req["sched"], "sent_ns": req["sent"],
        "recv_ns": req["recv"], "outcome": req["outcome"].astype(str),
        "rt_sent_ms": req["rt_sent_ms"], "rt_sched_ms": req["rt_sched_ms"]}, columns=COLUMNS)
    return rows, from_summary(node, summary), len(run.devices)


def _check_disjoint(frames: dict[str, pd.DataFrame]) -> None:
    """A device belongs to one cell (wotbench.distributed.split): two cells with the same device
    id mean the cells ran different splits."""
    owner: dict[int, str] = {}
    for node, f in frames.items():
        for i in np.unique(f["device_id"].to_numpy()):
            if int(i) in owner:
                raise WotbenchError(f"device id {int(i)} is in the cells of both {owner[int(i)]} "
                                    f"and {node}: the cells ran different splits; re-run")
            owner[int(i)] = node


def merge(merged: Path, outcomes: Sequence[CellOutcome],
          clock: Optional[ClockCheck] = None) -> MergedRun:
    """Merge the cells under ``merged/cells/`` (see the module docstring); writes
    requests.csv and cluster.json and returns what cluster.json holds."""
    merged = Path(merged)
    frames: dict[str, pd.DataFrame] = {}
    records: list[CellRecord] = []
    for o in outcomes:
        rel = str(MergedRunDir(merged).cell_dir(o.node).relative_to(merged))
        if not o.finished:
            v, devices = failed_cell(o.node, o.why or "it did not finish"), 0
        else:
            try:
                frames[o.node], v, devices = _cell_rows(o.node, MergedRunDir(merged).cell_dir(o.node))
            except (WotbenchError, ValueError, OSError) as e:
                v, devices = failed_cell(o.node, f"its run directory {rel} cannot be read "
                                                 f"({e})"), 0
        stats = request_stats(frames[o.node]) if o.node in frames else None
        records.append(CellRecord(node=o.node, run_dir=rel, devices=devices, requests=stats,
                                  verdict=v))
    _check_disjoint(frames)
    everything = pd.concat(frames.values(), ignore_index=True) if frames else \
        pd.DataFrame(columns=COLUMNS)
    merged.mkdir(parents=True, exist_ok=True)
    everything.to_csv(MergedRunDir(merged).requests_csv, index=False)
    notes = list(clock.flagged) if clock else []
    out = MergedRun(cells=records, devices=sum(r.devices for r in records),
                    overall=request_stats(everything), verdict=aggregate([r.verdict for r in records]),
                    clock=clock, notes=notes)
    MergedRunDir(merged).cluster_json.write_text(out.model_dump_json(indent=2) + "\n")
    return out

