"""The facts the validation rules need from one run directory, read through the typed
run.json / summary.json models and the analysis's series (``rd_over_time``,
``contention_windows``)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from wotbench.analysis.stats import fnum
from wotbench.rundir import RunDir


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def load_run(run_dir: Path) -> dict[str, Any]:
    """Facts of one run: injected episodes, the CD's answer, the devices' R_d per window."""
    rd = RunDir(run_dir)
    run, s = rd.read_run(), rd.read_summary()
    cont, cd = s.contention, run.cd
    dev_windows = [{"start_s": fnum(r["window_start_s"]), "end_s": fnum(r["window_end_s"]),
                    "p50_rd": fnum(r["p50_rd"]), "count": int(float(r["count"] or 0))}
                   for r in _read_csv(rd.series("rd_over_time")) if r.get("device") == "all"]
    cd_windows = [{"start_s": fnum(r["start_s"]), "end_s": fnum(r["end_s"]),
                   "median_rd": fnum(r["median_rd"]), "shift": fnum(r["shift"]),
                   "p_value": fnum(r["p_value"]), "flagged": r.get("flagged") == "True"}
                  for r in _read_csv(rd.series("contention_windows"))]
    return {
        "run_dir": str(rd.path),
        "episodes": [{"name": e.name, "kind": e.kind, "cores": e.cores,
                      "start_s": e.start_s, "end_s": e.end_s} for e in run.contention],
        "contention": {"status": cont.status, "reason": cont.reason, "onset_s": cont.onset_s,
                       "window_s": cont.params.window_s,
                       "windows_tested": cont.windows_tested,
                       "windows_flagged": cont.windows_flagged,
                       "baseline": cont.baseline.model_dump() if cont.baseline else None,
                       "flagged_windows": [{"start_s": w.start_s, "end_s": w.end_s}
                                           for w in cont.flagged_windows]},
        "cd_windows": cd_windows,
        "dev_windows": dev_windows,
        "rd_devices_p50": s.rd.overall.rd.p50,
        "rd_cd_cal_p50": s.rd.cd.calibration.p50 if s.rd.cd else None,
        "rd_cd_test_p50": s.rd.cd.test.p50 if s.rd.cd else None,
        "cd": {"name": cd.device if cd else "cd-node",
               "service_time_us": cd.service_time_us if cd else None,
               "mode": cd.mode if cd else None, "interval_s": cd.interval_s if cd else None,
               "calibration_s": cd.calibration_s if cd else None},
        "verdict": s.verdict.status,
        "reasons": list(s.verdict.reasons),
        "ge_kept_up": s.ge_integrity.kept_up,
        "devices": s.overall.devices,
        "failures": [f.model_dump() for f in run.failures],
    }
