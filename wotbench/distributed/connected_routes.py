"""Where a cell's RPCs go (docs/CONNECTED.md "Cells on a cluster"): the applications of a cell
call only the devices their cell holds, and those devices reply on the cell's own reply
shards, so the one server relays each reply once, to the one cell that asked for it.

The uniform choice of the single-host run is partitioned, not changed: every cell holds an
even contiguous part of every connected group and an even part of the applications
(:func:`~wotbench.distributed.connected_coord.split_shares`), so the server gets the same RPCs
per second, each relayed to one subscriber instead of one per cell; in an open loop each cell's
rate is its devices' share of ``rate`` (:func:`all_devices`), so every device gets the same
rate; a closed loop's per-device load follows the cell's applications / devices (one of each
per cell of rounding; docs/CONNECTED.md). Cell ``k`` owns shards ``k * reply_shards ..
(k + 1) * reply_shards - 1`` (device d of cell k replies on ``k * reply_shards + d mod
reply_shards``), so a cell's subscriptions hold as many channels as a single host's."""
from __future__ import annotations

from typing import Any

from wotbench.connected.procs import first_ids


def first_shard(cfg: Any, index: int) -> int:
    """The first reply shard of cell ``index`` (its own ``reply_shards`` channels)."""
    return index * (cfg.applications.reply_shards if cfg.applications else 1)


def device_ranges(cfg: Any, groups: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """The global (first id, count) ranges of a cell's devices, from its share's
    ``groups`` (device group index -> (offset in the group, count))."""
    first_of = first_ids(cfg)
    return [(first_of[cfg.devices[int(gi)].group] + off, n)
            for gi, (off, n) in sorted(groups.items(), key=lambda kv: int(kv[0])) if n]


def all_devices(cfg: Any) -> int:
    """The run's connected devices (every cell's together): the whole of the RPC rate's share."""
    first_of = first_ids(cfg)
    return sum(g.count for g in cfg.devices if g.group in first_of)
