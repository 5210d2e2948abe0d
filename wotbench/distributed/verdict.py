"""The run's verdict from its cells': a table with one row per cell, and the worst cell's
verdict for the run, naming the host that stopped being faithful.

A cell is a whole WoTbench run on one node, with its own calibration and evidence, so its
verdict (``wotbench.rundir.Verdict``) says whether *that* host distorted its share. The run
is only as faithful as its least faithful host: its status is the most severe cell status
(``wotbench.analysis.summary.SEVERITY``: invalid > testbed_loss > contention > ge_bottleneck
> trustworthy), and a cell that failed or returned nothing is invalid. Exit code as for one
run: 3 when flagged, else 4 when a cell missed an SLO, else 0.
"""
from __future__ import annotations

from typing import Optional, Sequence

from pydantic import BaseModel

from wotbench.analysis.summary import SEVERITY
from wotbench.rundir.summary import Summary, VerdictStatus


class CellVerdict(BaseModel):
    node: str
    status: VerdictStatus
    exit_code: int
    reasons: list[str] = []
    failed: bool = False      # the cell did not finish (node lost, agent failed)


class ClusterVerdict(BaseModel):
    status: VerdictStatus
    exit_code: int
    worst_node: Optional[str]        # the host that stopped being faithful (None: all were)
    unfaithful: list[str]            # every node whose cell was not trustworthy
    reasons: list[str]
    cells: list[CellVerdict]


def from_summary(node: str, summary: Summary) -> CellVerdict:
    v = summary.verdict
    return CellVerdict(node=node, status=v.status, exit_code=v.exit_code, reasons=v.reasons)


def failed_cell(node: str, why: str) -> CellVerdict:
    return CellVerdict(node=node, status="invalid", exit_code=3, failed=True,
                       reasons=[f"the cell on {node} failed: {why}"])


def aggregate(cells: Sequence[CellVerdict]) -> ClusterVerdict:
    """The worst cell's verdict (ties: the first cell in order) with every cell's row."""
    if not cells:
        raise ValueError("no cell verdicts to aggregate")
    worst = max(cells, key=lambda c: (SEVERITY[c.status], c.exit_code == 4,
                                      -cells.index(c)))
    bad = [c for c in cells if c.status != "trustworthy"]
    if worst.status != "trustworthy":
        code = 3
    else:
        code = 4 if any(c.exit_code == 4 for c in cells) else 0
    reasons = [f"{c.node}: {c.status}" + (f": {c.reasons[0]}" if c.reasons else "")
               for c in sorted(bad, key=lambda c: -SEVERITY[c.status])]
    if not reasons:
        reasons = [f"every cell ({len(cells)}) was trustworthy"]
    return ClusterVerdict(status=worst.status, exit_code=code,
                          worst_node=worst.node if bad else None,
                          unfaithful=[c.node for c in bad], reasons=reasons, cells=list(cells))


def unfaithful_host(v: ClusterVerdict) -> Optional[str]:
    """For capacity and sweep answers: the node whose cell stopped being faithful first in
    severity (None when every cell was trustworthy)."""
    return v.worst_node


def table(v: ClusterVerdict) -> str:
    """The per-cell verdict table (Markdown), the run's verdict last."""
    rows = ["| node | verdict | exit | first reason |", "|---|---|---|---|"]
    for c in v.cells:
        first = (c.reasons[0] if c.reasons else "").replace("|", "/")
        rows.append(f"| {c.node} | {c.status}{' (failed)' if c.failed else ''} | {c.exit_code} "
                    f"| {first} |")
    rows.append(f"| **run** | **{v.status}** | **{v.exit_code}** | "
                f"{'worst: ' + v.worst_node if v.worst_node else 'all cells trustworthy'} |")
    return "\n".join(rows)
