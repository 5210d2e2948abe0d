"""The wot-fleet engines of a run (docs/CONTRACTS.md §3b), independent of the backend: one
:class:`FleetRun` per fleet of the plan (:mod:`wotbench.deploy.fleet_capacity`), with its
command line and its devices file.

A fleet is one process (a container on Docker) hosting many devices; the runner keeps no
per-device component for them: readiness is the fleet's ``ready`` file, stopping it is one
SIGTERM, its logs are ``fleets/<fleet>/``. On Docker the run's resource files are mounted once
at ``/res`` and the fleet's directory at ``/logs``; on the process backend the engine reads the
host paths.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from wotbench.config.schema import Config
from wotbench.deploy.fleet_capacity import FleetRequirement, restrict
from wotbench.deploy.plan import parse_cpuset
from wotbench.deploy.resolve import DeviceAddress
from wotbench.rundir import FleetRecord, RunDir, atomic
from wotbench.rundir.fleet_files import FleetDevice, read_devices, write_devices
from wotbench.rundir.layout import FLEET_DEVICES_IN, PUSH_SCHEDULE
from wotbench.workload.push_schedule import Row, write_fleet_schedule

RES_DIR_IN, FLEET_DIR_IN = "/res", "/logs"     # what a fleet container sees
OBSERVER_MARGIN = 2               # observer records beyond devices[].observe.observers (a
                                  # client re-registering with a new query, a stray observer)
STOP_BASE_S = 15.0                # as a device's grace (runner/teardown/stop.py STOP_GRACE_S) ...
STOP_PER_ROW_US = 2.0             # ... plus writing its preallocated log rows (~500 000 rows/s)


@dataclass
class FleetRun:
    req: FleetRequirement
    dir: Path                   # host path: fleets/<name>/
    stdout: Path                # its stdout + stderr when a local process
    address: str                # Docker: the container's address; process: its first device's
    endpoints: dict[str, str] = field(default_factory=dict)   # "ip:port" -> device name
    observers: int = 0          # --observers (0: its group has no observable resource)
    # devices[].push: its devices' schedule is push-schedule.csv in its directory
    push_timeout_ms: Optional[int] = None
    names: dict[int, str] = field(default_factory=dict)       # device index -> name

    @property
    def name(self) -> str:
        return self.req.name

    @property
    def cpuset(self) -> str:
        return self.req.cpuset

    def record(self, rd: RunDir) -> FleetRecord:
        """run.json ``fleets[]``."""
        r = self.req
        return FleetRecord(name=r.name, group=r.group, first_id=r.first_id, devices=r.devices,
                           address=self.address, first_port=r.first_port, last_port=r.last_port,
                           cpuset=r.cpuset, loops=r.loops, workers=r.workers,
                           log_capacity=r.log_capacity, nofile=r.nofile,
                           memory_bytes=r.memory_bytes, dir=rd.rel(self.dir))

    def args(self, devices_file: str, log_dir: str) -> list[str]:
        """wot-fleet's arguments (its own view of the paths)."""
        cpus = parse_cpuset(self.req.cpuset)
        a = ["--devices", devices_file, "--log-dir", log_dir, "--loops", str(self.req.loops),
             "--workers", str(self.req.workers), "--name", self.name,
             "--log-capacity", str(self.req.log_capacity)]
        if len(cpus) >= self.req.loops:   # loop i on the i-th core of its cpuset
            a += ["--cpus", ",".join(str(c) for c in cpus[:self.req.loops])]
        if self.observers:
            a += ["--observers", str(self.observers)]
        if self.push_timeout_ms is not None:
            a += ["--push", f"{log_dir}/{PUSH_SCHEDULE}", "--push-timeout-ms",
                  str(self.push_timeout_ms)]
        return a


def stop_grace_s(fleets: Sequence[FleetRun]) -> float:
    """SIGTERM -> exit for the slowest engine: it writes every fleet-log row it holds."""
    rows = max((f.req.loops * f.req.log_capacity for f in fleets), default=0)
    return STOP_BASE_S + rows * STOP_PER_ROW_US / 1e6


ImpairArgs = Callable[[str], list[str]]   # device name -> wot-device's --impair... arguments


def device_rows(cfg: Config, rd: RunDir, addrs: Sequence[DeviceAddress], in_container: bool,
                impair: ImpairArgs = lambda name: []) -> list[FleetDevice]:
    """The devices file rows of one fleet's devices ``addrs`` (``impair``: the app backend's
    arguments of a device, as a wot-device would get them)."""
    groups = {g.group: g for g in cfg.devices}
    out = []
    for a in addrs:
        g = groups[a.group]
        res = f"{RES_DIR_IN}/{a.name}.csv" if in_container else str(rd.resource_file(a.name))
        listen = f"0.0.0.0:{a.port}" if in_container else f"{a.ip}:{a.port}"
        out.append(FleetDevice(index=a.id, name=a.name, listen=listen, resources=res,
                               slots=g.threads, response=g.response,
                               **FleetDevice.impair_fields(impair(a.name))))
    return out


def build(cfg: Config, rd: RunDir, reqs: Sequence[FleetRequirement],
          addrs: Sequence[DeviceAddress], in_container: bool,
          make_dir=lambda p: p, impair: ImpairArgs = lambda name: [],
          push: Optional[dict[str, list[Row]]] = None) -> list[FleetRun]:
    """One FleetRun per requirement, its directory made (``make_dir``: writable for the engine's
    uid) and its devices file written; ``addrs``: every device of the run (those of other
    containers are skipped); ``impair``: see :func:`device_rows`. ``push``: the rendered
    schedules of pushing devices by name; an engine hosting any gets them in one
    push-schedule.csv."""
    groups = {g.group: g for g in cfg.devices}
    by_fleet: dict[str, list[DeviceAddress]] = {}
    for a in addrs:
        by_fleet.setdefault(a.container, []).append(a)
    out = []
    for r in reqs:
        mine = by_fleet.get(r.name, [])
        if not mine:
            continue   # a cluster cell's share may hold none of this fleet's devices
        r = restrict(r, mine[0].id, len(mine), cfg.duration_s)
        d = make_dir(rd.fleet_dir(r.name))
        write_devices(rd.fleet_devices_file(r.name),
                      device_rows(cfg, rd, mine, in_container, impair))
        obs = groups[r.group].observe
        run = FleetRun(req=r, dir=d, stdout=rd.fleet_stdout(r.name), address=mine[0].ip,
                       endpoints={f"{a.ip}:{a.port}": a.name for a in mine},
                       names={a.id: a.name for a in mine},
                       observers=obs.observers + OBSERVER_MARGIN if obs else 0)
        pushing = [(a.id, push[a.name]) for a in mine if push and a.name in push]
        if pushing:
            write_fleet_schedule(rd.fleet_push_schedule(r.name), pushing, atomic.write_text)
            run.push_timeout_ms = cfg.gateways.timeout_ms
        out.append(run)
    return out


def devices_file_in(fleet: FleetRun, in_container: bool) -> str:
    return f"{FLEET_DIR_IN}/{FLEET_DEVICES_IN}" if in_container \
        else str(fleet.dir / FLEET_DEVICES_IN)


def log_dir_in(fleet: FleetRun, in_container: bool) -> str:
    return FLEET_DIR_IN if in_container else str(fleet.dir)


def command(fleet: FleetRun, in_container: bool, binary: Optional[str] = None) -> list[str]:
    """The whole command line (process backend: ``binary`` first) or the image's arguments."""
    a = fleet.args(devices_file_in(fleet, in_container), log_dir_in(fleet, in_container))
    return ([binary] if binary else []) + a


def impair_counters(rd: RunDir, fleets: Sequence[FleetRun]) -> dict[str, dict]:
    """Each impaired fleet device's counters (fleet-impair.csv, by name), as a wot-device's
    device-summary.json ``impair`` block: what run.json ``network.devices.<name>.counters``
    copies. Engines that wrote none (not impaired, or failed) give nothing."""
    out: dict[str, dict] = {}
    for f in fleets:
        path = rd.fleet_impair_table(f.name)
        if not path.is_file():
            continue
        devs = {d.index: d for d in read_devices(rd.fleet_devices_file(f.name))}
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                c: dict = {k: int(v) for k, v in row.items()}
                d = devs.get(c.pop("device"))
                if d is None:
                    continue
                name = d.name
                c["dir"] = dict(kv.split("=", 1) for kv in d.impair.split(";") if "=" in kv
                                ).get("dir", "")
                c["duplicated"] = c["duplicated_in"] + c["duplicated_out"]
                c["corrupted"] = c["corrupted_in"] + c["corrupted_out"]
                out[name] = c
    return out
