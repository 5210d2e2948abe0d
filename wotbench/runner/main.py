"""``wotbench run`` on one host, and each cell of a run across hosts: one emulation run from the
config to its run directory (paper §4.2 test harness); the analysis and report come after
(:mod:`wotbench.run_command`).

The stages (``Runner.execute``), each ending in a typed value (:mod:`wotbench.runner.stages`):

1. ``prepare() -> Inputs``: the pre-flight (:mod:`wotbench.preflight`, what ``wotbench check``
   runs: every refusal before anything exists -- backend, impairments, host checks, stale
   binaries built, plan, capacity, third-party programs), then the run directory with the
   resolved config, plan.json, trace/, push schedules and the DTLS key (``prepare/inputs.py``);
   run.json ``in_progress``.
2. ``deploy(inputs) -> Components``: what runs, built from the inputs
   (``deployment/build.py``); the backend's images and network, devices, wot-fleet engines and
   the CD node started, readiness (CoAP ping, HTTP, third-party programs), the pushing devices'
   setup, netem/pumba impairments.
3. ``run_test(inputs, parts) -> Timeline``: monitor, hogs, GEs with absolute start times from
   ``during/timeline.py`` (T0 from the cell's coordinator when a :class:`CellSeat` was given),
   the poll loop of ``during/watch.py``; then the impairments removed, the GEs and devices
   SIGTERMed so they write their logs.
4. ``cleanup()`` and run.json, on every path; ``outcome() -> RunOutcome``.

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
import platform
import signal
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Optional

from cd_module import node as cd_node
from wotbench.config import http_spec
from wotbench.config.schema import Config
from wotbench.deploy.resolve import resolve
from wotbench.errors import EnvironmentProblem, WotbenchError
from wotbench.monitor.recorder import Monitor
from wotbench.preflight import preflight
from wotbench.rundir import (ContentionParams, HostRecord, PlanNote, RunDir, RunRecord,
                             TestWindow, Window, disk, ge_journal)
from wotbench.runner import http_phases, notify_sink, push_run, sut_faults
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.deployment import journal, readiness, thirdparty
from wotbench.runner.deployment.build import build_components, share_ids
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.deployment.lease import STOP_MARGIN_S, Lease
from wotbench.runner.during import push_verify
from wotbench.runner.during.hogs import Hogs
from wotbench.runner.during.timeline import Timeline, lead_s
from wotbench.runner.during.watch import GE_STOP_WAIT_S, runtime_gone, watch_test
from wotbench.runner.prepare import dtlskey, hostlimits, inputs, isolation
from wotbench.runner.run_state import Resources, RunLog
from wotbench.runner.stages import CellSeat, Components, Inputs, RunOutcome
from wotbench.stamps import iso_stamp

__all__ = ["CellSeat", "Runner", "RunOutcome", "log"]

STOP_GRACE_S = 15.0       # devices: SIGTERM -> exit (they write their logs)
HARNESS_NICE = 10


def lower_priority(nice: int) -> None:
    """Raise this process's nice value to ``nice`` (never further: runs in a sweep repeat this,
    and an unprivileged process cannot lower it again)."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current < nice:
        os.nice(nice - current)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> Optional[str]:
    """/proc/cpuinfo "model name" of the first CPU (None where the kernel names none)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def evidence_marks(tl: Timeline) -> tuple[list[int], list[int]]:
    """When the monitor reads every component (the evidence windows' edges: T0, the test start,
    every window of the analysis's grid) and scans the host's processes (edges and middles)."""
    w = int(ContentionParams().window_s * 1e9)
    n = int(-(-tl.duration_s * 1e9 // w))
    edges = [tl.t0_ns, tl.test_start_ns] + [tl.test_start_ns + k * w for k in range(1, n + 1)]
    return edges, sorted(set(edges) | {e + w // 2 for e in edges[1:]})


def log(msg: str) -> None:
    print(f"wotbench: {msg}", flush=True)


class Runner:
    """One run, stage by stage (module docstring), each stage taking the previous one's typed
    value: ``prepare() -> Inputs``, ``deploy(Inputs) -> Components``, ``run_test(Inputs,
    Components) -> Timeline``, ``outcome() -> RunOutcome``. Besides what the constructor is
    given (the config, the cell's seat), the runner keeps each stage value the moment it exists,
    ``held`` (:class:`~wotbench.runner.run_state.Resources`, what the cleanup releases on every
    path) and ``happened`` (:class:`~wotbench.runner.run_state.RunLog`, run.json's account)."""

    def __init__(self, config_path, out_root="reports", backend=None,
                 cell: Optional[CellSeat] = None, cfg: Optional[Config] = None):
        """``cfg``: ``config_path`` already read (the dispatcher's or the cell's), else the
        pre-flight reads it; ``cell``: this run is one cell of a run across hosts (its devices
        and T0); ``backend``: the ``--backend`` asked for. Nothing is set from outside later."""
        self.config_path = Path(config_path)
        self.loaded = cfg
        self.out_root = Path(out_root)
        self.requested_backend = backend
        self.cell = cell                    # None: a single-host run (every device, own T0)
        # each stage's value, kept from the moment it exists (the cleanup reads what there is)
        self.inputs: Optional[Inputs] = None      # 1. prepare()
        self.parts: Optional[Components] = None   # 2. deploy()
        self.timeline: Optional[Timeline] = None  # 3. run_test(): T0, calibration, test, deadline
        self.held = Resources(tuning=hostlimits.HostTuning(log))   # released by cleanup()
        self.happened = RunLog()                                   # run.json's account

    @property
    def share(self) -> Optional[frozenset[str]]:
        return self.cell.devices if self.cell else None

    def stage(self, done: str) -> None:
        """A preparation stage ended: a cell says so (its seat's progress); one host is quiet."""
        if self.cell is not None:
            self.cell.progress(done)

    @property
    def rd(self) -> Optional[RunDir]:
        return self.inputs.rd if self.inputs else None

    @property
    def run_dir(self) -> Path | None:
        return self.rd.path if self.rd else None

    # -------------------------------------------------------------- signals
    def _raise_signal(self, signum, frame):
        raise Interrupted(signum)

    def _during_cleanup(self, signum, frame):
        log(f"{signal.Signals(signum).name} received: cleaning up, please wait")

    def _set_handlers(self, handler) -> dict:
        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def _runtime_lost(self, e: Exception) -> Exception:
        """The clear error for an exception that came from a runtime gone under the run."""
        lost = self.held.backend.runtime_lost(probe=True, error=e) if self.held.backend else None
        return runtime_gone(lost, self.run_dir) if lost else e

    def fail(self, component: str, what: str) -> None:
        what += disk.full_note(self.rd.path) if self.rd else ""   # why it could not write
        self.happened.failure(component, what)
        log(f"FAILURE {component}: {what}")

    # -------------------------------------------------------------- main
    def execute(self) -> RunOutcome:
        old = self._set_handlers(self._raise_signal)
        # prepare() pins the harness to the OS cores; a sweep or capacity search runs many tests
        # in this process, and each must plan with the cores the user gave, not the last pin.
        affinity = os.sched_getaffinity(0)
        try:
            try:
                inputs = self.prepare()
                parts = self.deploy(inputs)
                self.run_test(inputs, parts)
                self.remove_impairments()
                self.stop_components(inputs, parts)
            except Interrupted as e:
                self.happened.interrupted = e.signum
                log(f"{e} received: stopping the run")
            except WotbenchError as e:
                self.happened.error = e
            except Exception as e:  # a bug: still clean up, then show the traceback
                self.happened.error = disk.as_problem(e, self.run_dir or self.out_root)
                if self.happened.error is e:   # (a full disk is the host's problem, not a bug)
                    self.happened.error = self._runtime_lost(e)
                if self.happened.error is e:   # (nor a container runtime that went away)
                    traceback.print_exc()
            finally:
                self._set_handlers(self._during_cleanup)
                self.cleanup()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            os.sched_setaffinity(0, affinity)
        return self.outcome()

    # -------------------------------------------------------------- 1-3: inputs
    def prepare(self) -> Inputs:
        # every refusal before anything exists: the same function `wotbench check` runs
        pf = preflight(self.config_path, self.requested_backend, log=log, build=True,
                       share=self.share, loaded=self.loaded,
                       progress=lambda step: self.stage(f"pre-flight: {step}"))
        if pf.impair.backend is not None:
            log(f"network impairments on {len(pf.impair.plan.devices)} device(s): "
                f"{pf.impair.name} backend ({pf.impair.reasons[-1]})")
        self.happened.warnings += pf.warnings
        resolved = pf.resolved or resolve(pf.cfg, pf.plan)
        self.held.tuning.apply(pf.tuning)
        self.isolate(pf)

        rd = inputs.make_run_dir(self.out_root, pf.cfg.name + (f"-{self.cell.node}"
                                                               if self.cell else ""))
        self.inputs = inp = Inputs(kind=pf.kind, connection=pf.connection, impair=pf.impair,
                                   binaries=pf.binaries, cfg=pf.cfg, resolved=resolved,
                                   plan=pf.plan, cd=cd_node.settings(resolved), rd=rd,
                                   share=self.share)
        log(f"run {inp.run_id} ({inp.kind.name} backend) -> {rd.path}")
        inp.impair.set_log_dir(rd.network_dir)
        summary, notes = inputs.write_inputs(rd, resolved, inp.plan, log,
                                             only=share_ids(resolved, self.share),
                                             recorded=pf.recorded)
        self.inputs = inp = replace(inp, trace_summary=summary)
        self.happened.warnings += notes
        self.stage("config, plan and trace written")
        # devices[].push, rendered by the pre-flight: a process device's schedule goes to its
        # directory now, an engine's devices' into the engine's (fleet_runs.build)
        in_engines = push_run.fleet_devices(inp.cfg, pf.push_schedules)
        if pf.push_schedules:
            self.inputs = inp = replace(
                inp, pushing=frozenset(set(pf.push_schedules) - in_engines),
                fleet_push={n: r for n, r in pf.push_schedules.items() if n in in_engines})
            rows = push_run.write_schedules(rd, {n: r for n, r in pf.push_schedules.items()
                                                 if n in inp.pushing})
            log(f"{len(pf.push_schedules)} device(s) push ({len(in_engines)} in engines): "
                f"{sum(rows.values()) + sum(map(len, inp.fleet_push.values()))} request(s) "
                "rendered")
        self.inputs = inp = replace(inp, dtls=dtlskey.write(rd, resolved.dtls,
                                                            inp.kind.needs_docker))
        rd.write_run(self.record(in_progress=True))   # a killed harness leaves it so
        self.stage("inputs prepared")
        if inp.plan.os_cores:  # the harness (and its monitor thread) stays on the OS cores
            os.sched_setaffinity(0, inp.plan.os_cores)
        # Lower the harness's own priority (inherited by its monitor thread and collectl): on a
        # host too small for a dedicated GE core, its once-a-second sampling otherwise delays the
        # GE's wake-ups by milliseconds. Process-backend emulators are put back to 0 at spawn.
        lower_priority(HARNESS_NICE)
        return inp

    def isolate(self, pf) -> None:
        """placement.isolate_cores: the host's work off the run's GE and device cores before
        anything of the run starts (restored by cleanup()); a killed run's isolation is put
        back first either way."""
        if not pf.cfg.placement.isolate_cores:
            note = isolation.clean_stale(log)
            if note:
                log(f"warning: {note}")
                self.happened.warnings.append(note)
            return
        self.held.shield = isolation.CoreShield(log)   # set first: cleanup() restores a part
        self.held.shield.apply(pf.plan.os_cores, isolation.shielded_cores(pf.plan.usable_cores,
                                                                          pf.plan.os_cores),
                               keep=pf.cfg.placement.isolate_except)

    # -------------------------------------------------------------- 4-6: deploy
    def choose_t0(self, lead: float) -> int:
        """T0 on CLOCK_MONOTONIC: ``lead`` seconds from now, or what the cell's seat gives (its
        coordinator's T0); the clock exchange happens there, after the devices answer."""
        if self.cell is not None:
            return self.cell.t0(self.run_dir, lead)
        return time.monotonic_ns() + int(lead * 1e9)

    def _http_targets(self) -> list[tuple[int, str, int]]:
        """(device id, address, port) of every HTTP device: where setup/verify requests go."""
        return [(d.id, d.address, d.port) for d in self.parts.devices if d.protocol == "http"]

    def deploy(self, inp: Inputs) -> Components:
        """Stage 2: what runs, built from the inputs, started and answering."""
        self.parts = parts = build_components(inp)
        self.stage(f"components built ({len(parts.devices)} device(s), "
                   f"{len(parts.fleets)} engine(s), {len(parts.ges)} GE(s))")
        self.held.lease = Lease(self.rd.lease_dir, inp.run_id)
        self.held.lease.start()
        self.held.journal_dir = journal.make_dir(inp.run_id, self.held.lease.path)
        for g in parts.all_ges if self.held.journal_dir else []:
            g.journal = self.held.journal_dir / f"{g.name}.journal"
        self.held.backend = inp.kind.create(inp.run_id, self.rd.path, log, inp.connection)
        for rid in self.held.backend.remove_abandoned():
            self.happened.warnings.append(
                f"removed what run {rid} left behind (its harness was gone)")
        journal.remove_abandoned(log)
        self.happened.other_runs = self.held.backend.other_runs()
        if self.happened.other_runs:
            note = ("another WoTbench run is active on this host ("
                    + ", ".join(f"{rid}: {n} container(s)/process(es)"
                                for rid, n in sorted(self.happened.other_runs.items()))
                    + "); the verdict flags the windows in which it loads this run's cores")
            log(note)
            self.happened.warnings.append(note)
        self.held.backend.prepare(inp.binaries)
        self.held.backend.prepare_programs(thirdparty.programs(inp.resolved))
        self.stage("backend and images ready")
        sut_faults.preflight(inp.resolved.sut_faults, self.held.backend)   # issue 35
        self.held.hogs = Hogs(self.held.backend, inp.run_id, self.rd, log)
        self.held.backend.setup_network(inp.resolved.network.subnet,
                                        {d.container: d.address for d in parts.started_devices}
                                        | {f.name: f.address for f in parts.fleets},
                                        [g.name for g in parts.all_ges])
        self.stage("network set up")
        t = time.monotonic()
        self.held.started = True
        self.held.backend.start_devices(parts.started_devices)
        self.held.backend.start_fleets(parts.fleets)
        if inp.impair.applies_at_start:  # app: the --impair flags are in effect already
            inp.impair.apply([], self._impair_duration_s())
        self.happened.phases.start_devices_s = round(time.monotonic() - t, 3)
        log(f"{len(parts.started_devices) + len(parts.fleets)} component(s) started in "
            f"{self.happened.phases.start_devices_s:.1f} s; "
            + ("waiting for HTTP answers" if http_spec.is_http(inp.resolved)
               else "waiting for CoAP pings"))
        took = readiness.wait_listening(
            [(d.name, self.rd.device_ready(d.name)) for d in parts.devices if d.emulated]
            + [(f.name, self.rd.fleet_ready(f.name)) for f in parts.fleets],
            timeout_s=15 + 0.05 * len(parts.devices) + readiness.fleet_bind_s(
                sum(len(f.endpoints) for f in parts.fleets)), dead=self._dead)
        took += self._third_party_ready()
        self.happened.phases.listening_s = round(took, 3)
        log(f"all devices listen ({took:.2f} s)")
        if inp.pushing or parts.push_fleets:   # the targets answer: the setup requests
            for n in inp.pushing:
                self.rd.push_go(n).touch()
            for f in parts.push_fleets:
                self.rd.fleet_push_go(f.name).touch()
            took = push_run.wait_setup(inp.resolved, self.rd,
                                       push_run.first_targets(inp.resolved),
                                       push_run.setup_timeout_s(inp.resolved), dead=self._dead,
                                       fleets={f.name: f.names for f in parts.push_fleets})
            log(f"every pushing device finished its setup requests ({took:.2f} s)")
        self.apply_impairments()
        return parts

    def _third_party_ready(self) -> float:
        """What WoTbench did not build answers a CoAP ping from this host (where the GE runs or
        reaches it; an HTTP->CoAP proxy: a TCP connection), and a proxy forwards; the seconds
        it took."""
        inp, parts = self.inputs, self.parts
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
            thirdparty.wait_answering(pinged, keys, timeout, dead=self._dead)
        if parts.proxy is not None:
            first = next(d for d in parts.devices)
            g = next(g for g in inp.resolved.devices if g.group == first.group)
            path = g.paths[0] if g.third_party else "r0"
            host = f"[{first.address}]" if ":" in first.address else first.address
            target = f"coap://{host}:{first.port}/{path}"
            if http_proxy is not None:
                gone = (lambda: self._exited(parts.proxy.name)) if parts.proxy.started else None
                code = thirdparty.check_http_proxy(parts.proxy, spec.http_prefix, target, timeout,
                                                   gone)
            else:
                code = thirdparty.check_proxy(parts.proxy, spec.mode, target)
            log(f"the proxy forwards: {code} for {first.name}/{path}")
        return time.monotonic() - t

    def _exited(self, name: str) -> Optional[str]:
        code = self.held.backend.exited({name}).get(name)
        return None if code is None else f"exited with {code}"

    def _dead(self) -> dict[str, str]:
        """Devices (and fleets) that exited (readiness fails at once instead of waiting for its
        timeout)."""
        parts = self.parts
        names = {d.name for d in parts.devices} | {f.name for f in parts.fleets}
        return {n: f"exited with {c}" for n, c in self.held.backend.exited(names).items()}

    def _impair_duration_s(self) -> float:
        inp, parts = self.inputs, self.parts
        cfg = inp.resolved
        cal = inp.cd.calibration_s if parts.cd_ge else 0.0
        return Timeline(0, cal, cfg.duration_s, cfg.gateways.timeout_ms).impairment_s()

    def apply_impairments(self) -> None:
        """netem/pumba: into the running device containers' namespaces (never the CD node)."""
        inp, parts = self.inputs, self.parts
        imp = inp.impair
        if imp is None or imp.backend is None or imp.applied:
            return
        names = [d.name for d in parts.devices if d.role == "device" and imp.plan.get(d.name)]
        log(f"applying network impairments ({imp.name} backend) to {len(names)} device(s)")
        imp.apply(self.held.backend.impairment_targets(names), self._impair_duration_s())

    def remove_impairments(self) -> None:
        imp = self.inputs.impair if self.inputs else None
        if imp is not None and imp.backend is not None and imp.removed is None:
            imp.remove(log)
            if imp.name != "app":
                log(f"network impairments removed ({imp.name} backend)")

    # -------------------------------------------------------------- 7-9: test
    def run_test(self, inp: Inputs, parts: Components) -> Timeline:
        """Stage 3: the monitor, the hogs, the GEs on the run's timeline, the poll loop; returns
        the timeline the test ran on."""
        cfg = inp.resolved
        # per-component CPU accounting always; collectl only with monitor.enabled
        self.held.monitor = Monitor(self.rd, cfg.monitor.interval_s,
                                    cpus=inp.plan.os_cores or None,
                                    collectl=cfg.monitor.enabled, log=log, run_id=inp.run_id,
                                    run_cores=set(inp.plan.usable_cores),
                                    lookup=self.held.backend.container_info)
        self.held.monitor.start()
        for d in parts.started_devices:
            self._watch(d.name, d.role, d.group if d.role == "device" else None)
        for f in parts.fleets:
            self._watch(f.name, "fleet", f.req.group)

        if cfg.gateways.http is not None and cfg.gateways.http.setup is not None:   # issue 35
            done = http_phases.run("setup", cfg, self._http_targets(), self.rd.path / "phases" /
                                   "setup", log)
            if done.failed:
                raise EnvironmentProblem(
                    f"gateways.http.setup: {done.failed} of {done.requests} requests were not "
                    "answered 2xx (phases/setup/ge/requests.csv has each one's status); the run "
                    "stops before T0")
        if cfg.notify is not None:   # issue 35: subscriptions hold before any update
            self.held.sink = notify_sink.start(
                cfg, self.rd.path / "sink", {d.name: (d.address, d.port) for d in parts.devices},
                cfg.duration_s + 60 + cfg.gateways.timeout_ms / 1000, log)
        all_ges = parts.all_ges
        n_main = 1 if parts.proxy else sum(1 for d in parts.devices if d.role != "cd-node")
        # a GE pings the engine devices of its own share of the trace (device id mod count);
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
        self.timeline = tl = Timeline(
            self.choose_t0(lead_s(len(all_ges), inp.kind.ge_start_lead_s,
                                  inp.trace_summary.requests) + warm_s),
            inp.cd.calibration_s if parts.cd_ge else 0.0, cfg.duration_s,
            cfg.gateways.timeout_ms)
        self.held.monitor.align(*evidence_marks(tl))
        self.held.lease.set_deadline(tl.deadline_ns + int(STOP_MARGIN_S * 1e9))
        if parts.cd_ge:
            parts.cd_ge.start_at = tl.t0_ns
        for g in parts.ges:
            g.start_at = tl.test_start_ns
        push_run.write_start(self.rd, sorted(inp.pushing), tl.test_start_ns,
                             tuple(f.name for f in parts.push_fleets))
        # the timeline and what runs: what the analysis of a killed run needs
        self.rd.write_run(self.record(in_progress=True))
        self.happened.contention = self.held.hogs.launch(inp.resolved, inp.plan, tl.test_start_ns)
        for g in all_ges:
            self.held.backend.create_ge(g)
        for g in ([parts.cd_ge] if parts.cd_ge else []) + parts.ges:
            self.held.backend.start_ge(g)
            self._watch(g.name, g.role)
        late = time.monotonic_ns() - tl.t0_ns
        if late > 0:
            self.happened.warnings.append(
                f"gateways started {late / 1e6:.0f} ms after T0: increase the lead")
        warm = readiness.wait_warm(
            [(g.name, self.rd.ge_warmup(g.name)) for g in all_ges if g.warmup_ms],
            {f"{d.address}:{d.port}": d.name for d in parts.devices_and_proxy}
            | {e: n for f in parts.fleets for e, n in f.endpoints.items()},
            tl.t0_ns, dead=self._dead,
            ge_gone=lambda name: self.held.backend.exit_code(name) is not None)
        if warm:
            self.happened.phases.warmup_s = max(w.took_ms for w in warm.values()) / 1000
            log("every device answers its gateway emulator's "
                + ("CoAP ping or HTTP connections (" if http_spec.is_http(cfg) else "CoAP ping (")
                + ", ".join(f"{g}: {w.took_ms:.0f} ms" for g, w in warm.items()) + ")")
        log(f"T0 in {(tl.t0_ns - time.monotonic_ns()) / 1e9:.1f} s: calibration "
            f"{tl.calibration_s:g} s, then the test for {cfg.duration_s:g} s")
        faults = cfg.sut_faults or []   # issue 35: a killed server's death is expected
        if faults:
            self.held.faults = sut_faults.FaultRunner(self.held.backend, faults, tl.test_start_ns,
                                                      self.rd.path / "sut-faults.json", log,
                                                      sut_faults.device_runs(parts),
                                                      on_restarted=self._watch_again)
            self.held.faults.start()
        killed = sut_faults.unwatched(faults)   # killed or restarted: their exit is expected
        self.happened.ge_exit.update(watch_test(self.held.backend, self.rd, parts.ges,
                                                parts.cd_ge, {d.name for d in parts.devices}
                                                - killed | {f.name for f in parts.fleets}, tl,
                                                self.fail, self._ge_failed))
        if self.held.faults is not None:
            self.held.faults.finish()
        return tl

    def _watch_again(self, name: str) -> None:
        """A restarted server (sut_faults restart): its new processes accounted from now on."""
        d = next((d for d in self.parts.devices if d.name == name), None)
        if d is not None:
            self._watch(d.name, d.role, d.group if d.role == "device" else None)

    def _watch(self, name: str, role: str, group: str | None = None) -> None:
        """Account the component's CPU: its own cgroup when it has one, else its threads."""
        cgroup = self.held.backend.cgroup(name)
        pid = None if cgroup else self.held.backend.pid(name)
        if cgroup or pid:
            self.held.monitor.watch(name, role, pid=pid, cgroup=cgroup, group=group)

    def _ge_failed(self, g: GeRun, code: int, running: dict[str, GeRun]) -> None:
        self.happened.ge_died_ns.setdefault(g.name, time.monotonic_ns())
        out = self.rd.ge_container_log(g.name)
        self.held.backend.save_output(g.name, out)
        why = {2: "rejected its input (exit 2)", 1: "environment failure (exit 1)"}.get(
            code, f"exited with {code}")
        self.fail(g.name, f"gateway emulator {why}; see {self.rd.rel(out)}"
                  if out.exists() else f"gateway emulator {why}")
        if code == 2:
            self.happened.exit_hint = 2
        if g.role == "ge":  # a main GE is gone: the test is compromised, stop the rest
            self.happened.aborted = True
            for name in list(running):
                self.held.backend.signal(name, signal.SIGTERM)

    # -------------------------------------------------------------- 10: stop
    def stop_components(self, inp: Inputs, parts: Components) -> None:
        """Stop GEs that still run, then SIGTERM every device and wait for its logs. Components
        never created (deploy failed first) are skipped: pid() is None for such a GE, created()
        False for such a device."""
        if self.held.backend is None:
            return
        rd = inp.rd
        running = [g.name for g in parts.all_ges
                   if self.held.backend.pid(g.name) and self.held.backend.exit_code(g.name) is None]
        for name, code in self.held.backend.stop(running, GE_STOP_WAIT_S).items():
            self.happened.ge_exit.setdefault(name, code)
        if self.held.sink is not None and self.held.sink.stop() not in (0, None):
            self.fail("notify-sink",
                      f"exited with {self.held.sink.proc.returncode} (sink/sink.log)")
        h = inp.resolved.gateways.http if inp.resolved is not None else None
        if h is not None and h.verify is not None and not self.happened.stopped:
            http_phases.run("verify", inp.resolved, self._http_targets(),
                            rd.path / "phases" / "verify", log)   # judged by the analysis
        names = [d.name for d in parts.started_devices if self.held.backend.created(d.name)]
        already = self.held.backend.exited(set(names))
        alive = [n for n in names if n not in already]
        third_party = {d.name for d in parts.started_devices if d.program is not None}
        self._drain_push(inp, parts)
        self._verify_push(inp, parts)
        t = time.monotonic()
        # pushing devices first: their teardown requests need the servers they registered with
        first = [n for n in alive if n in inp.pushing]
        codes = self.held.backend.stop(first, STOP_GRACE_S) if first else {}
        self._stop_fleets(rd, parts.push_fleets)
        codes.update(self.held.backend.stop([n for n in alive if n not in inp.pushing],
                                            STOP_GRACE_S))
        self._stop_fleets(rd, [f for f in parts.fleets if f not in parts.push_fleets])
        self.happened.phases.stop_s = round(time.monotonic() - t, 3)
        for n in alive:
            code = codes.get(n)
            if code is None:
                self.held.backend.signal(n, signal.SIGKILL)
                self.fail(n, f"did not stop within {STOP_GRACE_S:g} s of SIGTERM; killed, "
                          "its device log is lost")
            elif code != 0 and not (code == 128 + signal.SIGTERM and n in third_party):
                # (a third-party program may simply die of the SIGTERM: a normal stop)
                self.fail(n, f"exited with {code} after SIGTERM")
        self._salvage_ges(parts)
        reported = {f["component"] for f in self.happened.failures}
        for d in parts.started_devices:
            if not self.held.backend.created(d.name):
                continue    # never created: nothing to stop, no output to save
            if d.name in reported or d.name in already or not d.emulated:
                self.held.backend.save_output(d.name, rd.device_container_log(d.name))
            if d.emulated and d.name not in reported and not rd.device_log(d.name).exists():
                self.fail(d.name, "no device-log.csv written")

    def _stop_fleets(self, rd: RunDir, fleets: list[FleetRun]) -> None:
        """SIGTERM these engines and wait for their files (fleet logs of many devices take longer
        than one device's); a failed engine is a failure, its output kept."""
        if not fleets:
            return
        names = [f.name for f in fleets if self.held.backend.created(f.name)]
        already = self.held.backend.exited(set(names))
        alive = [n for n in names if n not in already]
        codes = dict(already)
        if alive:
            codes.update(self.held.backend.stop(alive, fleet_runs.stop_grace_s(fleets)))
        for f in fleets:
            if f.name not in codes:
                continue
            code = codes[f.name]
            if code is None:
                self.held.backend.signal(f.name, signal.SIGKILL)
                self.fail(f.name, "did not stop after SIGTERM; killed, its fleet logs are lost")
            elif code != 0:
                self.fail(f.name, f"wot-fleet exited with {code}" + (
                    " before the stop" if f.name in already else " after SIGTERM"))
            elif not rd.fleet_summary(f.name).exists():
                self.fail(f.name, "no fleet-summary.json written")
            if code != 0:
                self.held.backend.save_output(f.name, rd.fleet_container_log(f.name))

    def _drain_push(self, inp: Inputs, parts: Components) -> None:
        """The pushing devices' last test requests get their timeout to be answered (the GEs
        may finish sooner): a SIGTERM earlier would end them as errors."""
        tl = self.timeline
        if not (inp.pushing or parts.push_fleets) or self.happened.stopped \
                or tl is None:
            return
        end = tl.test_end_ns + inp.resolved.gateways.timeout_ms * 1_000_000
        wait_s = (end - time.monotonic_ns()) / 1e9
        if wait_s > 0:
            log(f"waiting {wait_s:.1f} s for the answers to the devices' last requests (timeout)")
            time.sleep(wait_s)

    def _verify_push(self, inp: Inputs, parts: Components) -> None:
        """devices[].push phase verify (e.g. an RD lookup): after a completed test, before the
        devices deregister."""
        if not (inp.pushing or parts.push_fleets) or self.happened.stopped \
                or self.timeline is None or self.happened.push_verify:
            return
        try:
            self.happened.push_verify = push_verify.verify(inp.resolved)
        except OSError as e:      # e.g. no socket for the client context: the run stays valid
            self.happened.warnings.append(f"devices[].push verify: could not ask the targets: {e}")
            return
        for v in self.happened.push_verify:
            log(v.describe())

    def _salvage_ges(self, parts: Optional[Components]) -> None:
        """A GE that died without writing its files: write them from its journal."""
        for g in parts.all_ges if parts else []:
            if not ge_journal.salvage_needed(g.out_dir, g.journal):
                continue
            died = self.happened.ge_died_ns.get(g.name, time.monotonic_ns())
            try:
                counts = ge_journal.salvage(g.journal, g.trace, g.out_dir, g.name, died, {
                    "wait": g.wait, "type": g.msg_type, "retransmit": g.retransmit})
            except (ge_journal.JournalError, OSError, WotbenchError) as e:
                self.fail(g.name, f"gateway emulator died and its journal cannot be read: {e}")
                continue
            note = (f"{g.name} died before writing its results: requests.csv and summary.json "
                    "were written from its journal ("
                    + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ")")
            log(note)
            self.happened.warnings.append(note)

    # -------------------------------------------------------------- cleanup + run.json
    def cleanup(self) -> None:
        self.remove_impairments()   # before the containers go (netem needs their namespaces)
        if self.happened.stopped and self.held.backend is not None and self.held.started:
            try:
                self.stop_components(self.inputs, self.parts)
            except Exception as e:
                log(f"stopping components failed: {e}")
        if self.held.sink is not None:   # stopped already unless the run failed before that
            self.held.sink.stop()
        if self.held.faults is not None:   # a paused server continues, so that it can stop
            self.held.faults.finish()
        if self.held.hogs is not None:
            self.held.hogs.stop()
        if self.held.monitor is not None:
            self.held.monitor.stop()
        if self.held.backend is not None:
            t = time.monotonic()
            try:
                removed = self.held.backend.cleanup()
                log("removed " + ", ".join(f"{v} {k}" for k, v in removed.items()))
            except Exception as e:
                log(f"cleanup failed: {e}; run `wotbench clean`")
            self.happened.phases.teardown_s = round(time.monotonic() - t, 3)
        try:   # stop_components salvages a dead GE's journal; not if it failed before that
            self._salvage_ges(self.parts)
        except Exception as e:  # noqa: BLE001 - never let it stop the cleanup
            log(f"salvaging a gateway emulator's journal failed: {e}")
        journal.remove_dir(self.held.journal_dir)
        if self.held.lease is not None:   # after the components: a renewal gap would stop them
            self.held.lease.release()
        self.held.tuning.restore()
        if self.held.shield is not None:   # after the run's own containers and processes
            try:
                self.held.shield.restore()
            except Exception as e:  # noqa: BLE001 - the state file stays for `wotbench clean`
                log(f"restoring the core isolation failed: {e}; run `wotbench clean` as root")
        if self.rd is not None:
            dtlskey.remove(self.rd)
            self.rd.write_run(self.record())

    def host_record(self) -> HostRecord:
        u = os.uname()
        return HostRecord(hostname=u.nodename, kernel=u.release, machine=u.machine,
                          cpus=os.cpu_count(), python=platform.python_version(),
                          harness_cpus=sorted(os.sched_getaffinity(0)), cpu_model=cpu_model(),
                          **(self.held.backend.describe() if self.held.backend else {}))

    def record(self, in_progress: bool = False) -> RunRecord:
        """run.json: what was deployed and what happened, so far (every path writes it at the
        end; ``in_progress`` at the start)."""
        inp, rd, tl, h = self.inputs, self.rd, self.timeline, self.happened
        parts = self.parts or Components(devices=[], fleets=[], ges=[])   # before the deploy
        cd_on = bool(inp.cd and parts.cd_ge)
        return RunRecord(
            name=inp.cfg.name, run_id=inp.run_id, backend=inp.kind.name, host=self.host_record(),
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
            networks=self.held.backend.network_record() if self.held.backend else [],
            plan=PlanNote(faithful=inp.plan.faithful, warnings=inp.plan.warnings),
            contention=h.contention,
            network=inp.impair.record(rd, fleet_runs.impair_counters(rd, parts.fleets)),
            host_tuning=self.held.tuning.record(), phases=h.phases,
            isolation=self.held.shield.record() if self.held.shield else None,
            failures=h.failures, warnings=h.warnings, other_runs=h.other_runs,
            push_verify=h.push_verify, interrupted=h.interrupted is not None, aborted=h.aborted,
            error=str(h.error) if h.error else None, written_at_utc=iso_stamp(),
            in_progress=in_progress)

    def outcome(self) -> RunOutcome:
        """How the run ended, for the ``run`` verb (:mod:`wotbench.run_command`)."""
        h = self.happened
        return RunOutcome(run_dir=self.run_dir, interrupted=h.interrupted, error=h.error,
                          aborted=h.aborted, exit_hint=h.exit_hint, failures=len(h.failures),
                          report=bool(self.inputs and self.inputs.resolved.report.enabled))

