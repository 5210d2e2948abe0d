"""The end of every run (normal end, failed step, SIGINT, SIGTERM): ``release(st)`` gives back
what the stages acquired (:class:`~wotbench.runner.run_state.Resources`), each only if it was:
impairments removed (before the containers go: netem needs their namespaces), the components
of a stopped run stopped (their partial logs written), the sink, faults, hogs and monitor
stopped, every container and network of the run removed, a dead GE's journal salvaged, the
lease released (after the components: a renewal gap would stop them), the host settings
restored, the DTLS key removed, and run.json written."""
from __future__ import annotations

import time

from wotbench.runner import run_json
from wotbench.runner.deployment import journal
from wotbench.runner.deployment.stage import remove_impairments
from wotbench.runner.prepare import dtlskey
from wotbench.runner.run_state import RunState, log
from wotbench.runner.teardown.stop import salvage_ges, stop_components


def release(st: RunState) -> None:
    held = st.held
    remove_impairments(st.inputs)   # before the containers go (netem needs their namespaces)
    if st.happened.stopped and held.backend is not None and held.started:
        try:
            stop_components(st.inputs, st.parts, st)
        except Exception as e:
            log(f"stopping components failed: {e}")
    if held.sink is not None:   # stopped already unless the run failed before that
        held.sink.stop()
    if held.faults is not None:   # a paused server continues, so that it can stop
        held.faults.finish()
    if held.hogs is not None:
        held.hogs.stop()
    if held.monitor is not None:
        held.monitor.stop()
    if held.backend is not None:
        t = time.monotonic()
        try:
            removed = held.backend.cleanup()
            log("removed " + ", ".join(f"{v} {k}" for k, v in removed.items()))
        except Exception as e:
            log(f"cleanup failed: {e}; run `wotbench clean`")
        st.happened.phases.teardown_s = round(time.monotonic() - t, 3)
    try:   # stop_components salvages a dead GE's journal; not if it failed before that
        salvage_ges(st.parts, st)
    except Exception as e:  # noqa: BLE001 - never let it stop the cleanup
        log(f"salvaging a gateway emulator's journal failed: {e}")
    journal.remove_dir(held.journal_dir)
    if held.lease is not None:   # after the components: a renewal gap would stop them
        held.lease.release()
    held.tuning.restore()
    if held.shield is not None:   # after the run's own containers and processes
        try:
            held.shield.restore()
        except Exception as e:  # noqa: BLE001 - the state file stays for `wotbench clean`
            log(f"restoring the core isolation failed: {e}; run `wotbench clean` as root")
    if st.rd is not None:
        dtlskey.remove(st.rd)
        run_json.write(st)
