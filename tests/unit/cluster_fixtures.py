"""Synthetic cells of a run across hosts (wotbench.cluster): analysed run directories under
a merged directory's cells/<node>/, with global device ids."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis_fixtures import make_run
from wotbench.analysis import analyze
from wotbench.rundir import MergedRunDir


def make_cell(merged: Path, node: str, first_id: int, global_names: bool = False, **kw) -> Path:
    """A cell's analysed run directory whose devices have global ids from ``first_id``
    (``global_names``: and global names cpu-<id>, as a real split gives)."""
    d = make_run(MergedRunDir(merged).cell_dir(node), **kw)
    run = json.loads((d / "run.json").read_text())
    for dev in reversed(run["devices"]):   # reversed: a new name is never an old one in use
        dev["id"] += first_id
        if global_names:
            new = f"cpu-{dev['id']}"
            (d / "devices" / dev["name"]).rename(d / "devices" / new)
            (d / dev["resources"]).rename(d / "trace" / "resources" / f"{new}.csv")
            dev["name"], dev["resources"] = new, f"trace/resources/{new}.csv"
            ds = d / "devices" / new / "device-summary.json"
            if ds.is_file():
                ds.write_text(json.dumps({**json.loads(ds.read_text()), "name": new}))
    (d / "run.json").write_text(json.dumps(run))
    req = pd.read_csv(d / "ge" / "ge-0" / "requests.csv", keep_default_na=False, dtype=str)
    req["device"] = (req["device"].astype(int) + first_id).astype(str)
    req.to_csv(d / "ge" / "ge-0" / "requests.csv", index=False)
    analyze(d)
    return d
