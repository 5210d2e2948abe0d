"""``wotbench run`` on one host, and each cell of a run across hosts: one emulation run from the
config to its run directory (paper §4.2 test harness); the analysis and report come after
(:mod:`wotbench.run_command`).

The stages (``Runner.execute``), each a function of its own module taking the previous one's
typed value (:mod:`wotbench.runner.stages`) and the run's
:class:`~wotbench.runner.run_state.RunState`:

1. ``prepare/stage.py`` ``prepare() -> Inputs``: the pre-flight, the run directory with the
   resolved config, plan.json, trace/, push schedules and the DTLS key; run.json
   ``in_progress``.
2. ``deployment/stage.py`` ``deploy(inputs) -> Components``: what runs, built from the inputs,
   started and answering; netem/pumba impairments.
3. ``during/stage.py`` ``run_test(inputs, components) -> Timeline``: monitor, hogs, GEs with
   absolute start times (T0 from the cell's coordinator when a :class:`CellSeat` was given),
   the poll loop; then the impairments removed and ``teardown/stop.py``
   ``stop_components(inputs, components)``: the GEs and devices SIGTERMed so they write their
   logs.
4. ``teardown/release.py`` ``release()`` and run.json (``run_json.py``), on every path;
   ``outcome() -> RunOutcome``.

The runner talks to its backend (Docker containers or local processes) only through the
declared interface of ``backends/interface.py``.

Cleanup runs on every path (normal end, failed step, Ctrl-C, SIGTERM): SIGINT/SIGTERM become
an :class:`Interrupted` exception; the ``finally`` block ignores further signals while it
removes the network impairments, stops the GEs and devices (so their partial logs are
written), removes every container and network labelled with this run id, and writes run.json.
A SIGKILLed harness cannot clean up: ``wotbench clean`` removes what it left.
"""
from __future__ import annotations

import os
import signal
import traceback
from pathlib import Path
from typing import Optional

from wotbench.config.schema import Config
from wotbench.errors import WotbenchError
from wotbench.rundir import disk
from wotbench.run_result import RunDirSeen
from wotbench.runner.deployment.stage import deploy, remove_impairments
from wotbench.runner.during.stage import run_test
from wotbench.runner.during.watch import runtime_gone
from wotbench.runner.prepare import hostlimits
from wotbench.runner.prepare.stage import prepare
from wotbench.runner.run_state import Resources, RunState, log
from wotbench.runner.stages import CellSeat, RunOutcome
from wotbench.runner.teardown.release import release
from wotbench.runner.teardown.stop import stop_components

__all__ = ["CellSeat", "Runner", "RunOutcome", "log"]


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Runner:
    """One run, stage by stage (module docstring). The constructor gets everything a run is
    given (config, out root, backend, a cell's seat); the stages' values and what they hold
    are kept in ``state`` (:class:`~wotbench.runner.run_state.RunState`), set by the stages
    themselves, never from outside."""

    def __init__(self, config_path, out_root="reports", backend=None,
                 cell: Optional[CellSeat] = None, cfg: Optional[Config] = None,
                 on_run_dir: Optional[RunDirSeen] = None):
        """``cfg``: ``config_path`` already read (the dispatcher's or the cell's), else the
        pre-flight reads it; ``cell``: this run is one cell of a run across hosts (its devices
        and T0); ``backend``: the ``--backend`` asked for; ``on_run_dir``: told the run
        directory the moment it exists. Nothing is set from outside later."""
        self.config_path = Path(config_path)
        self.loaded = cfg
        self.out_root = Path(out_root)
        self.requested_backend = backend
        self.on_run_dir = on_run_dir
        self.state = RunState(held=Resources(tuning=hostlimits.HostTuning(log)), cell=cell)

    # -------------------------------------------------------------- signals
    def _raise_signal(self, signum, frame):
        raise Interrupted(signum)

    def _during_cleanup(self, signum, frame):
        log(f"{signal.Signals(signum).name} received: cleaning up, please wait")

    def _set_handlers(self, handler) -> dict:
        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def _runtime_lost(self, e: Exception) -> Exception:
        """The clear error for an exception that came from a runtime gone under the run."""
        backend = self.state.held.backend
        lost = backend.runtime_lost(probe=True, error=e) if backend else None
        return runtime_gone(lost, self.state.run_dir) if lost else e

    # -------------------------------------------------------------- main
    def execute(self) -> RunOutcome:
        st = self.state
        old = self._set_handlers(self._raise_signal)
        # prepare() pins the harness to the OS cores; a sweep or capacity search runs many tests
        # in this process, and each must plan with the cores the user gave, not the last pin.
        affinity = os.sched_getaffinity(0)
        try:
            try:
                inputs = prepare(self.config_path, self.out_root, self.requested_backend,
                                 self.loaded, st, self.on_run_dir)
                parts = deploy(inputs, st)
                run_test(inputs, parts, st)
                remove_impairments(inputs)
                stop_components(inputs, parts, st)
            except Interrupted as e:
                st.happened.interrupted = e.signum
                log(f"{e} received: stopping the run")
            except WotbenchError as e:
                st.happened.error = e
            except Exception as e:  # a bug: still clean up, then show the traceback
                st.happened.error = disk.as_problem(e, st.run_dir or self.out_root)
                if st.happened.error is e:   # (a full disk is the host's problem, not a bug)
                    st.happened.error = self._runtime_lost(e)
                if st.happened.error is e:   # (nor a container runtime that went away)
                    traceback.print_exc()
            finally:
                self._set_handlers(self._during_cleanup)
                release(st)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            os.sched_setaffinity(0, affinity)
        return self.outcome()

    def outcome(self) -> RunOutcome:
        """How the run ended, for the ``run`` verb (:mod:`wotbench.run_command`)."""
        h, inp = self.state.happened, self.state.inputs
        return RunOutcome(run_dir=self.state.run_dir, interrupted=h.interrupted, error=h.error,
                          aborted=h.aborted, exit_hint=h.exit_hint, failures=len(h.failures),
                          report=bool(inp and inp.resolved.report.enabled))
