"""Backend choice: ``network.backend: auto | pumba | netem | app``.

auto tries pumba, then netem, then app, and takes the first that is available on this
machine *and* accepts the plan (e.g. Pumba cannot combine delay + loss on one device, so such
a plan goes to netem when the kernel has it). The reasons for every skipped backend are kept.
"""
from __future__ import annotations

from typing import Any, Optional

from wotbench.netimpair.backends.app import AppBackend
from wotbench.netimpair.backends.base import Backend
from wotbench.netimpair.backends.netem import NetemBackend
from wotbench.netimpair.backends.pumba import PumbaBackend
from wotbench.netimpair.cmdrun import CommandRunner
from wotbench.netimpair.errors import ImpairmentError
from wotbench.netimpair.plan import ImpairmentPlan

ORDER = ("pumba", "netem", "app")


def make_backend(name: str, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None,
                 seed: int = 1, **kw: Any) -> Backend:
    if name == "pumba":
        return PumbaBackend(plan, runner, **kw)
    if name == "netem":
        return NetemBackend(plan, runner, **kw)
    if name == "app":
        return AppBackend(plan, runner, seed=seed)
    raise ValueError(f"network.backend: {name!r} is not a backend, expected auto, pumba, netem or app")


def select_backend(requested: str, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None,
                   seed: int = 1, options: Optional[dict[str, dict[str, Any]]] = None) -> tuple[Backend, list[str]]:
    """(backend, reasons). Raises ImpairmentError with every reason when nothing fits.
    ``options``: per-backend keyword arguments (tests inject fakes this way)."""
    options = options or {}
    names = ORDER if requested == "auto" else (requested,)
    reasons: list[str] = []
    for n in names:
        b = make_backend(n, plan, runner, seed=seed, **options.get(n, {}))
        ok, why = b.available()
        if not ok:
            reasons.append(why)
            continue
        problems = b.check()
        if problems:
            reasons.append(f"{n} backend cannot do this config: " + "; ".join(problems))
            continue
        reasons.append(f"{n} backend chosen: {why}")
        return b, reasons
    if requested == "auto":
        raise ImpairmentError("no network impairment backend fits: " + " | ".join(reasons))
    raise ImpairmentError(reasons[-1])
