"""run.json (:class:`~wotbench.rundir.RunRecord`) from what a run has so far (its
:class:`~wotbench.runner.run_state.RunState`): written ``in_progress`` when the inputs are
prepared and again when the timeline is known (what the analysis of a killed run needs), and
at the end on every path."""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Optional

from cd_module import node as cd_node
from wotbench.rundir import HostRecord, PlanNote, RunRecord, TestWindow, Window
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.run_state import RunState
from wotbench.runner.stages import Components
from wotbench.stamps import iso_stamp


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> Optional[str]:
    """/proc/cpuinfo "model name" of the first CPU (None where the kernel names none)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def host_record(st: RunState) -> HostRecord:
    u = os.uname()
    backend = st.held.backend
    return HostRecord(hostname=u.nodename, kernel=u.release, machine=u.machine,
                      cpus=os.cpu_count(), python=platform.python_version(),
                      harness_cpus=sorted(os.sched_getaffinity(0)), cpu_model=cpu_model(),
                      **(backend.describe() if backend else {}))


def run_record(st: RunState, in_progress: bool = False) -> RunRecord:
    """run.json: what was deployed and what happened, so far (needs the prepared inputs)."""
    inp, rd, tl, h = st.inputs, st.rd, st.timeline, st.happened
    parts = st.parts or Components(devices=[], fleets=[], ges=[])   # before the deploy
    cd_on = bool(inp.cd and parts.cd_ge)
    return RunRecord(
        name=inp.cfg.name, run_id=inp.run_id, backend=inp.kind.name, host=host_record(st),
        calibration=Window(start_mono_ns=tl.t0_ns, end_mono_ns=tl.test_start_ns)
        if tl and cd_on else None,
        test=TestWindow(start_mono_ns=tl.test_start_ns, duration_s=tl.duration_s)
        if tl else None,
        t0_mono_ns=tl.t0_ns if tl else None,
        cd=inp.cd.record(rd.rel(rd.resource_file(cd_node.CD_NODE))) if cd_on else None,
        devices=[d.record(rd) for d in parts.devices if d.role == "device"],
        fleets=[f.record(rd) for f in parts.fleets],
        cd_node=next((d.record(rd) for d in parts.devices if d.role == "cd-node"), None),
        ges=[g.record(rd) for g in parts.ges],
        cd_ge=parts.cd_ge.record(rd) if parts.cd_ge else None,
        proxy=parts.proxy.record(rd) if parts.proxy else None,
        proxy_mode=inp.resolved.gateways.proxy.mode if parts.proxy else None,
        ge_exit_codes=h.ge_exit,
        networks=st.held.backend.network_record() if st.held.backend else [],
        plan=PlanNote(faithful=inp.plan.faithful, warnings=inp.plan.warnings),
        contention=h.contention,
        network=inp.impair.record(rd, fleet_runs.impair_counters(rd, parts.fleets)),
        host_tuning=st.held.tuning.record(), phases=h.phases,
        isolation=st.held.shield.record() if st.held.shield else None,
        failures=h.failures, warnings=h.warnings, other_runs=h.other_runs,
        push_verify=h.push_verify, interrupted=h.interrupted is not None, aborted=h.aborted,
        error=str(h.error) if h.error else None, written_at_utc=iso_stamp(),
        in_progress=in_progress)


def write(st: RunState, in_progress: bool = False) -> None:
    """run.json into the run directory (none before it exists)."""
    if st.rd is not None:
        st.rd.write_run(run_record(st, in_progress))
