"""Deliberate contention episodes (``contention:`` config block, :mod:`wotbench.config.hog_episodes`):
the life cycle of the hogs that inject them.

The hog binary is built with the other binaries and handed to the backend's ``prepare`` (its
image is built there, before T0 is chosen). The hogs are launched through the backend
(``Stressor.launch_hog``) before T0 and sleep until their own absolute start instant; they
stop on their own after ``duration_s``. At the end of the run whatever still runs gets SIGTERM
and each hog's one-line JSON report is saved to ``RunDir.hog_report``. The backend labels what
it starts with the run id, so the normal cleanup removes it too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from wotbench.rundir import EpisodeRecord, RunDir, atomic
from wotbench.runner.during.hogspec import HogSpec, episodes_for_run

if TYPE_CHECKING:
    from wotbench.config.schema import Config
    from wotbench.deploy.plan import Plan
    from wotbench.runner.backends.interface import HogHandle, Log, Stressor

STOP_TIMEOUT_S = 10.0


class Hogs:
    def __init__(self, backend: "Stressor", run_id: str, rd: RunDir, log: "Log" = print):
        self.backend, self.run_id, self.rd, self.log = backend, run_id, rd, log
        self.specs: list[HogSpec] = []
        self.running: dict[str, "HogHandle"] = {}

    def launch(self, resolved: "Config", plan: "Plan", test_start_ns: int) -> list[EpisodeRecord]:
        """Start every episode's hog; return what run.json records."""
        if not resolved.contention:
            return []
        self.specs = episodes_for_run(resolved, plan, test_start_ns, run_label=self.run_id)
        self.rd.contention_dir.mkdir(parents=True, exist_ok=True)
        for s in self.specs:
            self.running[s.name] = self.backend.launch_hog(s)
        if self.specs:
            self.log(f"{len(self.specs)} contention episode(s) scheduled")
        return [s.record() for s in self.specs]

    def stop(self) -> None:
        """Idempotent: stop what still runs, save each hog's JSON line."""
        for name, h in list(self.running.items()):
            try:
                atomic.write_bytes(self.rd.hog_report(name), h.stop(STOP_TIMEOUT_S))
            except Exception as e:  # noqa: BLE001 - a hog's report must not stop the cleanup
                self.log(f"contention: could not collect {name}: {e}")
            self.running.pop(name, None)
