"""The report's "Host evidence" section: what the kernel saw in each window (the devices' and
GEs' run-queue wait, busy stretch, wake-up delay, other processes on the run's cores), the
rules that fired, the antagonists by name, and the sources this run did not have. Mapped from
``summary.json`` ``evidence`` (rundir/evidence.py); nothing is recomputed here."""
from __future__ import annotations

from typing import Optional

from cd_module.evidence import owner_words
from wotbench.rundir import Summary

RULE_NAMES = {"cd": "CD node R_d", "cpu_wait": "CPU wait", "stretch": "busy stretch",
              "wakeup": "wake-up delay", "queueing": "queueing behind slowed requests",
              "other_run": "another WoTbench run", "send_lag": "device send lag",
              "loop_lag": "engine loop lag"}   # every FlagRule (tests/unit/test_report.py)


LIST_ALL_UP_TO = 50      # devices; above, the table lists the TOP_DEVICES the host added most to
TOP_DEVICES = 10         # (as the report's slowest/fastest lists)


def _most_added(per_device: dict) -> list[dict]:
    """Every device (small runs), or the TOP_DEVICES with the most added per request (a
    fleet of 10^5 devices: summary.json keeps them all)."""
    items = sorted(per_device.items())
    if len(items) > LIST_ALL_UP_TO:
        items = sorted(items, key=lambda kv: -(kv[1].added_ms or 0.0))[:TOP_DEVICES]
    return [{"name": k, **p.model_dump()} for k, p in items]


def host_share(e) -> Optional[dict]:
    """The host's share for the report: the run's grade and amounts, per place and per
    device (None before the host share existed)."""
    hs = e.host_share
    if hs is None:
        return None
    v = e.params.verdict
    rows = lambda d: [{"name": k, **p.model_dump()} for k, p in sorted(d.items())]  # noqa: E731
    return {"grade": hs.grade, "text": hs.tolerance, "share": v.tolerance_share
            if v.tolerance_ms is None else None, "ms": v.tolerance_ms,
            "confidence": v.confidence, "windows_beyond": hs.windows_beyond,
            "windows_judged": hs.windows_judged, "added_ms": hs.added_ms,
            "added_share": hs.added_share, "worst_added_ms": hs.worst_added_ms,
            "worst_share": hs.worst_share, "worst_place": hs.worst_place,
            "worst_window": (f"{e.windows[hs.worst_window].start_s:g}–"
                             f"{e.windows[hs.worst_window].end_s:g} s"
                             if hs.worst_window is not None else None),
            "places": rows(hs.per_place), "devices": _most_added(hs.per_device),
            "devices_total": len(hs.per_device),
            "grades": {"mild": v.mild, "moderate": v.moderate, "severe": v.severe}}


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
                    "pid": a.pid, "who": owner_words(a), "cmdline": a.cmdline,
                    "share": a.share}
                   for w in e.windows for a in w.antagonists]
    return {"available": True, "rows": rows, "antagonists": antagonists,
            "flagged": [{"window": f"{w.start_s:g}–{w.end_s:g} s",
                         "texts": [f.text for f in w.flags]} for w in e.flagged_windows],
            "missing": e.missing, "other_runs": e.other_runs, "host_share": host_share(e),
            "params": e.params.model_dump()}


def shown_by(rules: list[str]) -> Optional[str]:
    return ", ".join(RULE_NAMES.get(r, r) for r in rules) or None
