"""The sweep's results as data: ``results.json`` (schema ``wotbench-sweep-results/1``, model
:class:`SweepResults`), ``points.csv`` (one row per run: every repeat) and ``settings.csv``
(one row per setting: mean, 95 % CI half width, low, high and n of every metric), written
beside report.html from the same rows the report draws."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from wotbench.rundir import atomic
from wotbench.rundir.layout import SweepDir
from wotbench.sweep.aggregate import CONFIDENCE, METRICS, RepeatRow, SettingRow, repeat_rows, settings
from wotbench.sweep.rows import PointRow

SCHEMA = "wotbench-sweep-results/1"


class SweepResults(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(SCHEMA, alias="schema")
    repeats: int
    order: str
    confidence: float
    varied: list[str]
    x_key: Optional[str]          # the key the report's curves run along (None: no numeric key)
    points: list[RepeatRow]
    settings: list[SettingRow]


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def x_key(varied: list[str], rows: list[SettingRow]) -> Optional[str]:
    """The first varied key whose values are numbers and differ between settings."""
    for k in varied:
        vals = [r.overrides.get(k) for r in rows]
        if vals and all(_numeric(v) for v in vals) and len(set(vals)) > 1:
            return k
    return None


def build(rows: list[PointRow], varied: list[str], repeats: int, order: str) -> SweepResults:
    runs = repeat_rows(rows)
    sets = settings(runs, repeats)
    return SweepResults(repeats=repeats, order=order, confidence=CONFIDENCE, varied=varied,
                        x_key=x_key(varied, sets), points=runs, settings=sets)


def _cell(v: Any) -> Any:
    return "" if v is None else v


def write(directory: Path, res: SweepResults) -> None:
    # replaced whole, never half written: a reader (or a resume) sees the old or the new file
    files = SweepDir(directory)
    atomic.write_text(files.results_json, res.model_dump_json(by_alias=True, indent=1) + "\n")
    metrics = [k for k, _, _ in METRICS]
    with atomic.replacing(files.points_csv, newline="") as f:
        w = csv.writer(f)
        w.writerow(["setting", "point", "repeat", *res.varied, "status", "verdict", "run_dir", *metrics])
        for r in res.points:
            w.writerow([r.setting, r.point, r.repeat, *(_cell(r.overrides.get(k)) for k in res.varied),
                        r.status, _cell(r.verdict), _cell(r.run_dir),
                        *(_cell(r.values.get(k)) for k in metrics)])
    with atomic.replacing(files.settings_csv, newline="") as f:
        w = csv.writer(f)
        w.writerow(["setting", *res.varied, "repeats", "done", "flagged", "contention", "verdicts",
                    *(f"{k}_{s}" for k in metrics for s in ("mean", "ci95", "low", "high", "n"))])
        for s in res.settings:
            w.writerow([s.setting, *(_cell(s.overrides.get(k)) for k in res.varied), s.repeats,
                        s.done, len(s.flagged), len(s.contention),
                        ";".join(v or "-" for v in s.verdicts),
                        *(_cell(x) for k in metrics for x in (
                            s.metrics[k].mean, s.metrics[k].half_width, s.metrics[k].low,
                            s.metrics[k].high, s.metrics[k].n))])
