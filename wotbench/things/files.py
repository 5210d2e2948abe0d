"""The trace directory's ``things/`` files (docs/CONTRACTS.md §8):

- ``things/tds.jsonl``: one line per instance, ``{"device": NAME, "td": {...}}``, the TD the
  instance stands for, addressed to it (:mod:`.instances`): what a directory registration sends
  and what the instance serves at ``/.well-known/wot``;
- ``things/affordances.csv``: ``group,model,first_device,devices,affordance,op,method,path,
  pattern``, one row per group and workload entry: how the report maps a request (device id,
  method, path matching the regular expression ``pattern`` whole) to its Thing Model and
  affordance (:mod:`.report`).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from wotbench.config.schema import Config
from wotbench.rundir import atomic
from wotbench.rundir.layout import THINGS_AFFORDANCES_CSV, THINGS_DIR, THINGS_TDS_JSONL
from wotbench.things.workload import affordance_rows

AFFORDANCE_COLUMNS = ("group", "model", "first_device", "devices", "affordance", "op", "method",
                      "path", "pattern")


def write_thing_files(cfg: Config, out_dir: Path, tds: dict[str, str],
                      extra_rows: list[dict] = ()) -> None:
    """``extra_rows``: more rows of affordances.csv (a directory's, :mod:`.directory`)."""
    d = Path(out_dir) / THINGS_DIR
    d.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(d / THINGS_TDS_JSONL, buffering=1 << 20) as f:
        f.write("".join(f'{{"device":"{name}","td":{text}}}\n' for name, text in tds.items()))
    buf = io.StringIO()
    w = csv.DictWriter(buf, AFFORDANCE_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(affordance_rows(cfg) + list(extra_rows))
    atomic.write_text(d / THINGS_AFFORDANCES_CSV, buf.getvalue())
