"""``wotbench run``: one run (:mod:`wotbench.runner`), then its analysis, its report and the exit
code. The runner only deploys, measures and cleans up; what the measurements mean is decided
here, after the run directory is complete, so a sweep or a capacity search (which call
:func:`run`) conclude every point the same way.

Exit codes: 0 trustworthy, 3 the testbed distorted the result (or a component failed), 4 an SLO
missed on a trustworthy run, 2 bad input, 1 environment problem, 128+N interrupted by signal N.
"""
from __future__ import annotations

from wotbench.errors import WotbenchError
from wotbench.rundir import RunDir
from wotbench.runner.main import RunOutcome, execute, log


def conclude(outcome: RunOutcome) -> int:
    """Analyse and report a finished run; the exit code of ``wotbench run``."""
    if outcome.interrupted is not None:
        where = f"; raw data kept in {outcome.run_dir}" if outcome.run_dir else ""
        log(f"interrupted{where}")
        return 128 + outcome.interrupted
    if outcome.error is not None:
        if isinstance(outcome.error, WotbenchError):
            raise outcome.error  # the CLI prints it and exits with its code
        return 1
    if outcome.aborted:
        log(f"the test did not complete (see failures in {RunDir(outcome.run_dir).run_json})")
        return outcome.exit_hint or 1
    from wotbench.analysis import analyze   # heavy (pandas, scipy): only when it runs
    summary = analyze(outcome.run_dir)
    verdict = summary.verdict
    code = verdict.exit_code
    log(f"verdict: {verdict.status}")
    for r in verdict.reasons:
        print(f"  - {r}")
    if summary.slo is not None:
        log(summary.slo.text + (f" ({summary.slo.testbed_caveat})" if summary.slo.testbed_caveat else ""))
    if outcome.report:
        from wotbench.report import render   # heavy (matplotlib)
        log(f"report: {render(outcome.run_dir)}")
    if outcome.failures and code in (0, 4):
        log(f"{outcome.failures} component failure(s): flagging the run")
        code = 3
    return code


def run(config_path, out_root="reports", backend=None) -> int:
    """Run, analyse, report; the exit code (see the module docstring)."""
    return conclude(execute(config_path, out_root, backend))
