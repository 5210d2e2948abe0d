"""``cells/<node>/cell.json`` of a connected run across hosts (docs/CONTRACTS.md "A connected run
across hosts"): a cell's account of its run — its share, T0 and the end of the warm-up on its
node's CLOCK_MONOTONIC, the attach, the load. Written by the cell
(:mod:`wotbench.distributed.connected_cell`) also after a failure, with every key (null where
the cell did not get that far); read by the coordinator (:mod:`~wotbench.distributed.
connected_coord`) once it fetched the cell's directory, and by the merge
(:mod:`~wotbench.distributed.connected_merge`)."""
from __future__ import annotations

from typing import Any, Optional

from wotbench.rundir._model import Record


class CellFile(Record):
    node: str
    devices: int                           # the attached devices of the cell's share
    groups: dict[int, tuple[int, int]]     # connected group index -> (offset in it, count)
    index: int                             # the cell's place: its reply shards
    first_shard: int
    first_app: int                         # its applications' ids: first_app .. + apps
    apps: int
    endpoint: str                          # the edge server, address:port
    engines: list[str]                     # its engines' directory names (engines/<name>/)
    load_before: list[float]               # the node's load average before and after
    sched_missing: Optional[str]           # why the node has no per-thread run-queue wait
    attached_all: bool
    attach_s: Optional[float]              # the engines' start to every device attached
    t0_mono_ns: Optional[int]              # T0 on the node's clock (null: never reached)
    warmup_end_ns: Optional[int]           # T0 + applications.warmup_s
    engines_s: float                       # the engines' start to their stop
    load_after: list[float]

    def extra(self) -> dict[str, Any]:
        """What the connected analysis records of the cell's run (``Inputs.extra``)."""
        return {"attached_all": self.attached_all, "attach_s": self.attach_s,
                "engines_s": self.engines_s, "load_before": self.load_before,
                "load_after": self.load_after, "sched_missing": self.sched_missing}
