"""Core placement planner (paper section 5; contract section 6: plan.json).

Rules of a faithful plan (needs reserved_os_cores + gateways + 1 (CD-GE) + >= 1 cores):
- the OS and the harness keep the first ``reserved_os_cores`` usable cores (core 0 first);
- each main gateway emulator (GE) and the contention-detector GE (CD-GE) get a dedicated
  core on which no device runs; the GEs may then busy-wait;
- the devices get all remaining cores: pinned round-robin (``affinity: pinned``) or all
  sharing them (``shared``);
- the CD node runs on the device cores (cpuset = all device cores) so that it feels the
  devices' contention.

With fewer cores ``make_plan`` returns the best degraded plan: one device core is always kept
free of GEs; the GEs take the remaining non-OS cores (sharing them if needed), the CD-GE
falls back to an OS core, and on a 2-core host the GE and CD-GE share core 0 with the OS
while the devices and the CD node share core 1. Busy wait is replaced by hybrid wherever a
GE does not own its core. Every compromise is listed in ``warnings`` and ``faithful`` is
false whenever there is any warning.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, Optional, Sequence

from pydantic import BaseModel

from wotbench.config.schema import Config
from wotbench.config.schema import device_name
from wotbench.deploy.pods import slots
from wotbench.errors import ConfigError
from wotbench.rundir import atomic

GE_SPIN_US = 200          # hybrid wait: spin the last 200 µs before a send (the GE's default)
SHARED_GE_SPIN_US = 50    # ... where GEs sharing a core would spin most of it (docs/FLEET.md)
MAX_SPIN_SHARE = 0.25     # the share of a shared GE core that GEs' spinning may take


class Plan(BaseModel):
    cores_total: int
    usable_cores: list[int]
    os_cores: list[int]
    ge_cores: dict[str, int]
    cd_ge_core: Optional[int]
    device_cores: list[int]
    cd_node_cpuset: Optional[str]
    proxy_cpuset: Optional[str] = None   # a forward proxy WoTbench starts (gateways.proxy)
    devices: dict[str, str]
    ge_wait: Literal["busy", "hybrid"]
    ge_spin_us: int = 200               # hybrid: the GEs' spin before each send (--spin-us)
    affinity: Literal["pinned", "shared"]
    faithful: bool
    warnings: list[str]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), indent=2) + "\n"

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        return atomic.write_text(path, self.to_json())

    def core_roles(self) -> dict[int, list[str]]:
        """core id -> what runs there (for display)."""
        roles: dict[int, list[str]] = {c: [] for c in self.usable_cores}
        for c in self.os_cores:
            roles[c].append("OS + harness")
        for ge, c in self.ge_cores.items():
            roles[c].append(ge)
        if self.cd_ge_core is not None:
            roles[self.cd_ge_core].append("cd-ge")
        per_core: dict[int, list[str]] = {}
        for name, cpuset in self.devices.items():
            for c in parse_cpuset(cpuset):
                per_core.setdefault(c, []).append(name)
        for c, names in sorted(per_core.items()):
            roles[c].append(f"{len(names)} device(s)" + (" (shared)" if self.affinity == "shared" and len(self.device_cores) > 1 else ""))
        if self.cd_node_cpuset:
            for c in parse_cpuset(self.cd_node_cpuset):
                roles[c].append("cd-node")
        if self.proxy_cpuset:
            for c in parse_cpuset(self.proxy_cpuset):
                roles[c].append("proxy")
        return roles


def cpuset_str(cores: Sequence[int]) -> str:
    """[1,2,3,5] -> '1-3,5' (the cpuset syntax Docker and taskset accept)."""
    cores = sorted(set(cores))
    parts, i = [], 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        parts.append(str(cores[i]) if i == j else f"{cores[i]}-{cores[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpuset(s: str) -> list[int]:
    out = []
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def make_plan(cfg: Config, cores: Optional[Sequence[int]] = None) -> Plan:
    """Plan the placement for ``cfg`` on ``cores`` (default: this process's CPU affinity).

    Pure apart from reading the affinity when ``cores`` is None."""
    if cores is None:
        available = available_cores()
        total = os.cpu_count() or len(available)
    else:
        available = sorted(set(cores))
        total = len(available)
    if not available:
        raise ConfigError(["placement: no usable cores"])
    cpus = cfg.placement.cpus
    if cpus != "all":
        missing = [c for c in cpus if c not in available]
        if missing:
            raise ConfigError([f"placement.cpus: core(s) {cpuset_str(missing)} not available on this host "
                               f"(available: {cpuset_str(available)})"])
        usable = list(cpus)
    else:
        usable = available
    n = len(usable)
    G = cfg.gateways.count
    cd = cfg.contention_detector.enabled
    reserved = cfg.placement.reserved_os_cores
    warnings: list[str] = []
    ge_names = [f"ge-{k}" for k in range(G)]
    proxy = cfg.gateways.proxy is not None and cfg.gateways.proxy.started
    need = reserved + G + (1 if cd else 0) + (1 if proxy else 0) + 1

    if not cd:
        warnings.append("contention detector disabled: WoTbench cannot tell whether the host distorted the results")
    if reserved == 0:
        warnings.append("reserved_os_cores is 0: OS and harness activity lands on GE and device cores")

    ge_cores: dict[str, int] = {}
    cd_ge_core: Optional[int] = None
    if n >= need:
        os_cores = usable[:reserved]
        rest = usable[reserved:]
        for k, ge in enumerate(ge_names):
            ge_cores[ge] = rest[k]
        if cd:
            cd_ge_core = rest[G]
        device_cores = rest[G + (1 if cd else 0):]
        proxy_core = device_cores.pop(0) if proxy else None   # its own core
    elif n == 1:
        c = usable[0]
        warnings.append(f"only 1 usable core (a faithful plan needs {need}): the OS, harness, GE(s), "
                        f"CD-GE, devices and CD node all share core {c}; device load delays the GE's sends")
        os_cores = [c] if reserved else []
        ge_cores = {ge: c for ge in ge_names}
        cd_ge_core = c if cd else None
        device_cores = [c]
    else:
        k_os = min(reserved, n - 1)
        os_cores = usable[:k_os]
        rest = usable[k_os:]
        warnings.append(f"only {n} usable cores; a faithful plan needs {need} "
                        f"({reserved} OS, {G} GE, {1 if cd else 0} CD-GE, >= 1 device core)")
        if k_os < reserved:
            warnings.append(f"only {k_os} of reserved_os_cores={reserved} core(s) could be kept for the OS and harness")
        ge_side, device_cores = rest[:-1], rest[-1:]
        # main GEs: dedicated non-OS cores if possible, else share them (or the OS cores)
        pool = ge_side or os_cores
        for k, ge in enumerate(ge_names):
            ge_cores[ge] = pool[k % len(pool)]
        if cd:
            spare = [c for c in ge_side if c not in ge_cores.values()]
            cd_ge_core = spare[0] if spare else (os_cores[0] if os_cores else pool[0])
        for c in sorted(set(ge_cores.values()) | ({cd_ge_core} if cd_ge_core is not None else set())):
            users = [ge for ge, gc in ge_cores.items() if gc == c] + (["the CD-GE"] if cd_ge_core == c else [])
            who = " and ".join(users)
            if c in os_cores:
                warnings.append(f"{who} share{'s' if len(users) == 1 else ''} core {c} with the OS and harness: "
                                f"their activity can delay sends")
            elif len(users) > 1:
                warnings.append(f"{who} share core {c}")

    proxy_cpuset = None
    if proxy:
        if n >= need:
            proxy_cpuset = str(proxy_core)
        else:   # in the measured path: with the devices rather than with the GEs
            proxy_cpuset = cpuset_str(device_cores)
            warnings.append(f"the proxy shares the device core(s) {proxy_cpuset} (a faithful plan "
                            f"gives it its own core; {need} needed)")

    # busy wait only where every GE and the CD-GE own their core
    ge_side_cores = list(ge_cores.values()) + ([cd_ge_core] if cd_ge_core is not None else [])
    dedicated = all(ge_side_cores.count(c) == 1 and c not in os_cores and c not in device_cores
                    for c in ge_side_cores)
    wanted = cfg.gateways.wait
    ge_spin_us = GE_SPIN_US
    if dedicated:
        ge_wait = "busy" if wanted == "auto" else wanted
    else:
        ge_wait = "hybrid"
        ge_spin_us = shared_ge_spin_us(cfg, ge_cores)
        what = "GE busy wait replaced by hybrid" if wanted == "busy" else "GE wait is hybrid"
        warnings.append(f"{what} (sleep, then spin the last {ge_spin_us} µs; the paper busy-waits on a "
                        f"dedicated core): the GE cores are shared, a busy-waiting GE would starve what "
                        f"shares its core")

    names = cfg.device_names()
    # a started server (devices[].server: the system under test, e.g. an RD its devices push
    # to) gets a device core of its own when one can be spared, else it shares them
    servers = {device_name(g.group, i) for g in cfg.devices if g.server is not None
               for i in range(g.count)}
    server_cores: list[int] = []
    want = max((g.server.cpus for g in cfg.devices if g.server is not None), default=1)
    if servers and want > 1 and len(device_cores) <= want:   # asked for several: no compromise
        gi = next(i for i, g in enumerate(cfg.devices) if g.server is not None
                  and g.server.cpus == want)
        raise ConfigError([f"devices[{gi}].server.cpus: {want} cores for the started server(s), "
                           f"but this host can spare {max(len(device_cores) - 1, 0)} ({n} usable "
                           f"cores: {len(os_cores)} OS, {len(set(ge_cores.values()))} GE, "
                           f"{1 if cd_ge_core is not None else 0} CD-GE, and the devices and the "
                           f"CD node need 1 of the {len(device_cores)} left); expected at most "
                           f"{max(len(device_cores) - 1, 1)}, or placement.cpus with more cores"])
    if servers and len(device_cores) > want:
        server_cores, device_cores = device_cores[:want], device_cores[want:]
    elif servers:
        warnings.append(f"the started server(s) share the device core(s) {cpuset_str(device_cores)} "
                        "with the devices (a core of their own needs 2 device cores)")
    # pinning to a single core is the same as sharing it (not a compromise)
    affinity = cfg.placement.affinity if len(device_cores) > 1 else "shared"
    if affinity == "pinned":   # round robin over containers: a pod's (a fleet's) devices share its core
        order: dict[str, int] = {}
        where = [order.setdefault(s.container, len(order)) for s in slots(cfg)]
        devices = {name: str(device_cores[where[i] % len(device_cores)])
                   for i, name in enumerate(names)}
    else:
        shared = cpuset_str(device_cores)
        devices = {name: shared for name in names}
    devices.update({name: cpuset_str(server_cores) for name in servers if server_cores})

    return Plan(cores_total=total, usable_cores=list(usable), os_cores=list(os_cores), ge_cores=ge_cores,
                cd_ge_core=cd_ge_core, device_cores=list(device_cores),
                cd_node_cpuset=cpuset_str(device_cores) if cd else None,
                proxy_cpuset=proxy_cpuset, devices=devices,
                ge_wait=ge_wait, ge_spin_us=ge_spin_us, affinity=affinity, faithful=not warnings, warnings=warnings)


def offered_rate(cfg: Config) -> float:
    """Requests/s the trace sends over all device groups (count / mean RIT)."""
    return sum(g.count * 1000.0 / g.rit.mean for g in cfg.devices
               if g.requests and g.rit.mean)


def shared_ge_spin_us(cfg: Config, ge_cores: dict[str, int]) -> int:
    """The hybrid GEs' spin before each send. A GE spinning 200 µs at a mean send interval of
    about 200 µs spins nearly all the time; two such GEs on one core wait for each other's
    scheduler slices and their sends come late (fleet-100k: 2 GEs at 5 000 req/s each took 93 %
    of core 0). Where the GEs of the busiest core would spin more than MAX_SPIN_SHARE of it,
    they spin SHARED_GE_SPIN_US, about a timer wake-up here (p50 39, p90 63 µs). Measured on
    fleet-100k, 30 s, two A/B pairs on a shared host (2026-11-27): 200 -> 50 µs took core 0
    from 63 % to 43 % busy, the sends later than 1 ms from 3.1 % to 1.0 %, the GEs' send lag
    p90 from 519 to 86 µs and their late share from 2.1 % to 1.4 % (load 2.8); on a loaded host
    (load 5.4) the late share 2.1 -> 2.0 %, the rest within its noise (docs/FLEET.md)."""
    rate = offered_rate(cfg) / max(len(ge_cores), 1)          # per GE (the trace is split evenly)
    per_core = max((list(ge_cores.values()).count(c) for c in set(ge_cores.values())), default=0)
    share = per_core * GE_SPIN_US * rate / 1e6
    return SHARED_GE_SPIN_US if share > MAX_SPIN_SHARE else GE_SPIN_US


def print_plan(plan: Plan, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title=f"core map ({len(plan.usable_cores)} of {plan.cores_total} cores usable, "
                        f"GE wait {plan.ge_wait}"
                        + (f" (spin {plan.ge_spin_us} µs)" if plan.ge_wait == "hybrid" else "")
                        + f", devices {plan.affinity})")
    table.add_column("core", justify="right")
    table.add_column("runs")
    for c, roles in plan.core_roles().items():
        table.add_row(str(c), ", ".join(roles) or "-")
    console.print(table)
    if plan.faithful:
        console.print("[green]faithful plan[/green] (paper section 5 placement rules hold)")
    else:
        console.print(f"[yellow]degraded plan[/yellow]: {len(plan.warnings)} compromise(s)")
        for w in plan.warnings:
            console.print(f"  [yellow]warning:[/yellow] {w}")
