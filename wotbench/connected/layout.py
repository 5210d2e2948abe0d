"""How a connected run is laid out on this host: engines of at most as many connections as one
process may open (the hard RLIMIT_NOFILE; nothing here may raise it), the edge server's workers
sized the same way, and the loopback source addresses the devices connect from (one source
address, the server's address and port leave ~28 000 ephemeral ports)."""
from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from typing import Optional

from wotbench.config.connected import CONNECTED_PROTOCOLS

FD_MARGIN = 64                 # each engine's epoll/timer/event fds, stdio, its files
SERVER_FD_MARGIN = 1000        # an nginx worker's listeners, logs, nchan's own
PORTS_PER_SOURCE = 20000       # below ip_local_port_range's ~28 000, with room for TIME_WAIT
EDGE_ADDRESS = "127.0.0.1"


@dataclass(frozen=True)
class Engine:
    name: str
    group: str
    group_index: int
    first_id: int        # device id of its first device (ids count across connected groups)
    count: int
    offset: int          # position of its first device in its group


@dataclass(frozen=True)
class Layout:
    engines: list[Engine]
    fds_per_process: int
    server_workers: int
    worker_connections: int
    sources: tuple[str, ...]
    devices: int
    applications: int

    @property
    def attached(self) -> int:
        """The devices of these engines (all of them, or a cell's share)."""
        return sum(e.count for e in self.engines)

    def describe(self) -> str:
        return (f"{self.devices} connected devices in {len(self.engines)} wot-fleet engine(s) of "
                f"<= {max((e.count for e in self.engines), default=0)} (hard RLIMIT_NOFILE {self.fds_per_process}); "
                f"edge server: {self.server_workers} worker(s) x {self.worker_connections} "
                f"connections; {self.applications} applications; {len(self.sources)} source "
                f"address(es)")


def hard_nofile() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def make_layout(cfg, fds: int | None = None,
                share: Optional[dict[int, tuple[int, int]]] = None) -> Layout:
    """``share``: a cell's part of the devices (group index -> (offset, count) in the group;
    groups not in it: none), device ids still counting across all groups."""
    fds = fds or hard_nofile()
    engines: list[Engine] = []
    next_id = 0
    for gi, g in enumerate(cfg.devices):
        if g.protocol not in CONNECTED_PROTOCOLS:
            continue
        per_fd = 2 if g.protocol == "chunked" else 1
        most = max(1, (fds - FD_MARGIN) // per_fd)
        if g.per_container != "auto":
            most = min(most, int(g.per_container))
        first, total = (0, g.count) if share is None else share.get(gi, (0, 0))
        n = math.ceil(total / most)
        size = math.ceil(total / n) if n else 0
        for j in range(n):
            count = min(size, total - j * size)
            engines.append(Engine(f"{g.group}-conn{j}", g.group, gi, next_id + first + j * size,
                                  count, first + j * size))
        next_id += g.count
    conns = sum(e.count * (2 if cfg.devices[e.group_index].protocol == "chunked" else 1)
                for e in engines)
    apps = cfg.applications.count if cfg.applications else 0
    shards = cfg.applications.reply_shards if cfg.applications else 0
    per_worker = max(1024, fds - SERVER_FD_MARGIN)
    workers = max(1, math.ceil((conns + apps + shards) * 1.25 / per_worker))
    sources = tuple(f"127.0.{1 + k // 250}.{1 + k % 250}"
                    for k in range(max(1, math.ceil(conns / PORTS_PER_SOURCE))))
    return Layout(engines, fds, workers, per_worker, sources, next_id, apps)
