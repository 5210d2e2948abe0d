"""Everything a run needs before anything is deployed: the backend kind, the host checks,
the binaries, the run directory and its input files (resolved config, plan.json, trace/).

The pre-flight (``wotbench.runner.preflight``) chooses the backend and runs the host checks before
anything exists; ``Runner.prepare`` then makes the run directory and writes the inputs, so that
a failure after the run directory exists still leaves a run.json there.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from wotbench.things.trace import write_trace
from wotbench.workload.generate import TraceSummary
from wotbench.config.schema import Config
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.deploy.plan import Plan
from wotbench.deploy.resolve import dump_resolved
from wotbench.rundir import RunDir
from wotbench.runner.commands import doctor
from wotbench.runner.backends.interface import BackendKind, Log
from wotbench.runner.backends.docker.backend import DockerKind
from wotbench.labels import NOBODY
from wotbench.runner.backends.process.backend import ProcessKind
from wotbench.stamps import dir_stamp

KINDS: dict[str, BackendKind] = {"docker": DockerKind(), "process": ProcessKind()}
AUTO = ("docker", "process")    # backend: auto takes the first whose runtime answers
# doctor findings that do not stop a run but are recorded with it
RECORDED_WARNINGS = ("free cores", "leftovers", "collectl")


def select_kind(requested: str, log: Log) -> tuple[BackendKind, bool, Optional[Any]]:
    """(backend kind, chosen explicitly, its connection: ``kind.connect()``, made once here
    and shared by the whole run).

    ``auto`` takes the first kind of AUTO whose runtime answers. An explicit kind whose
    runtime does not answer gets connection None: the host checks then say what is wrong."""
    if requested == "auto":
        away = []
        for name in AUTO:
            kind = KINDS[name]
            try:
                connection = kind.connect()
            except Exception:  # noqa: BLE001 - any failure to connect means: not here
                away.append(kind.runtime)
                continue
            if away:
                log(f"{' and '.join(away)} not reachable: using the {kind.name} backend")
            return kind, False, connection
        raise EnvironmentProblem(f"backend: auto: none of {', '.join(AUTO)} is reachable")
    if requested not in KINDS:
        raise ConfigError(f"backend: unknown backend {requested!r} (docker | process | auto)")
    kind = KINDS[requested]
    try:
        connection = kind.connect()
    except Exception:  # noqa: BLE001 - the doctor check below says what is wrong
        connection = None
    return kind, True, connection


def check_host(kind: BackendKind, connection: Optional[Any], log: Log) -> list[str]:
    """The doctor's quick checks (with the run's connection): raise on a failure, return the
    warnings worth recording."""
    checks = doctor.run_checks(docker=kind.needs_docker, quick=True, client=connection)
    bad = [c for c in checks if c.status == doctor.FAIL]
    if bad:
        raise EnvironmentProblem("prerequisites missing:\n" + "\n".join(
            f"  {c.name}: {c.detail}" + (f"\n    fix: {c.fix}" if c.fix else "") for c in bad))
    warnings = []
    for c in checks:
        if c.status == doctor.WARN and c.name in RECORDED_WARNINGS:
            warnings.append(f"{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
            log(f"warning: {warnings[-1]}")
    return warnings


def writable_dir(path: Path) -> Path:
    """A directory the unprivileged (uid 65534) programs can write into."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    else:
        path.chmod(0o777)
    return path


def make_run_dir(out_root: Path, name: str) -> RunDir:
    """``<out_root>/<name>-<UTC>/`` (``-2``, ``-3`` ... when two runs start in one second)."""
    out_root.mkdir(parents=True, exist_ok=True)
    base = f"{name}-{dir_stamp()}"
    run_dir, k = out_root / base, 1
    while True:
        try:
            run_dir.mkdir()
            return RunDir(run_dir.resolve())
        except FileExistsError:
            k += 1
            run_dir = out_root / f"{base}-{k}"


def write_inputs(rd: RunDir, resolved: Config, plan: Plan, log: Log,
                 only: Optional[set[int]] = None,
                 recorded: Optional[tuple[Any, Any]] = None
                 ) -> tuple[TraceSummary, list[str]]:
    """config.resolved.yaml, plan.json and trace/ into the run directory; (trace summary,
    warnings to record). ``only``: a cell's device ids (its slice of the whole trace);
    ``recorded``: the recorded trace as the pre-flight read and checked it."""
    dump_resolved(resolved, rd.config_resolved)
    plan.write(rd.plan_json)
    for w in plan.warnings:
        log(f"plan: {w}")
    summary = write_trace(resolved, rd.trace_dir, only=only, recorded=recorded)
    warnings = []
    for w in summary.warnings:
        log(f"trace: {w}")
        warnings.append(f"trace: {w}")
    return summary, warnings
