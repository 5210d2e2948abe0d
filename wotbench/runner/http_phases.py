"""``gateways.http.setup`` / ``verify`` (issue 35, wotbench.config.http_phases): each phase is a
gateway-emulator run of its own on this host, open loop at the phase's rate, to every HTTP
device of the run, into ``RUN/phases/<phase>/`` (trace.csv, body.txt, ge/ with the GE's usual
files). The analysis gives its figures apart from the test's (summary.json ``phases``)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Callable, Iterable

from pydantic import ValidationError

from wotbench.config import http_spec
from wotbench.config.http_phases import HttpPhase
from wotbench.errors import EnvironmentProblem
from wotbench.rundir import GeSummary, RunDir
from wotbench.rundir.layout import GE_SUMMARY
from wotbench.runner.prepare.binaries import GE, ensure_binary
from wotbench.schema_errors import problems as schema_problems
from wotbench.workload.formats import TRACE_HEADER


@dataclass
class PhaseOutcome:
    name: str
    requests: int
    ok: int

    @property
    def failed(self) -> int:
        return self.requests - self.ok


def _trace(phase: HttpPhase, targets: Iterable[tuple[int, str, int]]) -> str:
    rows = []
    for dev, host, port in targets:
        host = f"[{host}]" if ":" in host else host
        uri = f"http://{host}:{port}/{phase.path.lstrip('/')}"
        rows += [(int(k * 1e6 / phase.rate), dev, uri) for k in range(phase.requests)]
    rows.sort()
    return TRACE_HEADER + ",payload_bytes\n" + "".join(
        f"{d},{t},{phase.method},{u},0\n" for t, d, u in rows)


def run(name: str, cfg, targets: list[tuple[int, str, int]], rd: RunDir,
        log: Callable[[str], None] = print) -> PhaseOutcome:
    """Runs phase ``name`` (setup | verify) against ``targets`` (device id, address, port), into
    ``rd.phase_dir(name)``."""
    phase: HttpPhase = getattr(cfg.gateways.http, name)
    rd.phase_dir(name).mkdir(parents=True, exist_ok=True)
    rd.phase_trace(name).write_text(_trace(phase, targets))
    argv = [str(ensure_binary(GE, log)), "--trace", str(rd.phase_trace(name)), "--out",
            str(rd.phase_ge_dir(name)), "--timeout-ms", str(phase.timeout_ms),
            "--label", f"http-{name}"]
    if phase.body_template is not None:
        rd.phase_body(name).write_text(phase.body_template)
        argv += ["--http-body-template", str(rd.phase_body(name))]
    for hdr in cfg.gateways.http.headers:
        argv += ["--http-header", hdr]
    if "{{rand}}" in phase.path + (phase.body_template or "") or http_spec.uses(cfg, "rand"):
        argv += ["--seed", str(cfg.seed)]
    budget = phase.requests / phase.rate + phase.timeout_ms / 1000 + 60
    log(f"gateways.http.{name}: {phase.requests} {phase.method} per device to {len(targets)} "
        f"device(s) at {phase.rate:g}/s")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"gateways.http.{name}: the gateway emulator did not finish "
                                 f"within {budget:.0f} s") from None
    rd.phase_log(name).write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise EnvironmentProblem(f"gateways.http.{name}: the gateway emulator exited with "
                                 f"{p.returncode}: {p.stderr.strip()[-600:]}")
    path = rd.phase_ge_dir(name) / GE_SUMMARY
    try:
        s = GeSummary.model_validate_json(path.read_text())
    except (OSError, ValidationError) as e:
        why = "; ".join(schema_problems(e, GeSummary)) if isinstance(e, ValidationError) else e
        raise EnvironmentProblem(f"gateways.http.{name}: {path}: the gateway emulator's "
                                 f"summary cannot be read ({why})") from None
    return PhaseOutcome(name, s.requests, s.outcomes.ok)
