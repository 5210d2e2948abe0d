"""Stage 4, ``stop_components(inputs, components)``: after the test (and in the cleanup of a
stopped run), the GEs that still run stopped, the HTTP verify phase, the pushing devices'
last answers and verify phase, then every device and engine SIGTERMed (they write their logs;
pushing devices first: their teardown requests need the servers they registered with), and a
dead GE's files written from its journal."""
from __future__ import annotations

import signal
import time
from typing import Optional

from wotbench.errors import WotbenchError
from wotbench.rundir import RunDir
from wotbench.runner.teardown import ge_journal
from wotbench.runner import http_phases
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.during import push_verify
from wotbench.runner.during.watch import GE_STOP_WAIT_S
from wotbench.runner.run_state import RunState, log
from wotbench.runner.stages import Components, Inputs

STOP_GRACE_S = 15.0       # devices: SIGTERM -> exit (they write their logs)


def stop_components(inp: Inputs, parts: Components, st: RunState) -> None:
    """Stop GEs that still run, then SIGTERM every device and wait for its logs. Components
    never created (deploy failed first) are skipped: pid() is None for such a GE, created()
    False for such a device."""
    backend, happened = st.held.backend, st.happened
    if backend is None:
        return
    rd = inp.rd
    running = [g.name for g in parts.all_ges
               if backend.pid(g.name) and backend.exit_code(g.name) is None]
    for name, code in backend.stop(running, GE_STOP_WAIT_S).items():
        happened.ge_exit.setdefault(name, code)
    if st.held.sink is not None and st.held.sink.stop() not in (0, None):
        st.fail("notify-sink", f"exited with {st.held.sink.proc.returncode} "
                               f"({rd.rel(rd.sink_log)})")
    h = inp.resolved.gateways.http if inp.resolved is not None else None
    if h is not None and h.verify is not None and not happened.stopped:
        http_phases.run("verify", inp.resolved, parts.http_targets, rd,
                        log)   # judged by the analysis
    names = [d.name for d in parts.started_devices if backend.created(d.name)]
    already = backend.exited(set(names))
    alive = [n for n in names if n not in already]
    third_party = {d.name for d in parts.started_devices if d.program is not None}
    _drain_push(inp, parts, st)
    _verify_push(inp, parts, st)
    t = time.monotonic()
    # pushing devices first: their teardown requests need the servers they registered with
    first = [n for n in alive if n in inp.pushing]
    codes = backend.stop(first, STOP_GRACE_S) if first else {}
    _stop_fleets(rd, parts.push_fleets, st)
    codes.update(backend.stop([n for n in alive if n not in inp.pushing], STOP_GRACE_S))
    _stop_fleets(rd, [f for f in parts.fleets if f not in parts.push_fleets], st)
    happened.phases.stop_s = round(time.monotonic() - t, 3)
    for n in alive:
        code = codes.get(n)
        if code is None:
            backend.signal(n, signal.SIGKILL)
            st.fail(n, f"did not stop within {STOP_GRACE_S:g} s of SIGTERM; killed, "
                    "its device log is lost")
        elif code != 0 and not (code == 128 + signal.SIGTERM and n in third_party):
            # (a third-party program may simply die of the SIGTERM: a normal stop)
            st.fail(n, f"exited with {code} after SIGTERM")
    salvage_ges(parts, st)
    reported = {f["component"] for f in happened.failures}
    for d in parts.started_devices:
        if not backend.created(d.name):
            continue    # never created: nothing to stop, no output to save
        if d.name in reported or d.name in already or not d.emulated:
            backend.save_output(d.name, rd.device_container_log(d.name))
        if d.emulated and d.name not in reported and not rd.device_log(d.name).exists():
            st.fail(d.name, "no device-log.csv written")


def _stop_fleets(rd: RunDir, fleets: list[FleetRun], st: RunState) -> None:
    """SIGTERM these engines and wait for their files (fleet logs of many devices take longer
    than one device's); a failed engine is a failure, its output kept."""
    if not fleets:
        return
    backend = st.held.backend
    names = [f.name for f in fleets if backend.created(f.name)]
    already = backend.exited(set(names))
    alive = [n for n in names if n not in already]
    codes = dict(already)
    if alive:
        codes.update(backend.stop(alive, fleet_runs.stop_grace_s(fleets)))
    for f in fleets:
        if f.name not in codes:
            continue
        code = codes[f.name]
        if code is None:
            backend.signal(f.name, signal.SIGKILL)
            st.fail(f.name, "did not stop after SIGTERM; killed, its fleet logs are lost")
        elif code != 0:
            st.fail(f.name, f"wot-fleet exited with {code}" + (
                " before the stop" if f.name in already else " after SIGTERM"))
        elif not rd.fleet_summary(f.name).exists():
            st.fail(f.name, "no fleet-summary.json written")
        if code != 0:
            backend.save_output(f.name, rd.fleet_container_log(f.name))


def _drain_push(inp: Inputs, parts: Components, st: RunState) -> None:
    """The pushing devices' last test requests get their timeout to be answered (the GEs
    may finish sooner): a SIGTERM earlier would end them as errors."""
    tl = st.timeline
    if not (inp.pushing or parts.push_fleets) or st.happened.stopped or tl is None:
        return
    end = tl.test_end_ns + inp.resolved.gateways.timeout_ms * 1_000_000
    wait_s = (end - time.monotonic_ns()) / 1e9
    if wait_s > 0:
        log(f"waiting {wait_s:.1f} s for the answers to the devices' last requests (timeout)")
        time.sleep(wait_s)


def _verify_push(inp: Inputs, parts: Components, st: RunState) -> None:
    """devices[].push phase verify (e.g. an RD lookup): after a completed test, before the
    devices deregister."""
    happened = st.happened
    if not (inp.pushing or parts.push_fleets) or happened.stopped \
            or st.timeline is None or happened.push_verify:
        return
    try:
        happened.push_verify = push_verify.verify(inp.resolved)
    except OSError as e:      # e.g. no socket for the client context: the run stays valid
        happened.warnings.append(f"devices[].push verify: could not ask the targets: {e}")
        return
    for v in happened.push_verify:
        log(v.describe())


def salvage_ges(parts: Optional[Components], st: RunState) -> None:
    """A GE that died without writing its files: write them from its journal."""
    for g in parts.all_ges if parts else []:
        if not ge_journal.salvage_needed(g.out_dir, g.journal):
            continue
        died = st.happened.ge_died_ns.get(g.name, time.monotonic_ns())
        try:
            counts = ge_journal.salvage(g.journal, g.trace, g.out_dir, g.name, died, {
                "wait": g.wait, "type": g.msg_type, "retransmit": g.retransmit})
        except (ge_journal.JournalError, OSError, WotbenchError) as e:
            st.fail(g.name, f"gateway emulator died and its journal cannot be read: {e}")
            continue
        note = (f"{g.name} died before writing its results: requests.csv and summary.json "
                "were written from its journal ("
                + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ")")
        log(note)
        st.happened.warnings.append(note)
