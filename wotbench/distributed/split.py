"""Which devices run in which cell: whole pods (or lone devices) to cells, balancing the
offered load per device core; deterministic; every device keeps its global name and id.

A pod or a wot-fleet engine never spans two cells (its devices share one container and
address); an engine's devices do not count against a node's limit of process devices. The offered load
of a device is its request rate times its group's mean service time (erlangs: how many
servers it keeps busy on average), so a cell with twice the device cores takes about twice the
load. Assignment is "longest processing time first": units by decreasing load, each to the
cell whose load per device core would be lowest after it (ties: fewer devices per core, then
the cells' order). Equal inputs give equal splits on every host and Python version. Each cell
then gets its part of the run's gateway emulators (``gateways``, :mod:`.cellges`), from its
share of the endpoints and of the request rate.
"""
from __future__ import annotations

from typing import Optional, Sequence

from pydantic import BaseModel, Field

from wotbench.config.distributions import make_distribution
from wotbench.config.schema import Config
from wotbench.deploy import fleet
from wotbench.deploy.resolve import device_addresses
from wotbench.distributed.cellges import cell_gateways
from cd_module.sizing import group_request_rates
from wotbench.errors import EnvironmentProblem


class Unit(BaseModel, frozen=True):
    """What moves as a whole: a pod, a device in its own container, or a wot-fleet engine."""
    container: str
    devices: tuple[str, ...]        # global device names, config order
    device_ids: tuple[int, ...]     # their global ids (the trace's device column)
    load: float = Field(ge=0)       # offered load, erlangs
    rate: float = Field(0.0, ge=0)  # requests/s the GEs send its devices
    endpoints: int = Field(0, ge=0)   # its devices the GEs send requests to
    # an engine's devices are sockets in one process: no task or container each, so a node's
    # limit of process devices (Cell.max_devices) does not count them
    fleet: bool = False

    @property
    def process_devices(self) -> int:
        return 0 if self.fleet else len(self.devices)


class Cell(BaseModel, frozen=True):
    """A node that runs a cell, as its agent reports it."""
    node: str
    device_cores: int = Field(ge=1)          # from the node's own plan
    max_devices: Optional[int] = Field(None, ge=0)   # what the node can carry (None: no limit)


class CellShare(BaseModel):
    node: str
    device_cores: int
    containers: list[str] = []
    devices: list[str] = []
    device_ids: list[int] = []
    load: float = 0.0
    process_devices: int = 0     # of ``devices``, those not in wot-fleet engines
    rate: float = 0.0            # requests/s to its devices
    endpoints: int = 0           # its devices that are sent requests
    gateways: int = 1            # main GEs it runs: its part of gateways.count (.cellges)

    @property
    def load_per_core(self) -> float:
        return self.load / self.device_cores


class Split(BaseModel):
    cells: list[CellShare]
    total_load: float
    spread: float     # busiest cell's load per core over the balanced value, minus 1 (0: even)

    def share(self, node: str) -> CellShare:
        return next(c for c in self.cells if c.node == node)


def units_from_config(cfg: Config, recorded: Optional[dict[int, int]] = None) -> list[Unit]:
    """The config's devices grouped by container (``wotbench.deploy.pods``), config order;
    a group without request workload (``requests: false``) offers no load. ``recorded``:
    requests per device id of a recorded trace, whose rates replace the config's."""
    rates = {g.group: (r if g.requests else 0.0)
             for g, r in zip(cfg.devices, group_request_rates(cfg))}
    service_s = {g.group: make_distribution(g.service_time).mean / 1000.0 for g in cfg.devices}

    def rate(d) -> float:
        if recorded is None:
            return rates[d.group]
        return recorded.get(d.id, 0) / cfg.duration_s
    by_container: dict[str, list] = {}
    for d in device_addresses(cfg):
        by_container.setdefault(d.container or d.name, []).append(d)
    in_fleet = {g.group for i, g in enumerate(cfg.devices) if fleet.is_fleet(cfg, i)}
    out = []
    for c, ds in by_container.items():
        r = [rate(d) for d in ds]
        out.append(Unit(container=c, devices=tuple(d.name for d in ds),
                        device_ids=tuple(d.id for d in ds),
                        load=sum(x * service_s[d.group] for x, d in zip(r, ds)),
                        rate=sum(r), endpoints=sum(1 for x in r if x > 0),
                        fleet=ds[0].group in in_fleet))
    return out


def split(units: Sequence[Unit], cells: Sequence[Cell], gateways: int = 1) -> Split:
    """Assign every unit to one cell (see the module docstring); ``gateways``: the run's
    ``gateways.count``, each cell's part in its ``gateways``. EnvironmentProblem, naming
    the node(s) and the fix, when there is no cell or a unit fits in no cell."""
    if not cells:
        raise EnvironmentProblem("no node is labelled for WoTbench: label the nodes that may run a "
                                 "cell (docker node update --label-add wotbench.cell=true NODE)")
    names = [c.node for c in cells]
    if len(set(names)) != len(names):
        raise ValueError(f"a node appears twice among the cells: {names}")
    shares = [CellShare(node=c.node, device_cores=c.device_cores) for c in cells]
    order = sorted(units, key=lambda u: (-u.load, -len(u.devices), min(u.device_ids, default=0)))
    for u in order:
        room = [(k, s) for k, (s, c) in enumerate(zip(shares, cells))
                if c.max_devices is None
                or s.process_devices + u.process_devices <= c.max_devices]
        if not room:
            raise EnvironmentProblem(_no_room(u, shares, cells))
        _, best = min(room, key=lambda ks: ((ks[1].load + u.load) / ks[1].device_cores,
                                            (len(ks[1].devices) + len(u.devices))
                                            / ks[1].device_cores, ks[0]))
        best.containers.append(u.container)
        best.devices.extend(u.devices)
        best.device_ids.extend(u.device_ids)
        best.process_devices += u.process_devices
        best.load += u.load
        best.rate += u.rate
        best.endpoints += u.endpoints
    first = {u.container: min(u.device_ids, default=0) for u in units}
    for s in shares:   # global order inside each cell: the trace slice follows it
        pairs = sorted(zip(s.device_ids, s.devices))
        s.device_ids, s.devices = [p[0] for p in pairs], [p[1] for p in pairs]
        s.containers.sort(key=lambda c: first[c])
    all_endpoints, all_rate = sum(s.endpoints for s in shares), sum(s.rate for s in shares)
    for s in shares:
        s.gateways = cell_gateways(gateways, s.endpoints, all_endpoints, s.rate, all_rate)
    total = sum(s.load for s in shares)
    even = total / sum(s.device_cores for s in shares)
    spread = max(s.load_per_core for s in shares) / even - 1 if even > 0 else 0.0
    return Split(cells=shares, total_load=total, spread=spread)


def _no_room(u: Unit, shares: list[CellShare], cells: Sequence[Cell]) -> str:
    room = ", ".join(f"{c.node} has room for {c.max_devices - s.process_devices} more"
                     for s, c in zip(shares, cells) if c.max_devices is not None)
    return (f"{u.container} ({len(u.devices)} device(s)) fits in no cell: {room}. Fix: add a "
            "node (label it wotbench.cell=true), raise the nodes' limits (wotbench doctor on "
            "each), or run fewer devices")
