"""Stage 3, ``run_test(inputs, components) -> Timeline``: the monitor, the HTTP setup phase and
the notification sink, the GEs' warm-up, the run's timeline (:mod:`.timeline`; T0 from the
cell's coordinator when the run is a cell), the hogs, the GEs started at their absolute times,
the SUT faults, and the poll loop of :mod:`.watch` until the test ends."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Optional

from wotbench.config import http_spec
from wotbench.errors import EnvironmentProblem
from wotbench.monitor.recorder import Monitor
from wotbench.monitor.sut_sampler import sut_groups
from wotbench.rundir import ContentionParams
from wotbench.rundir.layout import GE_REQUESTS
from wotbench.runner import http_phases, notify_sink, push_run, run_json, sut_faults
from wotbench.runner.deployment import readiness
from wotbench.runner.deployment.components import GeRun
from wotbench.runner.deployment.lease import STOP_MARGIN_S
from wotbench.runner.deployment.stage import dead
from wotbench.runner.during.timeline import Timeline, lead_s
from wotbench.runner.during.watch import watch_test
from wotbench.runner.run_state import RunState, log
from wotbench.runner.stages import CellSeat, Components, Inputs


def choose_t0(cell: Optional[CellSeat], run_dir: Optional[Path], lead: float) -> int:
    """T0 on CLOCK_MONOTONIC: ``lead`` seconds from now, or what the cell's seat gives (its
    coordinator's T0); the clock exchange happens there, after the devices answer."""
    if cell is not None:
        return cell.t0(run_dir, lead)
    return time.monotonic_ns() + int(lead * 1e9)


def evidence_marks(tl: Timeline) -> tuple[list[int], list[int]]:
    """When the monitor reads every component (the evidence windows' edges: T0, the test start,
    every window of the analysis's grid) and scans the host's processes (edges and middles)."""
    w = int(ContentionParams().window_s * 1e9)
    n = int(-(-tl.duration_s * 1e9 // w))
    edges = [tl.t0_ns, tl.test_start_ns] + [tl.test_start_ns + k * w for k in range(1, n + 1)]
    return edges, sorted(set(edges) | {e + w // 2 for e in edges[1:]})


def run_test(inp: Inputs, parts: Components, st: RunState) -> Timeline:
    """The test on its timeline; returns the timeline it ran on (``st.timeline`` is set the
    moment it is chosen: what the stop and run.json of a stopped run read)."""
    cfg, rd, held, happened = inp.resolved, inp.rd, st.held, st.happened
    # per-component CPU accounting always; collectl only with monitor.enabled
    held.monitor = Monitor(rd, cfg.monitor.interval_s,
                           cpus=inp.plan.os_cores or None,
                           collectl=cfg.monitor.enabled, log=log, run_id=inp.run_id,
                           run_cores=set(inp.plan.usable_cores),
                           lookup=held.backend.container_info,
                           sut_groups=sut_groups(cfg.devices))
    held.monitor.start()
    for d in parts.started_devices:
        _watch(st, d.name, d.role, d.group if d.role == "device" else None)
    for f in parts.fleets:
        _watch(st, f.name, "fleet", f.req.group)

    if cfg.gateways.http is not None and cfg.gateways.http.setup is not None:   # issue 35
        done = http_phases.run("setup", cfg, parts.http_targets, rd, log)
        if done.failed:
            raise EnvironmentProblem(
                f"gateways.http.setup: {done.failed} of {done.requests} requests were not "
                f"answered 2xx ({rd.rel(rd.phase_ge_dir('setup') / GE_REQUESTS)} has each "
                "one's status); the run stops before T0")
    if cfg.notify is not None:   # issue 35: subscriptions hold before any update
        held.sink = notify_sink.start(
            cfg, rd, {d.name: (d.address, d.port) for d in parts.devices},
            cfg.duration_s + 60 + cfg.gateways.timeout_ms / 1000, log)
    all_ges = parts.all_ges
    n_main = 1 if parts.proxy else sum(1 for d in parts.devices if d.role != "cd-node")
    # a GE pings the engine devices of its own share of the trace (device id, or in a cell
    # the rank among its share's ids, mod count: workload.ge_share, about 1/count each);
    # the budget's quadratic (ARP) term: one address per process device as before, one
    # per engine (none on loopback)
    n_fleet = 0 if parts.proxy else -(-sum(len(f.endpoints) for f in parts.fleets)
                                     // len(parts.ges))
    hosts = n_main + (len(parts.fleets) if inp.kind.container_namespaces and not parts.proxy
                      else 0)
    per_request = http_spec.is_http(cfg) and cfg.gateways.http is not None \
        and cfg.gateways.http.connection_per_request
    for g in all_ges:   # readiness from the GE's own address: pings before its start
        g.warmup_ms = readiness.warmup_ms(n_main, hosts, n_fleet) if g.role == "ge" \
            else readiness.warmup_ms(1)
        if g.role == "ge" and per_request:
            g.warmup_ms = 0   # nothing to open before the start: the harness probed them
    warm_s = max(g.warmup_ms for g in all_ges) / 1000
    st.timeline = tl = Timeline(
        # the hogs' containers start in the lead too (held.hogs.launch, before the GEs)
        choose_t0(st.cell, rd.path, lead_s(len(all_ges) + len(cfg.contention or ()),
                                           inp.kind.ge_start_lead_s,
                                           inp.trace_summary.requests) + warm_s),
        inp.cd.calibration_s if parts.cd_ge else 0.0, cfg.duration_s,
        cfg.gateways.timeout_ms)
    held.monitor.align(*evidence_marks(tl))
    held.lease.set_deadline(tl.deadline_ns + int(STOP_MARGIN_S * 1e9))
    if parts.cd_ge:
        parts.cd_ge.start_at = tl.t0_ns
    for g in parts.ges:
        g.start_at = tl.test_start_ns
    push_run.write_start(rd, sorted(inp.pushing), tl.test_start_ns,
                         tuple(f.name for f in parts.push_fleets))
    # the timeline and what runs: what the analysis of a killed run needs
    run_json.write(st, in_progress=True)
    happened.contention = held.hogs.launch(inp.resolved, inp.plan, tl.test_start_ns)
    for g in all_ges:
        held.backend.create_ge(g)
    for g in ([parts.cd_ge] if parts.cd_ge else []) + parts.ges:
        held.backend.start_ge(g)
        _watch(st, g.name, g.role)
    late = time.monotonic_ns() - tl.t0_ns
    if late > 0:
        happened.warnings.append(
            f"gateways started {late / 1e6:.0f} ms after T0: increase the lead")
    warm = readiness.wait_warm(
        [(g.name, rd.ge_warmup(g.name), g.start_at) for g in all_ges if g.warmup_ms],
        {f"{d.address}:{d.port}": d.name for d in parts.devices_and_proxy}
        | {e: n for f in parts.fleets for e, n in f.endpoints.items()},
        dead=lambda: dead(st),
        ge_gone=lambda name: held.backend.exit_code(name) is not None)
    if warm:
        happened.phases.warmup_s = max(w.took_ms for w in warm.values()) / 1000
        log("every device answers its gateway emulator's "
            + ("CoAP ping or HTTP connections (" if http_spec.is_http(cfg) else "CoAP ping (")
            + ", ".join(f"{g}: {w.took_ms:.0f} ms" for g, w in warm.items()) + ")")
    log(f"T0 in {(tl.t0_ns - time.monotonic_ns()) / 1e9:.1f} s: calibration "
        f"{tl.calibration_s:g} s, then the test for {cfg.duration_s:g} s")
    faults = cfg.sut_faults or []   # issue 35: a killed server's death is expected
    if faults:
        held.faults = sut_faults.FaultRunner(held.backend, faults, tl.test_start_ns,
                                             rd.sut_faults_json, log,
                                             sut_faults.device_runs(parts),
                                             on_restarted=lambda name: _watch_again(st, name))
        held.faults.start()
    killed = sut_faults.unwatched(faults)   # killed or restarted: their exit is expected
    happened.ge_exit.update(watch_test(held.backend, rd, parts.ges,
                                       parts.cd_ge, {d.name for d in parts.devices}
                                       - killed | {f.name for f in parts.fleets}, tl,
                                       st.fail, lambda g, code, running:
                                       _ge_failed(st, g, code, running)))
    if held.faults is not None:
        held.faults.finish()
    return tl


def _watch_again(st: RunState, name: str) -> None:
    """A restarted server (sut_faults restart): its new processes accounted from now on."""
    d = next((d for d in st.parts.devices if d.name == name), None)
    if d is not None:
        _watch(st, d.name, d.role, d.group if d.role == "device" else None)


def _watch(st: RunState, name: str, role: str, group: str | None = None) -> None:
    """Account the component's CPU: its own cgroup when it has one, else its threads."""
    cgroup = st.held.backend.cgroup(name)
    pid = None if cgroup else st.held.backend.pid(name)
    if cgroup or pid:
        st.held.monitor.watch(name, role, pid=pid, cgroup=cgroup, group=group)


def _ge_failed(st: RunState, g: GeRun, code: int, running: dict[str, GeRun]) -> None:
    st.happened.ge_died_ns.setdefault(g.name, time.monotonic_ns())
    out = st.rd.ge_container_log(g.name)
    st.held.backend.save_output(g.name, out)
    why = {2: "rejected its input (exit 2)", 1: "environment failure (exit 1)"}.get(
        code, f"exited with {code}")
    st.fail(g.name, f"gateway emulator {why}; see {st.rd.rel(out)}"
            if out.exists() else f"gateway emulator {why}")
    if code == 2:
        st.happened.exit_hint = 2
    if g.role == "ge":  # a main GE is gone: the test is compromised, stop the rest
        st.happened.aborted = True
        for name in list(running):
            st.held.backend.signal(name, signal.SIGTERM)
