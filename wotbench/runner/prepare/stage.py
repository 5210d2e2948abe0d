"""Stage 1, ``prepare(...) -> Inputs``: the pre-flight (:mod:`wotbench.runner.preflight`, what
``wotbench check`` runs: every refusal before anything exists -- backend, impairments, host
checks, stale binaries built, plan, capacity, third-party programs), then the run directory
with the resolved config, plan.json, trace/, push schedules and the DTLS key
(:mod:`.inputs`); run.json ``in_progress``; the harness pinned to the OS cores and niced."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Optional

from cd_module import node as cd_node
from wotbench.config.schema import Config
from wotbench.deploy.resolve import resolve
from wotbench.runner.preflight import preflight
from wotbench.run_result import RunDirSeen
from wotbench.runner import push_run, run_json
from wotbench.runner.deployment.build import share_ids
from wotbench.runner.prepare import dtlskey, inputs, isolation
from wotbench.runner.run_state import RunState, log
from wotbench.runner.stages import Inputs

HARNESS_NICE = 10


def lower_priority(nice: int) -> None:
    """Raise this process's nice value to ``nice`` (never further: runs in a sweep repeat this,
    and an unprivileged process cannot lower it again)."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current < nice:
        os.nice(nice - current)


def isolate(pf, st: RunState) -> None:
    """placement.isolate_cores: the host's work off the run's GE and device cores before
    anything of the run starts (restored by the cleanup); a killed run's isolation is put
    back first either way."""
    if not pf.cfg.placement.isolate_cores:
        note = isolation.clean_stale(log)
        if note:
            log(f"warning: {note}")
            st.happened.warnings.append(note)
        return
    st.held.shield = isolation.CoreShield(log)   # set first: the cleanup restores a part
    st.held.shield.apply(pf.plan.os_cores, isolation.shielded_cores(pf.plan.usable_cores,
                                                                    pf.plan.os_cores),
                         keep=pf.cfg.placement.isolate_except)


def prepare(config_path: Path, out_root: Path, backend: Optional[str],
            loaded: Optional[Config], st: RunState,
            on_run_dir: Optional[RunDirSeen] = None) -> Inputs:
    """The inputs of the run (``loaded``: ``config_path`` already read, else the pre-flight
    reads it; ``backend``: the ``--backend`` asked for); ``st.inputs`` is set the moment the run
    directory exists and grows as each file is written; ``on_run_dir`` is told the directory
    then."""
    # every refusal before anything exists: the same function `wotbench check` runs
    pf = preflight(config_path, backend, log=log, build=True,
                   share=st.share, loaded=loaded,
                   progress=lambda step: st.stage(f"pre-flight: {step}"))
    if pf.impair.backend is not None:
        log(f"network impairments on {len(pf.impair.plan.devices)} device(s): "
            f"{pf.impair.name} backend ({pf.impair.reasons[-1]})")
    st.happened.warnings += pf.warnings
    resolved = pf.resolved or resolve(pf.cfg, pf.plan)
    st.held.tuning.apply(pf.tuning)
    isolate(pf, st)

    rd = inputs.make_run_dir(out_root, pf.cfg.name + (f"-{st.cell.node}" if st.cell else ""))
    st.inputs = inp = Inputs(kind=pf.kind, connection=pf.connection, impair=pf.impair,
                             binaries=pf.binaries, cfg=pf.cfg, resolved=resolved,
                             plan=pf.plan, cd=cd_node.settings(resolved), rd=rd,
                             share=st.share)
    log(f"run {inp.run_id} ({inp.kind.name} backend) -> {rd.path}")
    if on_run_dir is not None:
        on_run_dir(rd.path)
    inp.impair.set_log_dir(rd.network_dir)
    summary, notes = inputs.write_inputs(rd, resolved, inp.plan, log,
                                         only=share_ids(resolved, st.share),
                                         recorded=pf.recorded)
    st.inputs = inp = replace(inp, trace_summary=summary)
    st.happened.warnings += notes
    st.stage("config, plan and trace written")
    # devices[].push, rendered by the pre-flight: a process device's schedule goes to its
    # directory now, an engine's devices' into the engine's (fleet_runs.build)
    in_engines = push_run.fleet_devices(inp.cfg, pf.push_schedules)
    if pf.push_schedules:
        st.inputs = inp = replace(
            inp, pushing=frozenset(set(pf.push_schedules) - in_engines),
            fleet_push={n: r for n, r in pf.push_schedules.items() if n in in_engines})
        rows = push_run.write_schedules(rd, {n: r for n, r in pf.push_schedules.items()
                                             if n in inp.pushing})
        log(f"{len(pf.push_schedules)} device(s) push ({len(in_engines)} in engines): "
            f"{sum(rows.values()) + sum(map(len, inp.fleet_push.values()))} request(s) "
            "rendered")
    st.inputs = inp = replace(inp, dtls=dtlskey.write(rd, resolved.dtls,
                                                      inp.kind.needs_docker))
    run_json.write(st, in_progress=True)   # a killed harness leaves it so
    st.stage("inputs prepared")
    if inp.plan.os_cores:  # the harness (and its monitor thread) stays on the OS cores
        os.sched_setaffinity(0, inp.plan.os_cores)
    # Lower the harness's own priority (inherited by its monitor thread and collectl): on a
    # host too small for a dedicated GE core, its once-a-second sampling otherwise delays the
    # GE's wake-ups by milliseconds. Process-backend emulators are put back to 0 at spawn.
    lower_priority(HARNESS_NICE)
    return inp
