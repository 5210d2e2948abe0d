"""Everything the report shows, from a run directory (docs/CONTRACTS.md §4, §6, §7).

``build_context(run_dir)`` reads the three typed documents (summary.json, run.json, plan.json)
through their models, maps them to the page (:mod:`.sections`) and collects the series the
figures draw (:mod:`.data`). Only summary.json is required: without run.json or plan.json the
sections that need them say why they are absent.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from wotbench.errors import WotbenchError
from wotbench.deploy.plan import Plan
from wotbench.rundir import RunDir, RunRecord
from wotbench.stamps import report_stamp

from wotbench.report import fleet as fleetr
from wotbench.report import sections
from wotbench.report.evidence import evidence as evidence_section
from wotbench.report.http import http as http_section
from wotbench.report.push import push as push_section
from wotbench.report.sut import sut
from wotbench.report.data import figure_data
from wotbench.report.slo import slo_table
from wotbench.things.report import things_table


class ReportError(WotbenchError):
    """The run directory cannot be reported on (exit code 2); the message names the file."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message, exit_code)


def _optional(read, path: Path):
    """(model, None) or (None, why it is not available)."""
    if not path.is_file():
        return None, f"{path.name} is missing"
    try:
        return read(), None
    except (OSError, ValueError, ValidationError) as e:
        return None, f"{path.name} cannot be read ({e})"


def _plan(path: Path) -> Plan:
    return Plan.model_validate_json(path.read_text())


def build_context(run_dir: Path | str) -> dict:
    rd = RunDir(run_dir)
    if not rd.path.is_dir():
        raise ReportError(f"{rd.path}: not a run directory (it does not exist)")
    if not rd.summary_json.is_file():
        raise ReportError(f"{rd.summary_json}: summary.json is missing; "
                          f"run `wotbench analyze {rd.path}` first")
    try:
        s = rd.read_summary()
    except (OSError, ValueError, ValidationError) as e:
        raise ReportError(f"{rd.summary_json}: not a summary written by this version of the "
                          f"analysis ({e}); run `wotbench analyze {rd.path}`") from None
    run, run_err = _optional(rd.read_run, rd.run_json)
    plan, plan_err = _optional(lambda: _plan(rd.plan_json), rd.plan_json)
    run = run or RunRecord()
    config_text: Optional[str] = (rd.config_resolved.read_text(errors="replace")
                                  if rd.config_resolved.is_file() else None)

    overall = sections.overall(s)
    duration = overall["duration_s"] or (run.test.duration_s if run.test else None)
    contention = sections.contention(s)
    data, missing = figure_data(rd, s, run)
    return {
        "run_dir": str(rd.path),
        "name": run.name or s.run.name or rd.path.name,
        "run_id": run.run_id or s.run.run_id or rd.path.name,
        "backend": run.backend or s.run.backend or "unknown",
        "duration_s": duration,
        "planned_duration_s": run.test.duration_s if run.test else None,
        "n_devices": len(run.devices) or len(s.run.devices),
        "n_ges": len(run.ges or []) or len(s.run.ges),
        "interrupted": run.interrupted or s.run.interrupted,
        "failures": [f.model_dump() for f in run.failures],
        "run_json_note": run_err,
        "host": sections.host(run),
        "placement": sections.placement(plan, plan_err),
        "verdict": sections.verdict(s, contention),
        "slo": slo_table(s.slo),
        "contention": contention,
        "evidence": evidence_section(s),
        "overall": overall,
        "outcome_rows": sections.outcome_rows(s),
        "per_device": sections.per_device(s) if len(s.per_device) <= fleetr.ROWS_MAX else [],
        "devices_at_scale": (fleetr.devices_at_scale(rd)
                             if len(s.per_device) > fleetr.ROWS_MAX or not s.per_device
                             else None),
        "fleet": fleetr.fleet(s),
        "loss": sections.loss(s),
        "ge": sections.ge(s),
        "load": sections.load(s),
        "notify": s.notify,   # issue 35: the notification sink's figures (or None)
        "phases": s.phases,   # issue 35: gateways.http.setup / verify (or None)
        "sut_faults": s.sut_faults,   # issue 35: scheduled faults in the system under test
        "rd": sections.rd(s),
        "split": sections.split(s),
        "sut": sut(run, s),
        "observe": sections.observe(s),
        "blockwise": sections.blockwise(s),
        "dtls": sections.dtls(s),
        "push": push_section(s),
        "http": http_section(s),
        "things": things_table(rd, [g.dir for g in run.ges or []], duration),
        "cd_enabled": run.cd is not None or s.rd.cd is not None,
        "network": sections.network(run.network),
        "injected": sections.injected(run),
        "config_text": config_text,
        "generated_at": report_stamp(),
        "data": data,
        "missing": missing,
    }
