"""What the merged report of a run across hosts shows, read from its merged directory
(``wotbench.distributed.merge``): cluster.json, split.json, requests.csv and each cell's own
summary (for its test length) and report.

Throughput and percentiles come from the raw requests of every cell (requests.csv), never
from the cells' own summaries: the same rule as the merge.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.distributed.merge import MergedRun
from wotbench.distributed.split import Split
from wotbench.errors import WotbenchError
from wotbench.report.view import ReportError
from wotbench.rundir import MergedRunDir, RunDir



@dataclass(frozen=True)
class CellRow:
    node: str
    status: str
    failed: bool
    reasons: list[str]
    devices: int
    requests: Optional[int]
    ok: Optional[int]
    p50_ms: Optional[float]
    p95_ms: Optional[float]
    p99_ms: Optional[float]
    duration_s: Optional[float]        # the cell's own test length (its summary)
    throughput_per_s: Optional[float]  # ok answers per second of its test, from the raw rows
    report: Optional[str]              # link to the cell's own report.html, when rendered


@dataclass(frozen=True)
class ClockRow:
    node: str
    before_us: float
    before_err_us: float
    after_us: Optional[float]          # None: not measured after (the cell was lost)
    after_err_us: Optional[float]
    drift_us: Optional[float]
    start_within_us: float             # the cell starts within ± this of T0 (its δ/2)


@dataclass(frozen=True)
class SplitRow:
    node: str
    device_cores: int
    containers: int
    devices: int
    load: float
    load_per_core: float


@dataclass
class ClusterData:
    run_id: str
    merged: MergedRun
    rows: pd.DataFrame                 # requests.csv
    cells: list[CellRow]
    throughput_per_s: Optional[float]  # the cells run together: the sum of their rates
    clocks: list[ClockRow] = field(default_factory=list)
    split: list[SplitRow] = field(default_factory=list)
    spread: Optional[float] = None


def _duration(d: Path) -> Optional[float]:
    try:
        return RunDir(d).read_summary().run.duration_s
    except (WotbenchError, ValueError, OSError):
        return None


def _cell_rows(merged: Path, m: MergedRun, rows: pd.DataFrame) -> list[CellRow]:
    out = []
    for c in m.cells:
        d = MergedRunDir(merged).cell_dir(c.node)
        dur = _duration(d) if c.requests is not None else None
        ok = int(((rows["cell"] == c.node) & (rows["outcome"] == "ok")).sum())
        rt = c.requests.response_time_ms.from_sent if c.requests else None
        out.append(CellRow(
            node=c.node, status=c.verdict.status, failed=c.verdict.failed,
            reasons=c.verdict.reasons, devices=c.devices,
            requests=c.requests.requests if c.requests else None,
            ok=c.requests.outcomes.ok if c.requests else None,
            p50_ms=rt.p50_ms if rt else None, p95_ms=rt.p95_ms if rt else None,
            p99_ms=rt.p99_ms if rt else None, duration_s=dur,
            throughput_per_s=ok / dur if dur else None,
            report=f"{c.run_dir}/{RunDir(d).report_html.name}" if RunDir(d).report_html.is_file()
            else None))
    return out


def _clock_rows(m: MergedRun) -> list[ClockRow]:
    if m.clock is None:
        return []
    return [ClockRow(node=c.node, before_us=c.before.offset_ns / 1e3,
                     before_err_us=c.before.error_ns / 1e3,
                     after_us=c.after.offset_ns / 1e3 if c.after else None,
                     after_err_us=c.after.error_ns / 1e3 if c.after else None,
                     drift_us=c.drift_ns / 1e3 if c.after else None,
                     start_within_us=c.before.error_ns / 1e3) for c in m.clock.cells]


def _split_rows(merged: Path) -> tuple[list[SplitRow], Optional[float]]:
    p = MergedRunDir(merged).split_json
    if not p.is_file():
        return [], None
    sp = Split.model_validate_json(p.read_text())
    return [SplitRow(node=s.node, device_cores=s.device_cores, containers=len(s.containers),
                     devices=len(s.devices), load=s.load, load_per_core=s.load_per_core)
            for s in sp.cells], sp.spread


def load(merged: Path | str) -> ClusterData:
    """Everything the merged report shows; raises ReportError naming what is missing."""
    merged = Path(merged)
    layout = MergedRunDir(merged)
    for f in (layout.cluster_json, layout.requests_csv):
        if not f.is_file():
            raise ReportError(f"{merged}: no {f.name}: not a merged run directory of "
                              "`wotbench run --backend swarm` (docs/CLUSTER.md)")
    m = MergedRun.model_validate_json(layout.cluster_json.read_text())
    rows = pd.read_csv(layout.requests_csv, dtype={"cell": str, "outcome": str})
    cells = _cell_rows(merged, m, rows)
    rates = [c.throughput_per_s for c in cells if c.throughput_per_s is not None]
    split_rows, spread = _split_rows(merged)
    return ClusterData(run_id=merged.name, merged=m, rows=rows, cells=cells,
                       throughput_per_s=float(np.sum(rates)) if rates else None,
                       clocks=_clock_rows(m), split=split_rows, spread=spread)
