"""The facts the validation rules need from one run directory, read through the typed
run.json / summary.json models and the analysis's series (``rd_over_time``,
``contention_windows``), plus the antagonist the study started itself
(``study-antagonist.json``, :mod:`wotbench.validation.antagonist`) merged into the ground truth."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional

from wotbench.analysis.stats import fnum
from wotbench.rundir import RunDir
from wotbench.validation.antagonist import AntagonistRecord, SecondRunRecord, read_record

NS = 1e9


def second_run_interval(second_run: Optional[SecondRunRecord],
                        main_test_start_ns: int) -> Optional[tuple[float, float]]:
    """When a second run loaded the host, in s after the main run's test start: from its T0
    (its gateway emulators start: calibration probes, then its test) to its test end. Both runs
    stamp CLOCK_MONOTONIC, so the difference is exact. None when its run.json has no test."""
    test = second_run.test if second_run is not None else None
    if test is None:
        return None
    start_ns = second_run.t0_mono_ns or test.start_mono_ns
    end_ns = test.start_mono_ns + test.duration_s * NS
    return ((start_ns - main_test_start_ns) / NS, (end_ns - main_test_start_ns) / NS)


def antagonist_episode(rec: AntagonistRecord, main_test_start_ns: Optional[int]) -> dict[str, Any]:
    """The ground-truth episode of a ``study-antagonist.json`` record: ``{name, kind, cores,
    start_s, end_s, outer, name_by, process}`` or ``{invalid: why}`` when it gives none."""
    kind = rec.kind
    if not rec.started:
        return {"invalid": f"the {kind} antagonist never started: {rec.why_not}"}
    if main_test_start_ns is None:
        return {"invalid": "run.json has no test start to place the antagonist on"}
    if rec.start_mono_ns is None or rec.end_mono_ns is None:
        return {"invalid": f"the {kind} antagonist's start or end was not recorded"}
    a = (rec.start_mono_ns - main_test_start_ns) / NS
    b = (rec.end_mono_ns - main_test_start_ns) / NS
    ep: dict[str, Any] = {"name": f"study-{kind}", "kind": kind,
                          "cores": [rec.core] if rec.core is not None else [],
                          "start_s": a, "end_s": b, "outer": None, "process": True}
    if kind == "second-run":
        iv = second_run_interval(rec.second_run, main_test_start_ns)
        if iv is None:
            return {"invalid": "the second run's run.json has no T0/test window"}
        # the process's whole life (deploy, teardown: dockerd's work) is the outer bound
        ep.update(start_s=iv[0], end_s=iv[1], outer=[a, b],
                  name_by={"owner_kind": "wotbench", "owner": rec.owner})
    elif kind == "container-hog":
        ep["name_by"] = {"pid": rec.pid, "comm": rec.comm,
                         "owner_kind": "container", "owner": rec.owner}
    else:
        # cmdline: a launcher's workers (the duty loop's) are other pids of the same command
        ep["name_by"] = {"pid": rec.pid, "comm": rec.comm, "cmdline": rec.cmdline}
    return ep


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
    episodes = [{"name": e.name, "kind": e.kind, "cores": e.cores, "start_s": e.start_s,
                 "end_s": e.end_s, "outer": None, "process": True,
                 "name_by": {"owner_kind": "injected"}} for e in run.contention]
    antagonist, invalid = None, None
    rec_path = rd.study_antagonist_json
    if rec_path.is_file():
        try:
            rec = read_record(rec_path)
        except ValueError as e:          # names the file and the key
            invalid = str(e)
        else:
            antagonist = rec.to_json()
            ep = antagonist_episode(rec, run.test.start_mono_ns if run.test else None)
            if "invalid" in ep:
                invalid = ep["invalid"]
            else:
                episodes.append(ep)
    ev = s.evidence
    windows = [{"start_s": w.start_s, "end_s": w.end_s,
                "antagonists": [a.model_dump() for a in w.antagonists],
                "flags": [f.model_dump() for f in w.flags]} for w in (ev.windows if ev else [])]
    return {
        "run_dir": str(rd.path),
        "episodes": episodes,
        "antagonist": antagonist,
        "invalid": invalid,
        "duration_s": run.test.duration_s if run.test else s.overall.duration_s,
        "evidence_windows": windows,
        "cd_status": cont.cd_status,
        "contention": {"status": cont.status, "reason": cont.reason, "onset_s": cont.onset_s,
                       "window_s": cont.params.window_s,
                       "windows_tested": cont.windows_tested,
                       "windows_flagged": cont.windows_flagged,
                       "baseline": cont.baseline.model_dump() if cont.baseline else None,
                       "flagged_windows": [{"start_s": w.start_s, "end_s": w.end_s,
                                            "shown_by": list(w.shown_by),
                                            "evidence": list(w.evidence)}
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
