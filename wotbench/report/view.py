"""Everything the run report shows, from a run directory (docs/CONTRACTS.md §4, §6, §7): a
thin view over the typed models.

``build_view(run_dir) -> RunReport`` reads the three typed documents (summary.json, run.json,
plan.json) through their models and keeps them (``summary``, ``run``, ``plan``); the page's
parts are mapped from them (:mod:`.sections` and the section modules: formatted rows, nothing
computed) and the figures' series read into :class:`~wotbench.report.data.FigureData`. Only
summary.json is required: without run.json or plan.json the sections that need them say why
they are absent. The template gets the view's fields by name (:meth:`RunReport.page`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from wotbench.errors import WotbenchError
from wotbench.deploy.plan import Plan
from wotbench.rundir import RunDir, RunRecord, Summary
from wotbench.stamps import report_stamp

from wotbench.report import fleet as fleetr
from wotbench.report import sections
from wotbench.report.evidence import evidence as evidence_section
from wotbench.report.http_section import http as http_section
from wotbench.report.push_section import push as push_section
from wotbench.report.connected_section import connected as connected_section
from wotbench.report.sut import sut
from wotbench.report.data import FigureData, figure_data
from wotbench.report.slo_table import slo_table
from wotbench.report.things_section import things_table


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


@dataclass(frozen=True)
class RunReport:
    """The run report: the typed documents it was made from, and the page's parts."""
    summary: Summary
    run: RunRecord                      # an empty record when run.json is missing
    plan: Optional[Plan]
    data: FigureData                    # the figures' series
    run_dir: str
    name: str
    run_id: str
    backend: str
    duration_s: Optional[float]
    planned_duration_s: Optional[float]
    n_devices: int
    n_ges: int
    interrupted: bool
    failures: list[dict]
    run_json_note: Optional[str]        # why run.json is not there
    config_text: Optional[str]          # config.resolved.yaml
    cd_enabled: bool
    generated_at: str
    # the page's sections, formatted from the models (sections.py and the section modules)
    host: Any
    placement: Any
    verdict: Any
    slo: Any
    contention: Any
    evidence: Any
    overall: Any
    outcome_rows: Any
    per_device: Any
    devices_at_scale: Any
    fleet: Any
    loss: Any
    ge: Any
    load: Any
    notify: Any                         # issue 35: the notification sink's figures (or None)
    phases: Any                         # issue 35: gateways.http.setup / verify (or None)
    sut_faults: Any                     # issue 35: scheduled faults in the system under test
    rd: Any
    split: Any
    sut: Any
    observe: Any
    blockwise: Any
    dtls: Any
    push: Any
    connected: Any                      # issue 30: connected devices and their RPCs
    http: Any
    things: Any
    network: Any
    injected: Any

    def page(self) -> dict[str, Any]:
        """The template's names: every field, and ``missing`` (why each figure is absent)."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "missing": self.data.missing}


def build_view(run_dir: Path | str) -> RunReport:
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
    at_scale = len(s.per_device) > fleetr.ROWS_MAX
    return RunReport(
        summary=s, run=run, plan=plan, data=figure_data(rd, s, run),
        run_dir=str(rd.path),
        name=run.name or s.run.name or rd.path.name,
        run_id=run.run_id or s.run.run_id or rd.path.name,
        backend=run.backend or s.run.backend or "unknown",
        duration_s=duration,
        planned_duration_s=run.test.duration_s if run.test else None,
        n_devices=len(run.devices) or len(s.run.devices),
        n_ges=len(run.ges or []) or len(s.run.ges),
        interrupted=run.interrupted or s.run.interrupted,
        failures=[f.model_dump() for f in run.failures],
        run_json_note=run_err,
        host=sections.host(run),
        placement=sections.placement(plan, plan_err),
        verdict=sections.verdict(s, contention),
        slo=slo_table(s.slo),
        contention=contention,
        evidence=evidence_section(s),
        overall=overall,
        outcome_rows=sections.outcome_rows(s),
        per_device=sections.per_device(s) if not at_scale else [],
        devices_at_scale=(fleetr.devices_at_scale(rd) if at_scale or not s.per_device
                          else None),
        fleet=fleetr.fleet(s),
        loss=sections.loss(s),
        ge=sections.ge(s),
        load=sections.load(s),
        notify=s.notify,
        phases=s.phases,
        sut_faults=s.sut_faults,
        rd=sections.rd(s),
        split=sections.split(s),
        sut=sut(run, s),
        observe=sections.observe(s),
        blockwise=sections.blockwise(s),
        dtls=sections.dtls(s),
        push=push_section(s),
        connected=connected_section(s, rd),
        http=http_section(s),
        things=things_table(rd, [g.dir for g in run.ges or []], duration),
        cd_enabled=run.cd is not None or s.rd.cd is not None,
        network=sections.network(run.network),
        injected=sections.injected(run),
        config_text=config_text,
        generated_at=report_stamp(),
    )
