"""The report's SLO table (next to the trust banner): one row per objective of the typed
``summary.json`` ``slo`` block, already formatted; None for a run without objectives."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir import SloBlock, SloObjectiveResult
from wotbench.config.slo_spec import Objective

STATE = {"pass": ("ok", "pass"), "fail": ("bad", "fail"), "no_data": ("unknown", "no data")}
HEADLINE = {"met": ("ok", "SLOs met"), "missed": ("bad", "SLO missed"),
            "no_data": ("unknown", "SLO not shown: no data")}


def _objective(r: SloObjectiveResult) -> Objective:
    return Objective(r.key, r.metric, r.group, r.op, r.limit, r.unit)


def _margin(o: Objective, r: SloObjectiveResult) -> str:
    if r.margin is None:
        return "—"
    sign = "+" if r.margin >= 0 else "−"
    mag = o.fmt(abs(r.margin))
    return f"{sign}{mag}" + (f" ({r.margin_rel:+.0%})" if r.margin_rel is not None else "")


def _windows(o: Objective, r: SloObjectiveResult) -> str:
    if not r.windows_total:
        return "—"
    text = f"{r.windows_fail} of {r.windows_total} missed"
    if r.windows_no_data:
        text += f", {r.windows_no_data} without data"
    w = r.worst_window
    if w is not None:
        text += f"; worst {o.fmt(w.measured)} at {w.start_s:g}–{w.end_s:g} s"
    return text


def _offenders(o: Objective, r: SloObjectiveResult) -> str:
    if r.metric == "throughput":
        return "a total (not per device)"
    if not r.offenders_total:
        return f"none of {r.devices_judged}" if r.devices_judged else "—"
    shown = ", ".join(f"{d.device} ({o.fmt(d.measured)})" for d in r.offenders)
    more = r.offenders_total - len(r.offenders)
    return f"{r.offenders_total} of {r.devices_judged}: {shown}" + (f" … and {more} more" if more > 0 else "")


def slo_table(block: Optional[SloBlock]) -> Optional[dict]:
    if block is None:
        return None
    cls, headline = HEADLINE[block.status]
    rows = []
    for r in block.objectives:
        o = _objective(r)
        scls, state = STATE[r.state]
        rows.append({"objective": r.label, "limit": o.fmt(r.limit), "measured": o.fmt(r.measured),
                     "samples": r.samples, "state": state, "cls": scls, "margin": _margin(o, r),
                     "windows": _windows(o, r), "offenders": _offenders(o, r)})
    return {"status": block.status, "cls": "warn" if block.testbed_caveat and cls == "bad" else cls,
            "headline": headline, "text": block.text, "caveat": block.testbed_caveat,
            "window_s": block.window_s, "rows": rows}
