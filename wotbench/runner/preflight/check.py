"""The run's pre-flight: every refusal ``wotbench run`` can make before T0 from the config and
this host, in one function. ``wotbench check`` calls it and prints what it checked;
``wotbench run`` calls it first and goes on with what it found (the backend, its connection,
the impairment backend, the adapted config, the plan), so the two cannot disagree.

Steps, in order (``host``: needs this host, skipped by ``--offline``, which says so):
  config         the schema and the cross-block rules (wotbench.configfile.yaml_loader)
  trace          a recorded trace: every line of it and of its resource files
  backend        host: the runtime (Docker, or local processes) answers
  impairments    host: a backend for devices[].network that this host and the devices have
  clients        host: gateways.clients fit the GE's descriptors and ports
  prerequisites  host: the doctor's quick checks (binaries, cgroups, tables, leftovers)
  device binary  host: wot-device knows --impair when the app backend impairs
  layout         host: the backend's limits (Docker: tasks, dockerd files, conntrack), subnet
  plan           host: the cores (placement.cpus)
  isolation      host: whether the run's cores can be shielded here (placement.isolate_cores:
                 root, the workqueue cpumask; refused when asked for and not possible)
  capacity       host: tasks, descriptors, memory, device cores for the request rate;
                 wot-fleet engines (wotbench.deploy.fleet_capacity)
  contention     host: the contention episodes' cores are the plan's
  push           host: every pushing device's schedule renders (its targets' addresses)
  kernel tables  host: neighbour table, backlog, conntrack for engines (raised as root,
                 else a refusal)
  programs       host: third-party programs, their files, images, `check:` of their configs
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from wotbench.config.connected import connected_groups
from wotbench.config.backend_choice import runs_on_swarm
from wotbench.configfile.yaml_loader import load_config
from wotbench.config.schema import Config
from wotbench.deploy import fleet, fleet_capacity
from wotbench.deploy.addressing import DEVICES_PER_BLOCK
from wotbench.deploy.plan import Plan, make_plan
from wotbench.deploy.resolve import resolve
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.runner.preflight import capacity, programs
from wotbench.runner.prepare import binaries, clientlimits, hostlimits, inputs, isolation
from wotbench.runner import push_run
from wotbench.runner.deployment import thirdparty
from wotbench.runner.backends.interface import BackendKind
from wotbench.runner.backends.docker.scalelimits import (CONNTRACK_PER_DEVICE,
                                                         CONNTRACK_PER_FLEET_DEVICE)
from wotbench.runner.during.hogspec import episodes_for_run
from wotbench.runner.deployment.impair import Impairments

Log = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    name: str
    host: bool        # it needed this host (not the config alone)
    detail: str
    skipped: bool = False


@dataclass
class Preflight:
    """What the checks found; a run goes on with it (None where a step was skipped)."""
    loaded: Config                       # as the file says
    cfg: Optional[Config] = None         # adapted to the backend (its subnet)
    kind: Optional[BackendKind] = None
    explicit: bool = False               # the backend was chosen, not auto
    connection: Optional[Any] = None
    impair: Optional[Impairments] = None
    plan: Optional[Plan] = None
    resolved: Optional[Config] = None    # with the plan's addresses and cores (if needed)
    push_schedules: dict[str, list] = field(default_factory=dict)   # devices[].push rows
    tuning: list[hostlimits.Sysctl] = field(default_factory=list)   # to raise for the run
    binaries: dict[str, Path] = field(default_factory=dict)   # built (``build``): name -> path
    recorded: Optional[tuple[Any, Any]] = None   # a recorded trace, read and checked
    warnings: list[str] = field(default_factory=list)   # recorded with the run
    steps: list[Step] = field(default_factory=list)


def preflight(config_path, backend: Optional[str] = None, *, offline: bool = False,
              log: Log = lambda _m: None, build: bool = False,
              share: capacity.Share = None, loaded: Optional[Config] = None,
              progress: Log = lambda _step: None) -> Preflight:
    """Check ``config_path`` for a run on this host (``backend``: the command line's); raise
    the refusal (ConfigError, EnvironmentProblem) ``run`` would make. ``build``: build stale
    binaries first (``run``; ``check`` checks the ones there and says what a run would build);
    ``share``: the devices a cell of a run across hosts runs here (capacity counts those);
    ``loaded``: ``config_path`` already read by the caller (read here otherwise);
    ``progress``: called with each host step's name as it ends (a cell logs them)."""
    cfg = loaded if loaded is not None else load_config(config_path)
    if connected_groups(cfg):     # docs/CONNECTED.md: only `wotbench run`/`check` take them yet
        raise ConfigError([f"devices[].protocol: {connected_groups(cfg)[0].protocol}: connected "
                           "device groups run with `wotbench run CONFIG` (its own timeline, "
                           "docs/CONNECTED.md); sweep, capacity and the cluster do not run them "
                           "yet"], str(config_path))
    pf = Preflight(loaded=cfg)
    pf.steps.append(Step("config", False, "schema and cross-block rules"))
    if cfg.trace is not None:
        from wotbench.workload.generate import check_recorded
        from wotbench.workload.trace_push import device_lines
        pf.recorded = check_recorded(cfg)     # the run imports what was read here
        device_lines(cfg)         # the lines the devices send themselves (>METHOD)
        pf.steps.append(Step("trace", False, f"every line of {cfg.trace.file} and its "
                                             "resource files"))
    if offline:
        pf.steps.append(Step("host", True, "skipped (--offline): backend, impairments, "
                             "prerequisites, cores, capacity, programs and their configs are "
                             "not checked", skipped=True))
        return pf
    if runs_on_swarm(cfg, backend):
        pf.steps.append(Step("host", True, "skipped (backend: swarm): each node checks its cell "
                             "when the run starts (docs/CLUSTER.md)", skipped=True))
        return pf
    _host(pf, config_path, backend, log, build, share, progress)
    return pf


def _host(pf: Preflight, config_path, backend: Optional[str], log: Log, build: bool,
          share: capacity.Share, progress: Log) -> None:
    cfg = pf.loaded

    def add(step: Step) -> None:
        pf.steps.append(step)
        progress(step.name)

    pf.kind, pf.explicit, pf.connection = inputs.select_kind(backend or cfg.backend, log)
    add(Step("backend", True, f"{pf.kind.name}" + ("" if pf.explicit else " (backend: auto)")))
    # network impairments: choose the backend before anything is created (fail early)
    pf.impair = Impairments.select(cfg, pf.kind, pf.explicit,
                                   options=pf.kind.impairment_options(pf.connection))
    thirdparty.check_impairments(cfg, pf.impair.name)
    add(Step("impairments", True, f"{pf.impair.name} backend ({pf.impair.reasons[-1]})"
             if pf.impair.backend is not None else "none configured"))
    clientlimits.check(cfg, docker=pf.kind.needs_docker)
    add(Step("clients", True, f"{cfg.gateways.clients} GE client sockets fit its descriptors and "
                              "ephemeral ports" if cfg.gateways.clients is not None
             else "no gateways.clients: nothing to check"))
    pf.warnings += inputs.check_host(pf.kind, pf.connection, log)
    add(Step("prerequisites", True, "binaries, cgroups, kernel tables, leftovers (the quick "
                                    "checks of `wotbench doctor`)"))
    if build:
        in_fleets = any(fleet.is_fleet(cfg, i) for i in range(len(cfg.devices)))
        pf.binaries = binaries.ensure_binaries(log, hog=bool(cfg.contention), fleet=in_fleets)
    device = pf.binaries.get("wot-device") or _device_binary()
    if pf.impair.name != "app":
        add(Step("device binary", True, "no app-level impairments: nothing to check"))
    elif device is None:
        add(Step("device binary", True, "skipped: wot-device is missing or older than its "
                 "sources; a run builds it, then checks that it knows --impair", skipped=True))
    else:
        pf.impair.check_device_binary(device)
        add(Step("device binary", True, f"{device} knows --impair"))
    pf.cfg, notes = pf.kind.adapt(cfg, pf.connection)
    for n in notes:
        log(n)
    pf.warnings += notes
    add(Step("layout", True, f"network {pf.cfg.network.subnet}"
             + ("; Docker's limits for the containers" if pf.kind.needs_docker else "")))
    pf.plan = make_plan(pf.cfg)
    add(Step("plan", True, f"{len(pf.plan.usable_cores)} usable core(s), "
                           f"{len(pf.plan.device_cores)} for the devices"))
    add(Step("isolation", True, _isolation(pf.cfg, pf.plan)))
    found = capacity.problems(pf.cfg, pf.plan, capacity.host_limits(), share)
    if found:
        raise EnvironmentProblem("this host cannot carry the run:\n  " + "\n  ".join(found))
    fleet_capacity.check(pf.cfg, pf.plan, pf.kind.fleet_nofile_hard(), share)   # the engines
    add(Step("capacity", True, "tasks, file descriptors, memory and the device cores' request "
                               "rate (docs/PREFLIGHT.md); wot-fleet engines (docs/FLEET.md)" + (
                                   "; a recorded trace's rate is not counted"
                                   if cfg.trace is not None else "")))
    if pf.cfg.contention or push_run.push_devices(pf.cfg):   # (resolving sizes the CD: scipy)
        pf.resolved = resolve(pf.cfg, pf.plan)
    if pf.cfg.contention:     # the episodes' cores against the plan's
        episodes_for_run(pf.resolved, pf.plan, 0)
    add(Step("contention", True, f"{len(pf.cfg.contention)} episode(s) on the plan's cores"
             if pf.cfg.contention else "no contention episodes: nothing to check"))
    if pf.resolved is not None:
        pf.push_schedules = push_run.render_schedules(pf.resolved, Path(config_path).parent)
    add(Step("push", True, f"{len(pf.push_schedules)} device schedule(s) rendered"
             if pf.push_schedules else "no pushing devices: nothing to render"))
    pf.tuning = _tuning(pf.cfg, pf.plan, pf.kind, share)
    add(Step("kernel tables", True, ", ".join(f"{s.name} {s.before} -> {s.wanted} (as root, "
                                              "for the run)" for s in pf.tuning) or "large enough"))
    keys = programs.check(pf.cfg, pf.kind, pf.connection)
    add(Step("programs", True, ", ".join(keys) + ": present, their files and configs checked"
             if keys else "no third-party programs: nothing to check"))


def _isolation(cfg: Config, plan: Plan) -> str:
    """Whether ``placement.isolate_cores`` can work on this host; its refusal when the config
    asks for it and it cannot."""
    reason = isolation.why_not()
    left = (f"; a killed run left the host isolated ({isolation.STATE_FILE}): the next run or "
            "`wotbench clean` restores it" if isolation.STATE_FILE.exists() else "")
    if not cfg.placement.isolate_cores:
        return (f"off ({isolation.KEY}); " + (f"not possible here: {reason}" if reason else
                "possible here (root, a writable workqueue cpumask)")) + left
    if reason:
        raise isolation.refusal(reason)
    shielded = isolation.shielded_cores(plan.usable_cores, plan.os_cores)
    return (f"on: for the run, core(s) {','.join(map(str, sorted(shielded)))} kept free of the "
            f"host's work, which goes to core(s) {','.join(map(str, plan.os_cores))}") + left


def _device_binary() -> Optional[Path]:
    """wot-device as ``check`` finds it (None when a run would build it first: the
    prerequisites step says so)."""
    b = binaries.DEVICE.binary()
    return b if b.exists() and not binaries.is_stale(binaries.DEVICE) else None


def _tuning(cfg: Config, plan: Plan, kind: BackendKind,
            share: capacity.Share = None) -> list[hostlimits.Sysctl]:
    """The kernel settings too small for this run, or for ``share`` (a cell's devices: what
    this node carries); the kernel's neighbour table serves every network namespace. Without
    root, the refusal ``HostTuning.apply`` would make."""
    if not kind.container_namespaces:
        return []
    # an engine's devices share its container's address: one bridge port a fleet, and one
    # neighbour path for each GE that sends to one of its devices (device id mod count; in a
    # cell, rank in the share mod count, workload.ge_share: consecutive ids reach min(GEs,
    # devices) GEs either way); a cell counts its own engines (share) and its own GEs
    fleets = fleet_capacity.of_share(cfg, fleet_capacity.requirements(cfg, plan), share)
    here = [capacity.devices_here(g, share) for g in cfg.devices]
    total = sum(here)
    in_fleets = sum(n for gi, n in enumerate(here) if fleet.is_fleet(cfg, gi))
    ges = cfg.gateways.count
    hosts = total + 1 - in_fleets + len(fleets)
    paths = total + 1 - in_fleets + sum(min(ges, r.devices) for r in fleets)
    ports = min(hosts, DEVICES_PER_BLOCK) + ges + 1
    flows = (CONNTRACK_PER_FLEET_DEVICE * in_fleets
             + CONNTRACK_PER_DEVICE * (total - in_fleets))
    plan = hostlimits.neighbour_plan(paths, ges + 1) \
        + hostlimits.backlog_plan(ports) + (hostlimits.conntrack_plan(flows) if fleets else [])
    if plan and os.geteuid() != 0:
        raise hostlimits.refusal(plan)
    return plan
