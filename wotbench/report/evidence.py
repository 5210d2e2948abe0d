"""The report's "Host evidence" section: what the kernel saw in each window (the devices' and
GEs' run-queue wait, busy stretch, wake-up delay, other processes on the run's cores), the
rules that fired, the antagonists by name, and the sources this run did not have. Mapped from
``summary.json`` ``evidence`` (rundir/evidence.py); nothing is recomputed here."""
from __future__ import annotations

from typing import Optional

from wotbench.detector.evidence import owner_words
from wotbench.rundir import Summary

RULE_NAMES = {"cd": "CD node R_d", "cpu_wait": "CPU wait", "stretch": "busy stretch",
              "other_run": "another WoTbench run", "send_lag": "device send lag",
              "loop_lag": "engine loop lag"}


def evidence(s: Summary) -> dict:
    e = s.evidence
    if e is None:
        return {"available": False, "reason": "this summary predates the kernel evidence: run "
                                              f"`wotbench analyze {s.run.run_dir}` again"}
    rows = []
    for w in ([e.calibration] if e.calibration else []) + e.windows:
        label = "calibration" if w.window < 0 else f"{w.start_s:g}–{w.end_s:g} s"
        for pw in w.places:
            rows.append({"window": label, "place": pw.place, "requests": pw.requests,
                         "wait_share": pw.wait_share, "wait_ms": pw.wait_ms_per_request,
                         "wait_of_service": pw.wait_of_service,
                         "stretch_p50": pw.stretch_p50, "stretch_p90": pw.stretch_p90,
                         "wakeup_p95_ms": pw.wakeup_p95_ms, "foreign": pw.foreign_share,
                         "steal": pw.steal_share,
                         "flags": ", ".join(RULE_NAMES[f.rule] for f in w.flags
                                            if f.place == pw.place)})
    antagonists = [{"window": f"{w.start_s:g}–{w.end_s:g} s", "core": a.core, "comm": a.comm,
                    "pid": a.pid, "who": owner_words(a),
                    "share": a.share}
                   for w in e.windows for a in w.antagonists]
    return {"available": True, "rows": rows, "antagonists": antagonists,
            "flagged": [{"window": f"{w.start_s:g}–{w.end_s:g} s",
                         "texts": [f.text for f in w.flags]} for w in e.flagged_windows],
            "missing": e.missing, "other_runs": e.other_runs,
            "params": e.params.model_dump()}


def shown_by(rules: list[str]) -> Optional[str]:
    return ", ".join(RULE_NAMES.get(r, r) for r in rules) or None
