"""What each wot-fleet engine process of a run needs, and whether the host gives it.

:func:`requirements` turns a config (and its placement plan) into one :class:`FleetRequirement`
per fleet: its devices, loops, log capacity, file descriptors, memory and task limits, the
addresses and ports it binds, the request rate it serves. The runner sizes each fleet's
command line and container limits from it; :func:`problems` compares the totals with a host
(:class:`HostFacts`) and names the limit and the fix. ``wotbench check``/``plan`` and the
shared pre-flight (wotbench.runner.preflight, branch preflight) call :func:`problems` beside
their process-device arithmetic; fleet devices add none of the per-process costs (tasks, a
container each) that the process form has.

Per-device costs (docs/FLEET.md "Measured"): memory is planned at the contract's target, 16 KiB
per device (engine RSS plus the kernel's socket; ``make bench-fleet`` measured 5.0 KiB at
100 000 devices, so the limit leaves room for queued datagrams), the loop rate at 20 000
requests/s per loop core (measured: 49 us of engine CPU per request).
"""
from __future__ import annotations

import ipaddress
import math
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

from wotbench.config.schema import MAX_FLEET_PER_CONTAINER, Config
from wotbench.deploy import fleet
from wotbench.config.schema import device_name
from wotbench.deploy.addressing import COAP_PORT
from wotbench.deploy.plan import Plan, parse_cpuset
from wotbench.deploy import pods
from wotbench.deploy.pods import slots
from wotbench.deploy.memo import per_config
from wotbench.errors import ConfigError, EnvironmentProblem

BYTES_PER_DEVICE = 16 * 1024        # engine RSS + kernel UDP socket per device (contract target)
BASE_BYTES = 32 * 1024 * 1024       # the engine's code, resource tables, stacks
LOG_ROW_BYTES = 96                  # one preallocated fleet-log row (11 x 8-byte fields + slack)
LOG_HEADROOM = 1.5                  # rows preallocated per expected request (Poisson bursts)
MIN_LOG_ROWS = 10_000
FDS_PER_LOOP = 4                    # epoll, timerfd, eventfd to the workers, its log file
FDS_BASE = 16                       # stdio, the devices file, resource files being read, ready
TASKS_BASE = 4                      # main thread and margin
# what one loop core serves at most: the engines used 49 us of CPU per request in the
# 100 000-device bench (17.1 CPU-s for 349 307 piggy-backed sleep requests, binding and warm-up
# included; docs/FLEET.md), so about 20 000/s with nothing else on the core
REQS_PER_LOOP_S = 20_000
LOOPS_PER_CORE = 1
GE_MAX_ENDPOINTS = 65535            # gateway-emulator: distinct endpoints per GE (trace.c)
NOFILE_MARGIN = 64                  # descriptors kept free below the hard limit
PROCESS_SUBNET = "127.0.0.0/16"     # a process-backend run's loopback block (loopslot.subnet)
MAX_LOOPBACK_PORTS = 8              # process backend: ports 5683.. per address when they run out


@dataclass(frozen=True)
class FleetRequirement:
    """One engine process (a container on Docker) and what it needs."""
    name: str               # <group>-fleet<j>
    group: str
    first_id: int           # global device index of its first device
    devices: int
    cpuset: str             # from the placement plan
    loops: int              # --loops: one per core of its cpuset
    workers: int            # --workers (busy mode): one per loop
    rate_per_s: float       # requests/s its devices are sent (the group's rate, its share)
    log_capacity: int       # --log-capacity: rows preallocated per loop
    nofile: int             # RLIMIT_NOFILE it needs: a socket per device + its own
    memory_bytes: int       # container memory limit
    pids: int               # container pids limit
    addresses: int          # distinct addresses it binds (1 on Docker, one per device on loopback)
    first_port: int
    last_port: int

    @property
    def rate_per_loop_s(self) -> float:
        return self.rate_per_s / self.loops


@dataclass(frozen=True)
class HostFacts:
    """What a host offers a run (the pre-flight reads these; tests give them)."""
    mem_available_bytes: int
    nofile_hard: Optional[int] = None   # the harness's RLIMIT_NOFILE hard limit (process backend)
    file_max: Optional[int] = None      # fs.file-max


def _rate_per_device(cfg: Config, gi: int) -> float:
    """Requests and notifications per second of one device of group ``gi``: both cost the
    engine's loop and a preallocated log row (fleet-log / fleet-notify)."""
    g = cfg.devices[gi]
    mean = g.rit.mean or 0.0
    rate = 1000.0 / mean if g.requests and mean > 0 else 0.0
    if g.observe is not None:
        period = g.observe.period_ms or (g.observe.interval.mean if g.observe.interval else 0)
        if period:
            rate += g.observe.observers * 1000.0 / period
    return rate


class _Span(NamedTuple):
    """One engine's devices in the layout: its group, first device id, how many, top port."""
    container: str
    group: str
    first_id: int
    devices: int
    top_port_offset: int


@per_config
def _spans(cfg: Config) -> list[_Span]:
    """Every engine's span, in config order: one walk of the layout per config (a cell of a
    10^6-device run asked four times, 5 s each)."""
    fleet_groups = {g.group for gi, g in enumerate(cfg.devices) if fleet.is_fleet(cfg, gi)}
    if not fleet_groups:
        return []
    every = slots(cfg)
    found: dict[str, list] = {}         # container -> [group, first id, count, top offset]
    k = 0
    for g in cfg.devices:
        if g.group not in fleet_groups:
            k += g.count
            continue
        for s in every[k:k + g.count]:
            f = found.get(s.container)
            if f is None:
                found[s.container] = [g.group, k, 1, s.port_offset]
            else:
                f[2] += 1
                if s.port_offset > f[3]:
                    f[3] = s.port_offset
            k += 1
    return [_Span(c, *f) for c, f in found.items()]


def requirements(cfg: Config, plan: Plan) -> list[FleetRequirement]:
    """Every fleet of the run, in config order (none when no group runs in the engine)."""
    spans = _spans(cfg)
    if not spans:
        return []
    index = {g.group: gi for gi, g in enumerate(cfg.devices)}
    own = fleet.own_addresses(cfg.network.subnet)
    out = []
    for sp in spans:
        gi = index[sp.group]
        cpuset = plan.devices[device_name(sp.group, sp.first_id - _first_id(cfg, gi))]
        out.append(_requirement(sp.container, sp.group, sp.first_id, sp.devices, cpuset,
                                _rate_per_device(cfg, gi), cfg.duration_s, own,
                                sp.top_port_offset))
    return out


def _first_id(cfg: Config, gi: int) -> int:
    """The id of group ``gi``'s first device (ids run 0..N-1 in config order)."""
    return sum(g.count for g in cfg.devices[:gi])


def _requirement(name: str, group: str, first_id: int, n: int, cpuset: str,
                 rate_per_device: float, duration_s: float, own: bool,
                 top_port_offset: int = 0) -> FleetRequirement:
    loops = max(1, len(parse_cpuset(cpuset)) * LOOPS_PER_CORE)
    rate = n * rate_per_device
    log_rows = max(MIN_LOG_ROWS, math.ceil(rate * duration_s / loops * LOG_HEADROOM))
    return FleetRequirement(
        name=name, group=group, first_id=first_id, devices=n, cpuset=cpuset, loops=loops,
        workers=loops, rate_per_s=rate, log_capacity=log_rows,
        nofile=n + FDS_BASE + FDS_PER_LOOP * loops,
        memory_bytes=BASE_BYTES + n * BYTES_PER_DEVICE + loops * log_rows * LOG_ROW_BYTES,
        pids=TASKS_BASE + 2 * loops, addresses=n if own else 1, first_port=COAP_PORT,
        last_port=COAP_PORT + top_port_offset if own else COAP_PORT + n - 1)


def restrict(r: FleetRequirement, first_id: int, n: int, duration_s: float) -> FleetRequirement:
    """``r`` for ``n`` of its devices from ``first_id`` (a cluster cell's share of an engine)."""
    if n == r.devices:
        return r
    per_device = r.rate_per_s / r.devices if r.devices else 0.0
    out = _requirement(r.name, r.group, first_id, n, r.cpuset, per_device, duration_s,
                       r.addresses > 1)
    return out if r.addresses > 1 else \
        FleetRequirement(**{**out.__dict__, "first_port": r.first_port,
                            "last_port": r.first_port + n - 1})


def of_share(cfg: Config, reqs: list[FleetRequirement],
             share: Optional[frozenset[str]]) -> list[FleetRequirement]:
    """The engines a cell of a run across hosts runs (``share``: its devices; None: every
    engine). An engine never spans two cells, so its first device tells."""
    if share is None:
        return reqs
    index = {g.group: gi for gi, g in enumerate(cfg.devices)}
    return [r for r in reqs if device_name(r.group, r.first_id - _first_id(cfg, index[r.group]))
            in share]


def problems(cfg: Config, plan: Plan, host: Optional[HostFacts] = None,
             share: Optional[frozenset[str]] = None) -> list[str]:
    """What the run's fleets (``share``: a cell's devices, its engines and GEs) need that the
    config or the host does not give: one ``"key: limit, fix"`` string each (empty: it
    fits)."""
    reqs = of_share(cfg, requirements(cfg, plan), share)
    if not reqs:
        return []
    out = []
    for r in reqs:
        if r.devices > MAX_FLEET_PER_CONTAINER:   # cannot happen with the even split; a guard
            out.append(f"devices: {r.name} carries {r.devices} devices, at most "
                       f"{MAX_FLEET_PER_CONTAINER} per fleet (ports on one address)")
        if r.rate_per_loop_s > REQS_PER_LOOP_S:
            out.append(f"devices: {r.name} is sent {r.rate_per_s:.0f} requests/s over {r.loops} "
                       f"loop(s) ({r.rate_per_loop_s:.0f}/s each), above the {REQS_PER_LOOP_S} a "
                       "loop core is planned to serve; give the devices more cores "
                       "(placement.cpus) or lower their rate (devices[].rit)")
    # the endpoints the GEs address: a generated trace skips groups with `requests: false`
    # (devices that only push); a recorded one may name any device
    total = sum(g.count if share is None else
                sum(1 for k in range(g.count) if device_name(g.group, k) in share)
                for g in cfg.devices if g.requests or cfg.trace is not None)
    per_ge = math.ceil(total / cfg.gateways.count)
    if per_ge > GE_MAX_ENDPOINTS:
        out.append(f"gateways.count: {cfg.gateways.count} gateway emulator(s) for {total} devices "
                   f"is {per_ge} endpoints each, above the gateway emulator's {GE_MAX_ENDPOINTS}; "
                   f"set gateways.count: {math.ceil(total / GE_MAX_ENDPOINTS)} or more")
    if fleet.own_addresses(cfg.network.subnet):
        # beyond the subnet's addresses the engine devices take them again on the next port
        # (pods.slots): at most MAX_LOOPBACK_PORTS ports per address
        engines = sum(r.devices for r in reqs)
        room = pods.fleet_address_room(cfg, pods.group_sizes(cfg),
                                       [fleet.is_fleet(cfg, i) for i in range(len(cfg.devices))])
        if engines > room * MAX_LOOPBACK_PORTS:
            out.append(f"devices: {engines} engine devices on the process backend take the "
                       f"run's /{ipaddress.ip_network(cfg.network.subnet).prefixlen} loopback "
                       f"block's {room} free addresses on at most {MAX_LOOPBACK_PORTS} ports "
                       "each; use backend: docker (one address per fleet, a port per device) "
                       "or fewer devices")
    if host is not None:
        mem = sum(r.memory_bytes for r in reqs)
        if mem > host.mem_available_bytes:
            out.append(f"devices: the fleets need {mem / 2**30:.1f} GiB "
                       f"({BYTES_PER_DEVICE // 1024} KiB per device + logs), the host has "
                       f"{host.mem_available_bytes / 2**30:.1f} GiB available; fewer devices, a "
                       "shorter duration_s (smaller logs) or a larger host")
        worst = max(reqs, key=lambda r: r.nofile)
        if host.nofile_hard is not None and worst.nofile > host.nofile_hard:
            out.append(f"devices: {worst.name} needs {worst.nofile} file descriptors, the hard "
                       f"limit its runtime gives is {host.nofile_hard}; set per_container of "
                       f"its group to at most {most_devices(host.nofile_hard, worst.loops)} "
                       "(more engines) or raise the limit (ulimit -Hn; dockerd's LimitNOFILE "
                       "on Docker)")
        fds = sum(r.nofile for r in reqs)
        if host.file_max is not None and fds > host.file_max:
            out.append(f"devices: the fleets need {fds} file descriptors, fs.file-max is "
                       f"{host.file_max}; raise it: sysctl -w fs.file-max={2 * fds}")
    return out


def host_facts(meminfo: Path = Path("/proc/meminfo"),
               file_max: Path = Path("/proc/sys/fs/file-max")) -> HostFacts:
    """This host's facts (values it does not expose are left out of the checks)."""
    avail = 0
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        fmax: Optional[int] = int(file_max.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        fmax = None
    return HostFacts(mem_available_bytes=avail or 2**62, nofile_hard=own_nofile_hard(),
                     file_max=fmax)


def own_nofile_hard() -> Optional[int]:
    """This process's hard RLIMIT_NOFILE (what its children may raise theirs to)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def most_devices(nofile_hard: int, loops: int) -> int:
    """Devices one engine with ``loops`` loops can bind under a hard RLIMIT_NOFILE."""
    return max(1, min(MAX_FLEET_PER_CONTAINER,
                      nofile_hard - FDS_BASE - FDS_PER_LOOP * loops - NOFILE_MARGIN))


def size_fleets(cfg: Config, nofile_hard: Optional[int]) -> tuple[Config, list[str]]:
    """``per_container: auto`` of every fleet group set to what one engine can bind under the
    hard file-descriptor limit its runtime gives (``nofile_hard``; None: unknown or unlimited,
    nothing changes). A copy, and the notes worth recording."""
    out = cfg.model_copy(deep=True)
    out._source = cfg._source
    notes = []
    if nofile_hard is None:
        return out, notes
    most = most_devices(nofile_hard, os.cpu_count() or 1)
    for i, g in enumerate(out.devices):
        if g.per_container == "auto" and fleet.is_fleet(cfg, i) and most < g.count:
            g.engine, g.per_container = "fleet", most   # (auto with a pod size: processes)
            if most < MAX_FLEET_PER_CONTAINER:
                notes.append(f"devices[{i}]: at most {most} devices per wot-fleet engine: one "
                             f"socket each under the hard file-descriptor limit {nofile_hard}")
    return out, notes


def check(cfg: Config, plan: Plan, nofile_hard: Optional[int],
          share: Optional[frozenset[str]] = None) -> None:
    """Refuse a run whose fleets do not fit: ConfigError for what the config asks (the fix is
    in the config), EnvironmentProblem for what the host lacks. ``nofile_hard``: the hard
    RLIMIT_NOFILE the engines get from their runtime (None: unknown); ``share``: a cell's
    devices (its engines, and its GEs' endpoints)."""
    asked = problems(cfg, plan, share=share)
    if asked:
        raise ConfigError(asked)
    facts = host_facts()
    facts = HostFacts(facts.mem_available_bytes, nofile_hard, facts.file_max)
    lacking = problems(cfg, plan, facts, share)
    if lacking:
        raise EnvironmentProblem("the host cannot carry the run's wot-fleet engines: "
                                 + "; ".join(lacking))


def check_config(cfg: Config, plan: Plan, docker_nofile_hard: Optional[int]) -> None:
    """:func:`check` for ``wotbench check`` (before any backend adapts the config): the
    process backend's loopback layout (an address per device) and file-descriptor limit
    when the config asks for it, else Docker's (``docker_nofile_hard``)."""
    cfg, hard = for_host(cfg, docker_nofile_hard)
    check(cfg, plan, hard)


def for_host(cfg: Config, docker_nofile_hard: Optional[int]) -> tuple[Config, Optional[int]]:
    """The config as its backend will run it (fleets sized, loopback addresses on the process
    backend) and the hard file-descriptor limit its engines get, for check and plan."""
    hard = own_nofile_hard() if cfg.backend == "process" else docker_nofile_hard
    cfg, _ = size_fleets(cfg, hard)
    if cfg.backend == "process":
        cfg.network.subnet = PROCESS_SUBNET
    return cfg, hard


def describe(reqs: list[FleetRequirement]) -> list[str]:
    """One line per fleet, for ``wotbench plan``."""
    return [f"{r.name}: {r.devices} devices (ids {r.first_id}..{r.first_id + r.devices - 1}) on "
            f"cpus {r.cpuset}, {r.loops} loop(s), {r.rate_per_s:.0f} req/s, "
            + (f"{r.addresses} addresses" if r.addresses > 1 else
               f"ports {r.first_port}..{r.last_port}")
            + f", {r.nofile} fds, {r.memory_bytes / 2**20:.0f} MiB" for r in reqs]
