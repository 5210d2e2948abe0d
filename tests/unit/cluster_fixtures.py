"""Synthetic cells of a run across hosts (wotbench.cluster): analysed run directories under
a merged directory's cells/<node>/, with global device ids."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis_fixtures import make_run
from wotbench.analysis import analyze
from wotbench.cluster.merge import cell_dir


def make_cell(merged: Path, node: str, first_id: int, **kw) -> Path:
    """A cell's analysed run directory whose devices have global ids from ``first_id``."""
    d = make_run(cell_dir(merged, node), **kw)
    run = json.loads((d / "run.json").read_text())
    for dev in run["devices"]:
        dev["id"] += first_id
    (d / "run.json").write_text(json.dumps(run))
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv", keep_default_na=False, dtype=str)
    req["device"] = (req["device"].astype(int) + first_id).astype(str)
    req.to_csv(d / "ge" / "ge-0" / "requests.csv", index=False)
    analyze(d)
    return d
