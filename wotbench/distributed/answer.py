"""Which host stopped being faithful, for the answers of sweeps and capacity searches.

A point of a sweep or a capacity search on ``backend: swarm`` is a merged run across hosts;
its verdict is its worst cell's (``verdict.aggregate``). When that verdict is not
trustworthy, the answer must say *which host* (node) distorted the result and why, not only
that "the host" did: :func:`host_fault` reads it from the merged run's ``cluster.json``.
Single-host runs have no ``cluster.json``, so their points carry no host.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from pydantic import BaseModel, ValidationError

from wotbench.distributed.merge import MergedRun
from wotbench.rundir import MergedRunDir


class HostFault(BaseModel):
    """The node whose cell decided a merged run's untrustworthy verdict."""
    node: str
    status: str           # that cell's verdict (invalid, contention, ...)
    why: str              # its first reason ("it failed: ..." for a lost cell)
    others: list[str] = []   # the other nodes whose cells were not trustworthy

    def text(self) -> str:
        more = f"; also {', '.join(self.others)}" if self.others else ""
        return f"{self.node} ({self.status}: {self.why}){more}"


def host_fault(run_dir: Optional[Path]) -> Optional[HostFault]:
    """The unfaithful host of the merged run in ``run_dir`` (None: not a merged run, no
    cluster.json readable, or every cell was trustworthy)."""
    if run_dir is None:
        return None
    f = MergedRunDir(run_dir).cluster_json
    try:
        m = MergedRun.model_validate_json(f.read_text())
    except (OSError, ValueError, ValidationError):
        return None
    v = m.verdict
    if v.worst_node is None:
        return None
    worst = next(c for c in v.cells if c.node == v.worst_node)
    why = worst.reasons[0] if worst.reasons else "no reason recorded"
    return HostFault(node=worst.node, status=worst.status, why=why,
                     others=[n for n in v.unfaithful if n != worst.node])


def hosts_text(faults: Iterable[Optional[dict]]) -> Optional[str]:
    """One phrase naming the distinct unfaithful hosts of a setting's runs (``HostFault``
    dumps, None entries skipped); None when no run named one."""
    seen: dict[str, str] = {}
    for f in faults:
        if f:
            h = HostFault.model_validate(f)
            seen.setdefault(h.node, h.text())
    if not seen:
        return None
    return ("the host that stopped being faithful: " if len(seen) == 1 else
            "the hosts that stopped being faithful: ") + "; ".join(seen.values())
