"""The end of every run (normal end, failed step, SIGINT, SIGTERM): ``release(st)`` gives back
what the stages acquired (:class:`~wotbench.runner.run_state.Resources`), each only if it was:
impairments removed (before the containers go: netem needs their namespaces), the components
of a stopped run stopped (their partial logs written), the sink, faults, hogs and monitor
stopped, every container and network of the run removed, a dead GE's journal salvaged, the
lease released (after the components: a renewal gap would stop them), the host settings
restored, the DTLS key removed, and run.json written.

Each step is guarded: one that raises is logged (and kept in run.json's warnings) and the rest
still run; the host's settings and core isolation are restored and run.json written in a
``finally``, so that no failure (nor a second Ctrl-C) before them leaves the host narrowed."""
from __future__ import annotations

import time
from typing import Callable

from wotbench.runner import run_json
from wotbench.runner.deployment import journal
from wotbench.runner.deployment.stage import remove_impairments
from wotbench.runner.prepare import dtlskey
from wotbench.runner.run_state import RunState, log
from wotbench.runner.teardown.stop import salvage_ges, stop_components


def _guarded(st: RunState, what: str, step: Callable[[], object], hint: str = "") -> None:
    try:
        step()
    except Exception as e:  # noqa: BLE001 - one failed step must not stop the cleanup
        msg = f"{what} failed: {e}{hint}"
        log(msg)
        st.happened.warnings.append(msg)


def release(st: RunState) -> None:
    try:
        _release_run(st)
    finally:
        _restore_host(st)


def _release_run(st: RunState) -> None:
    held = st.held
    # before the containers go (netem needs their namespaces)
    _guarded(st, "removing the network impairments", lambda: remove_impairments(st.inputs))
    if st.happened.stopped and held.backend is not None and held.started:
        _guarded(st, "stopping components", lambda: stop_components(st.inputs, st.parts, st))
    if held.sink is not None:   # stopped already unless the run failed before that
        _guarded(st, "stopping the notification sink", held.sink.stop)
    if held.faults is not None:   # a paused server continues, so that it can stop
        _guarded(st, "finishing the SUT faults", held.faults.finish)
    if held.hogs is not None:
        _guarded(st, "stopping the contention hogs", held.hogs.stop)
    if held.monitor is not None:
        _guarded(st, "stopping the monitor", held.monitor.stop)
    if held.backend is not None:
        t = time.monotonic()
        backend = held.backend

        def cleanup() -> None:
            removed = backend.cleanup()
            log("removed " + ", ".join(f"{v} {k}" for k, v in removed.items()))
        _guarded(st, "cleanup", cleanup, "; run `wotbench clean`")
        st.happened.phases.teardown_s = round(time.monotonic() - t, 3)
    # stop_components salvages a dead GE's journal; not if it failed before that
    _guarded(st, "salvaging a gateway emulator's journal", lambda: salvage_ges(st.parts, st))
    _guarded(st, "removing the GEs' journals", lambda: journal.remove_dir(held.journal_dir))
    if held.lease is not None:   # after the components: a renewal gap would stop them
        _guarded(st, "releasing the lease", held.lease.release)


def _restore_host(st: RunState) -> None:
    """After the run's own containers and processes; each even if the one before raised."""
    held = st.held
    try:
        _guarded(st, "restoring the host settings", held.tuning.restore)
    finally:
        try:
            if held.shield is not None:   # the state file stays for `wotbench clean`
                _guarded(st, "restoring the core isolation", held.shield.restore,
                         "; run `wotbench clean` as root")
        finally:
            if st.rd is not None:
                rd = st.rd
                _guarded(st, "removing the DTLS key", lambda: dtlskey.remove(rd))
                run_json.write(st)
