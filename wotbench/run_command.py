"""``wotbench run``: one run (:mod:`wotbench.runner`), then its analysis, its report and the exit
code. The runner only deploys, measures and cleans up; what the measurements mean is decided
here, after the run directory is complete, so a sweep or a capacity search (which call
:func:`run` through :mod:`wotbench.dispatch`) conclude every point the same way; each gets a
typed :class:`~wotbench.run_result.RunResult` (exit code, run directory, summary).

Exit codes: 0 trustworthy, 3 the testbed distorted the result (or a component failed), 4 an SLO
missed on a trustworthy run, 2 bad input, 1 environment problem, 128+N interrupted by signal N.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from wotbench.config.schema import Config
from wotbench.errors import WotbenchError
from wotbench.rundir import RunDir, disk
from wotbench.run_result import RunDirSeen, RunResult
from wotbench.runner.main import Runner, log
from wotbench.runner.stages import RunOutcome


def conclude(outcome: RunOutcome) -> RunResult:
    """Analyse and report a finished run; its exit code (that of ``wotbench run``), run
    directory and summary."""
    run_dir = outcome.run_dir
    if outcome.interrupted is not None:
        where = f"; raw data kept in {run_dir}" if run_dir else ""
        log(f"interrupted{where}")
        return RunResult(128 + outcome.interrupted, run_dir)
    if outcome.error is not None:
        if isinstance(outcome.error, WotbenchError):
            raise outcome.error  # the CLI prints it and exits with its code
        return RunResult(1, run_dir)
    if outcome.aborted:
        log(f"the test did not complete (see failures in {RunDir(run_dir).run_json})")
        if outcome.exit_hint == 2 or not _ge_results(run_dir):
            return RunResult(outcome.exit_hint or 1, run_dir)
        log("analysing what was measured until then (the verdict is invalid: a component failed)")
    from wotbench.analysis import analyze   # heavy (pandas, scipy): only when it runs
    summary = analyze(run_dir)
    verdict = summary.verdict
    code = verdict.exit_code
    log(f"verdict: {verdict.status}")
    for r in verdict.reasons:
        print(f"  - {r}")
    if summary.slo is not None:
        log(summary.slo.text + (f" ({summary.slo.testbed_caveat})" if summary.slo.testbed_caveat else ""))
    if outcome.report:
        from wotbench.report import render   # heavy (matplotlib)
        log(f"report: {render(run_dir)}")
    if outcome.failures and code in (0, 4):
        log(f"{outcome.failures} component failure(s): flagging the run")
        code = 3
    full = disk.full_note(run_dir) if outcome.failures else ""
    if full:   # the components failed for want of disk: the host's problem (exit 1)
        log(f"{outcome.failures} component failure(s){full}. Fix: free space there or "
            "use --out-root on a disk with room")
        code = 1
    return RunResult(code, run_dir, summary)


def _fingerprint(path) -> Optional[str]:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def note_config_edit(config_path, before: Optional[str], run_dir: Optional[Path]) -> None:
    """The config file changed while the run was in progress: the run used what it resolved
    at its start (config.resolved.yaml); say so, and record it in run.json."""
    if before is None or run_dir is None or _fingerprint(config_path) in (before, None):
        return
    rd = RunDir(run_dir)
    note = (f"{config_path} was edited while the run was in progress; the run used the values "
            f"resolved at its start ({rd.rel(rd.config_resolved)})")
    log(f"note: {note}")
    try:
        record = rd.read_run()
    except (OSError, ValueError):
        return   # no run.json to record it in (the run failed before writing one)
    record.warnings.append(note)
    rd.write_run(record)


def _ge_results(run_dir) -> bool:
    """Every main GE left its results (written by itself, or from its journal after it died)."""
    rd = RunDir(run_dir)
    try:
        ges = rd.read_run().ges
    except Exception:   # noqa: BLE001 - no run.json: nothing to analyse
        return False
    return bool(ges) and all(rd.ge_summary(g.id).exists() for g in ges)


def run(config_path, out_root="reports", backend=None,
        cfg: Optional[Config] = None, on_run_dir: Optional[RunDirSeen] = None) -> RunResult:
    """Run, analyse, report (see the module docstring). ``cfg``: the config already read
    from ``config_path`` (the dispatcher's), so the YAML is read once per run; ``on_run_dir``:
    told the run directory the moment it exists."""
    before = _fingerprint(config_path)
    outcome = Runner(config_path, out_root, backend, cfg=cfg, on_run_dir=on_run_dir).execute()
    note_config_edit(config_path, before, outcome.run_dir)
    return conclude(outcome)
