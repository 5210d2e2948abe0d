"""Stage 2, ``deploy(inputs) -> Components``: what runs, built from the inputs alone
(:mod:`.build`); the lease, the GEs' journals, the backend with its images and network; the
devices, wot-fleet engines and the CD node started; readiness (CoAP ping, HTTP, third-party
programs); the pushing devices' setup; netem/pumba impairments."""
from __future__ import annotations

import time
from typing import Optional

from wotbench.config import http_spec
from wotbench.runner import push_run, sut_faults
from wotbench.runner.deployment import journal, readiness, thirdparty
from wotbench.runner.deployment.build import build_components
from wotbench.runner.deployment.components import DeviceRun
from wotbench.runner.deployment.lease import Lease
from wotbench.runner.during.hogs import Hogs
from wotbench.runner.during.timeline import Timeline
from wotbench.runner.run_state import RunState, log
from wotbench.runner.stages import Components, Inputs


def deploy(inp: Inputs, st: RunState) -> Components:
    """What runs, built from the inputs, started and answering (``st.parts`` is set the moment
    they are built: the cleanup stops what started)."""
    st.parts = parts = build_components(inp)
    held, happened, rd = st.held, st.happened, inp.rd
    st.stage(f"components built ({len(parts.devices)} device(s), "
             f"{len(parts.fleets)} engine(s), {len(parts.ges)} GE(s))")
    held.lease = Lease(rd.lease_dir, inp.run_id)
    held.lease.start()
    held.journal_dir = journal.make_dir(inp.run_id, held.lease.path)
    for g in parts.all_ges if held.journal_dir else []:
        g.journal = held.journal_dir / f"{g.name}.journal"
    held.backend = inp.kind.create(inp.run_id, rd.path, log, inp.connection)
    for rid in held.backend.remove_abandoned():
        happened.warnings.append(f"removed what run {rid} left behind (its harness was gone)")
    journal.remove_abandoned(log)
    happened.other_runs = held.backend.other_runs()
    if happened.other_runs:
        note = ("another WoTbench run is active on this host ("
                + ", ".join(f"{rid}: {n} container(s)/process(es)"
                            for rid, n in sorted(happened.other_runs.items()))
                + "); the verdict flags the windows in which it loads this run's cores")
        log(note)
        happened.warnings.append(note)
    held.backend.prepare(inp.binaries)
    held.backend.prepare_programs(thirdparty.programs(inp.resolved))
    st.stage("backend and images ready")
    sut_faults.preflight(inp.resolved.sut_faults, held.backend)   # issue 35
    held.hogs = Hogs(held.backend, inp.run_id, rd, log)
    held.backend.setup_network(inp.resolved.network.subnet,
                               {d.container: d.address for d in parts.started_devices}
                               | {f.name: f.address for f in parts.fleets},
                               [g.name for g in parts.all_ges])
    st.stage("network set up")
    t = time.monotonic()
    held.started = True
    held.backend.start_devices(parts.started_devices)
    held.backend.start_fleets(parts.fleets)
    if inp.impair.applies_at_start:  # app: the --impair flags are in effect already
        inp.impair.apply([], impair_duration_s(inp, parts))
    happened.phases.start_devices_s = round(time.monotonic() - t, 3)
    log(f"{len(parts.started_devices) + len(parts.fleets)} component(s) started in "
        f"{happened.phases.start_devices_s:.1f} s; "
        + ("waiting for HTTP answers" if http_spec.is_http(inp.resolved)
           else "waiting for CoAP pings"))
    took = readiness.wait_listening(
        [(d.name, rd.device_ready(d.name)) for d in parts.devices if d.emulated]
        + [(f.name, rd.fleet_ready(f.name)) for f in parts.fleets],
        timeout_s=15 + 0.05 * len(parts.devices) + readiness.fleet_bind_s(
            sum(len(f.endpoints) for f in parts.fleets)), dead=lambda: dead(st))
    took += _third_party_ready(inp, parts, st)
    happened.phases.listening_s = round(took, 3)
    log(f"all devices listen ({took:.2f} s)")
    if inp.pushing or parts.push_fleets:   # the targets answer: the setup requests
        for n in inp.pushing:
            rd.push_go(n).touch()
        for f in parts.push_fleets:
            rd.fleet_push_go(f.name).touch()
        took = push_run.wait_setup(inp.resolved, rd,
                                   push_run.first_targets(inp.resolved),
                                   push_run.setup_timeout_s(inp.resolved), dead=lambda: dead(st),
                                   fleets={f.name: f.names for f in parts.push_fleets})
        log(f"every pushing device finished its setup requests ({took:.2f} s)")
    apply_impairments(inp, parts, st)
    return parts


def _third_party_ready(inp: Inputs, parts: Components, st: RunState) -> float:
    """What WoTbench did not build answers a CoAP ping from this host (where the GE runs or
    reaches it; an HTTP->CoAP proxy: a TCP connection), and a proxy forwards; the seconds
    it took."""
    others = [d for d in parts.devices_and_proxy
              if not d.emulated]
    if not others:
        return 0.0
    t = time.monotonic()
    index = {g.group: i for i, g in enumerate(inp.resolved.devices)}

    def key(d: DeviceRun) -> str:
        if d is parts.proxy:
            return thirdparty.PROXY_KEY + (".endpoint" if d.role == "external" else "")
        return f"devices[{index[d.group]}]." + ("external" if d.role == "external" else "server")
    keys = {d.name: key(d) for d in others}
    timeout = max([d.program.ready_timeout_s for d in others if d.program] + [5.0])
    spec = inp.resolved.gateways.proxy
    http_proxy = parts.proxy if spec is not None and spec.http else None
    pinged = [d for d in others if d is not http_proxy]
    if pinged:
        thirdparty.wait_answering(pinged, keys, timeout, dead=lambda: dead(st))
    if parts.proxy is not None:
        first = next(d for d in parts.devices)
        g = next(g for g in inp.resolved.devices if g.group == first.group)
        path = g.paths[0] if g.third_party else "r0"
        host = f"[{first.address}]" if ":" in first.address else first.address
        target = f"coap://{host}:{first.port}/{path}"
        if http_proxy is not None:
            gone = (lambda: _exited(st, parts.proxy.name)) if parts.proxy.started else None
            code = thirdparty.check_http_proxy(parts.proxy, spec.http_prefix, target, timeout,
                                               gone)
        else:
            code = thirdparty.check_proxy(parts.proxy, spec.mode, target)
        log(f"the proxy forwards: {code} for {first.name}/{path}")
    return time.monotonic() - t


def _exited(st: RunState, name: str) -> Optional[str]:
    code = st.held.backend.exited({name}).get(name)
    return None if code is None else f"exited with {code}"


def dead(st: RunState) -> dict[str, str]:
    """Devices (and fleets) that exited (readiness fails at once instead of waiting for its
    timeout)."""
    parts = st.parts
    names = {d.name for d in parts.devices} | {f.name for f in parts.fleets}
    return {n: f"exited with {c}" for n, c in st.held.backend.exited(names).items()}


def impair_duration_s(inp: Inputs, parts: Components) -> float:
    cfg = inp.resolved
    cal = inp.cd.calibration_s if parts.cd_ge else 0.0
    return Timeline(0, cal, cfg.duration_s, cfg.gateways.timeout_ms).impairment_s()


def apply_impairments(inp: Inputs, parts: Components, st: RunState) -> None:
    """netem/pumba: into the running device containers' namespaces (never the CD node)."""
    imp = inp.impair
    if imp is None or imp.backend is None or imp.applied:
        return
    names = [d.name for d in parts.devices if d.role == "device" and imp.plan.get(d.name)]
    log(f"applying network impairments ({imp.name} backend) to {len(names)} device(s)")
    imp.apply(st.held.backend.impairment_targets(names), impair_duration_s(inp, parts))


def remove_impairments(inp: Optional[Inputs]) -> None:
    """After the test, and first thing in the cleanup (idempotent; nothing before the inputs)."""
    imp = inp.impair if inp else None
    if imp is not None and imp.backend is not None and imp.removed is None:
        imp.remove(log)
        if imp.name != "app":
            log(f"network impairments removed ({imp.name} backend)")
