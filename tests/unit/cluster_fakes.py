"""A fake run across hosts for the sweep and capacity tests: a fake runner's run dir (its
summary.json stands for the merged one) plus the ``cluster.json`` of a merged run whose cells
n1 and n3 are trustworthy and whose cell on ``bad_node`` has the run's verdict."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

from wotbench.distributed.merge import COLUMNS, CellRecord, MergedRun, request_stats
from wotbench.distributed.verdict import CellVerdict, aggregate
from wotbench.rundir import MergedRunDir
from wotbench.run_result import RunResult

NODES = ("n1", "n2", "n3")


def cluster_json(run_dir: Path, status: str, bad_node: str, why: str) -> MergedRun:
    empty = request_stats(pd.DataFrame(columns=COLUMNS))
    cells = [CellVerdict(node=n, status=status if n == bad_node else "trustworthy",
                         exit_code=3 if n == bad_node and status != "trustworthy" else 0,
                         reasons=[why] if n == bad_node and status != "trustworthy" else [])
             for n in NODES]
    m = MergedRun(cells=[CellRecord(node=c.node, run_dir=f"cells/{c.node}", devices=1,
                                    requests=empty, verdict=c) for c in cells],
                  devices=len(cells), overall=empty, verdict=aggregate(cells))
    MergedRunDir(run_dir).cluster_json.write_text(m.model_dump_json())
    return m


class AsCluster:
    """Wraps a fake runner: each run it makes becomes a merged run across NODES."""

    def __init__(self, runner: Callable, bad_node: str = "n2",
                 why: str = "CD-node R_d rose 3x over its calibration"):
        self.runner, self.bad_node, self.why = runner, bad_node, why

    @property
    def calls(self):
        return self.runner.calls

    def __call__(self, config_path: str, out_root: str, backend=None,
                 on_run_dir=None) -> RunResult:
        result = self.runner(config_path, out_root, backend, on_run_dir)
        cluster_json(result.run_dir, result.summary.verdict.status, self.bad_node, self.why)
        return result
