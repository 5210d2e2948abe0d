"""``notify.slo`` (issue 35): objectives on the update -> notification latency and the share of
updates never notified, judged on every subscriber of ``summary.json`` ``notify`` (the worst
decides) and merged into the run's ``slo`` block, so exit code 4 and the report's SLO table
cover them as any objective."""
from __future__ import annotations

from typing import Optional

from wotbench.config.notify import NotifySlo
from wotbench.rundir import SloBlock, SloObjectiveResult
from wotbench.rundir.notify import NotifyBlock

_KEYS = (("p50_ms", "p50", "ms", "median update→notification latency"),
         ("p99_ms", "p99", "ms", "99th-percentile update→notification latency"),
         ("lost_max", "lost_share", "share", "updates never notified"))


def _measured(block: NotifyBlock, metric: str) -> Optional[float]:
    vals = [s.lost_share if metric == "lost_share" else s.latency_ms.model_dump().get(metric)
            for s in block.subscribers]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def results(spec: NotifySlo, block: NotifyBlock) -> list[SloObjectiveResult]:
    out = []
    for key, metric, unit, what in _KEYS:
        limit = getattr(spec, key)
        if limit is None:
            continue
        m = _measured(block, metric)
        state = "no_data" if m is None else "pass" if m <= limit else "fail"
        shown = f"{limit * 100:g} %" if unit == "share" else f"{limit:g} ms"
        out.append(SloObjectiveResult(
            key=f"notify.slo.{key}", metric=f"notify_{metric}", label=f"{what} (worst "
            f"subscriber) <= {shown}", op="<=", limit=float(limit), unit=unit, measured=m,
            samples=sum(s.notified for s in block.subscribers), state=state,
            margin=None if m is None else limit - m,
            margin_rel=None if m is None or not limit else (limit - m) / limit,
            devices_judged=len(block.subscribers)))
    return out


def merge(block: Optional[SloBlock], extra: list[SloObjectiveResult]) -> Optional[SloBlock]:
    """The run's SLO block with the notification objectives added (a new one without slo:)."""
    if not extra:
        return block
    objs = (block.objectives if block is not None else []) + extra
    states = {o.state for o in objs}
    status = "missed" if "fail" in states else "no_data" if "no_data" in states else "met"
    bad = [o for o in extra if o.state != "pass"]
    text = (block.text + "; " if block is not None else f"SLO {status}: ") + (
        "; ".join(f"{o.label}: {'no data' if o.measured is None else round(o.measured, 4)}"
                  for o in bad) if bad else f"{len(extra)} notification objective(s) pass")
    return SloBlock(status=status, window_s=block.window_s if block is not None else 0.0,
                    objectives=objs, text=text,
                    testbed_caveat=block.testbed_caveat if block is not None else None)
