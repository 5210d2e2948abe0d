"""The poll loop of a running test (runner/during/watch.py) against a scripted backend: no processes."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional, Sequence

import pytest

from wotbench.rundir import RunDir
from wotbench.runner.during import watch
from wotbench.runner.deployment.components import GeRun
from wotbench.runner.during.timeline import NS, Timeline


class ScriptedBackend:
    """``exits``: component -> (check number from which it has exited, exit code)."""
    own_cgroup = False

    def __init__(self, exits: dict[str, tuple[int, int]], lost_at: Optional[int] = None):
        self.exits, self.checks, self.calls = exits, 0, []
        self.lost_at = lost_at    # check number from which the runtime is gone

    def runtime_lost(self, probe: bool = False, error=None) -> Optional[str]:
        if self.lost_at is not None and self.checks >= self.lost_at:
            return "the Docker daemon went away during the run (its event stream ended)"
        return None

    def _code(self, name: str) -> Optional[int]:
        when, code = self.exits.get(name, (10**9, 0))
        return code if self.checks >= when else None

    def exited(self, names: set[str]) -> dict[str, int]:
        self.checks += 1          # one device query per check round
        return {n: self._code(n) for n in names if self._code(n) is not None}

    def exit_code(self, name: str) -> Optional[int]:
        return self._code(name)

    def describe_exit(self, name: str) -> str:
        return f"process exited with {self._code(name)}"

    def signal(self, name: str, sig: int) -> None:
        self.calls.append(("signal", name, sig))

    def stop(self, names: Sequence[str], grace_s: float) -> dict[str, Optional[int]]:
        self.calls.append(("stop", list(names), grace_s))
        return {n: 143 for n in names}


def _ge(rd: RunDir, name: str, role: str = "ge") -> GeRun:
    return GeRun(name=name, role=role, cpu=0, trace=rd.ge_trace(0, 1), out_dir=rd.ge_dir(name),
                 stdout=rd.ge_stdout(name))


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setattr(watch, "POLL_S", 0.001)
    monkeypatch.setattr(watch, "CHECK_S", 0.0)


def _run(backend, tmp_path: Path, timeline: Timeline, cd: bool = True):
    rd = RunDir(tmp_path)
    fails, ge_failures = [], []

    def ge_failed(g, code, running):
        ge_failures.append((g.name, code, sorted(running)))
    exits = watch.watch_test(backend, rd, [_ge(rd, "ge-0"), _ge(rd, "ge-1")],
                             _ge(rd, "cd-ge", "cd-ge") if cd else None, {"d-0", "d-1"}, timeline,
                             lambda c, w: fails.append((c, w)), ge_failed)
    return exits, fails, ge_failures


def _future() -> Timeline:
    return Timeline.plan(time.monotonic_ns(), 0.0, 0.0, 60.0, 1000)


def test_gateways_ending_well_end_the_watch(tmp_path):
    b = ScriptedBackend({"ge-0": (2, 0), "ge-1": (3, 0), "cd-ge": (3, 0)})
    exits, fails, ge_failures = _run(b, tmp_path, _future())
    assert exits == {"ge-0": 0, "ge-1": 0, "cd-ge": 0}
    assert fails == [] and ge_failures == [] and b.calls == [] and b.checks == 3


def test_a_device_that_dies_is_reported_once(tmp_path):
    b = ScriptedBackend({"d-1": (1, 137), "ge-0": (4, 0), "ge-1": (4, 0), "cd-ge": (4, 0)})
    exits, fails, _ = _run(b, tmp_path, _future())
    assert fails == [("d-1", "process exited with 137 during the test (exit code 137)")]
    assert exits["ge-0"] == 0


def test_a_failed_gateway_goes_to_the_runner_with_those_still_running(tmp_path):
    b = ScriptedBackend({"ge-0": (2, 2), "ge-1": (3, 0), "cd-ge": (3, 0)})
    exits, fails, ge_failures = _run(b, tmp_path, _future())
    assert ge_failures == [("ge-0", 2, ["cd-ge", "ge-1"])] and exits["ge-0"] == 2


def test_gateways_running_past_the_deadline_are_failed_and_stopped(tmp_path):
    past = Timeline.plan(time.monotonic_ns() - 100 * NS, 0.0, 0.0, 1.0, 1000)
    assert past.deadline_ns < time.monotonic_ns()
    b = ScriptedBackend({"ge-1": (1, 0)})
    exits, fails, _ = _run(b, tmp_path, past, cd=False)
    assert fails == [("ge-0", "still running at the bounded end of the test; stopped")]
    assert b.calls == [("stop", ["ge-0"], watch.GE_STOP_WAIT_S)]
    assert exits == {"ge-1": 0, "ge-0": 143}


def test_a_runtime_that_goes_away_stops_the_watch_with_a_clear_error(tmp_path):
    from wotbench.errors import EnvironmentProblem
    b = ScriptedBackend({}, lost_at=2)
    with pytest.raises(EnvironmentProblem) as e:
        _run(b, tmp_path, _future())
    assert "Docker daemon went away" in str(e.value) and "kept in" in str(e.value)
    assert b.checks == 2
