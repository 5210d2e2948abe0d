"""The poll loop of a running test: progress on the terminal, devices that die, GEs that end
(well or badly), and the bounded end (``Timeline.deadline_ns``). Everything it learns goes to
the runner through two callbacks, so the runner keeps the failure bookkeeping.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional, Protocol

from wotbench.errors import EnvironmentProblem
from wotbench.rundir import RunDir
from wotbench.runner.backends.interface import Inspector, Lifecycle
from wotbench.runner.deployment.components import GeRun
from wotbench.runner.during.progress import ProgressView
from wotbench.runner.during.timeline import Timeline

POLL_S = 0.25           # progress refresh
CHECK_S = 1.0           # device / GE exit checks (one backend query each)
GE_STOP_WAIT_S = 10.0   # a GE stopped by the harness: SIGTERM -> exit

Fail = Callable[[str, str], None]                       # (component, what)
GeFailed = Callable[[GeRun, int, dict[str, GeRun]], None]   # (GE, exit code, still running)


class Backend(Inspector, Lifecycle, Protocol):
    """What the watch needs of the backend."""


def runtime_gone(lost: str, run_dir: Optional[Path]) -> EnvironmentProblem:
    """The error of a run whose container runtime went away (``lost``: the backend's why)."""
    where = f" in {run_dir}" if run_dir else ""
    return EnvironmentProblem(f"{lost}: the run stops; what was measured until then is kept"
                              f"{where}, and what is left of the run is removed once the daemon "
                              "answers again")


def watch_test(backend: Backend, rd: RunDir, ges: list[GeRun], cd_ge: Optional[GeRun],
               device_names: set[str], timeline: Timeline, fail: Fail,
               ge_failed: GeFailed) -> dict[str, Optional[int]]:
    """Wait until every GE has exited (or the deadline passed); return the GEs' exit codes."""
    all_ges = ges + ([cd_ge] if cd_ge else [])
    running = {g.name: g for g in all_ges}
    exits: dict[str, Optional[int]] = {}
    dead: set[str] = set()
    next_check = 0.0
    with ProgressView([rd.ge_progress(g.name) for g in ges],
                      rd.ge_progress(cd_ge.name) if cd_ge else None, timeline) as view:
        while running:
            view.update()
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + CHECK_S
                lost = backend.runtime_lost()
                if lost:
                    raise runtime_gone(lost, rd.path)
                for name, code in sorted(backend.exited(device_names - dead).items()):
                    dead.add(name)
                    fail(name, f"{backend.describe_exit(name)} during the test (exit code {code})")
                for name in list(running):
                    code = backend.exit_code(name)
                    if code is None:
                        continue
                    g = running.pop(name)
                    exits[name] = code
                    if code != 0:
                        ge_failed(g, code, running)
            if time.monotonic_ns() > timeline.deadline_ns:
                late = list(running)
                for name in late:
                    fail(name, "still running at the bounded end of the test; stopped")
                exits.update(backend.stop(late, GE_STOP_WAIT_S))
                running.clear()
                break
            time.sleep(POLL_S)
        view.update()
    return exits
