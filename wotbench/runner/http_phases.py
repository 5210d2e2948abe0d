"""``gateways.http.setup`` / ``verify`` (issue 35, wotbench.config.http_phases): each phase is a
gateway-emulator run of its own on this host, open loop at the phase's rate, to every HTTP
device of the run, into ``RUN/phases/<phase>/`` (trace.csv, body.txt, ge/ with the GE's usual
files). The analysis gives its figures apart from the test's (summary.json ``phases``)."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from wotbench.config import http_spec
from wotbench.config.http_phases import HttpPhase
from wotbench.errors import EnvironmentProblem
from wotbench.runner.prepare.binaries import GE, ensure_binary
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


def run(name: str, cfg, targets: list[tuple[int, str, int]], out: Path,
        log: Callable[[str], None] = print) -> PhaseOutcome:
    """Runs phase ``name`` (setup | verify) against ``targets`` (device id, address, port)."""
    phase: HttpPhase = getattr(cfg.gateways.http, name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace.csv").write_text(_trace(phase, targets))
    argv = [str(ensure_binary(GE, log)), "--trace", str(out / "trace.csv"), "--out",
            str(out / "ge"), "--timeout-ms", str(phase.timeout_ms), "--label", f"http-{name}"]
    if phase.body_template is not None:
        (out / "body.txt").write_text(phase.body_template)
        argv += ["--http-body-template", str(out / "body.txt")]
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
    (out / "ge.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise EnvironmentProblem(f"gateways.http.{name}: the gateway emulator exited with "
                                 f"{p.returncode}: {p.stderr.strip()[-600:]}")
    s = json.loads((out / "ge" / "summary.json").read_text())
    return PhaseOutcome(name, int(s["requests"]), int(s["outcomes"]["ok"]))
