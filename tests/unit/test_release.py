"""The run's end (wotbench.runner.teardown.release) with a fake state whose earlier steps raise:
the host's settings and core isolation are still restored and run.json still written."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from wotbench.runner.run_state import Resources, RunState
from wotbench.runner.teardown import release as teardown


class Step:
    """A resource whose release is one call; ``raises``: what that call raises."""

    def __init__(self, calls: list[str], name: str, raises: BaseException | None = None):
        self.calls, self.name, self.raises = calls, name, raises

    def __call__(self) -> None:
        self.calls.append(self.name)
        if self.raises is not None:
            raise self.raises


def _state(monkeypatch, calls: list[str], raising: dict[str, BaseException]) -> RunState:
    def res(name: str, method: str) -> SimpleNamespace:
        return SimpleNamespace(**{method: Step(calls, name, raising.get(name))})
    monkeypatch.setattr(teardown.run_json, "write", lambda st: calls.append("run.json"))
    monkeypatch.setattr(teardown.dtlskey, "remove", lambda rd: calls.append("dtls key"))
    held = Resources(tuning=res("tuning", "restore"), shield=res("shield", "restore"),
                     lease=res("lease", "release"), hogs=res("hogs", "stop"),
                     monitor=res("monitor", "stop"), sink=res("sink", "stop"),
                     faults=res("faults", "finish"))
    return RunState(held=held, inputs=SimpleNamespace(rd=object(), impair=None))


def test_a_failed_step_is_logged_and_the_rest_still_runs(monkeypatch):
    calls: list[str] = []
    st = _state(monkeypatch, calls, {"sink": RuntimeError("sink wedged"),
                                     "hogs": OSError("hog gone"), "lease": OSError("lease")})
    teardown.release(st)
    assert calls == ["sink", "faults", "hogs", "monitor", "lease", "tuning", "shield",
                     "dtls key", "run.json"]
    assert [w.split(":")[0] for w in st.happened.warnings] == [
        "stopping the notification sink failed", "stopping the contention hogs failed",
        "releasing the lease failed"]


def test_a_failed_tuning_restore_still_restores_the_isolation(monkeypatch):
    calls: list[str] = []
    st = _state(monkeypatch, calls, {"tuning": OSError("sysctl"),
                                     "shield": OSError("state file")})
    teardown.release(st)
    assert calls[-4:] == ["tuning", "shield", "dtls key", "run.json"]
    assert "run `wotbench clean` as root" in st.happened.warnings[-1]


def test_an_interrupt_during_the_release_still_restores_the_host(monkeypatch):
    calls: list[str] = []
    st = _state(monkeypatch, calls, {"monitor": KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        teardown.release(st)
    assert "lease" not in calls and calls[-4:] == ["tuning", "shield", "dtls key", "run.json"]
