"""The config's ``verdict:`` block: how much the testbed may add to a response time.

``verdict: {tolerance: 0.05}`` (a share of the window's mean R, 0 < x < 1), ``tolerance: "5 %"``
(the same) or ``tolerance: "0.5 ms"`` (milliseconds per request); ``confidence: 0.95`` (the
one-sided confidence of the bound a window is judged on). docs/DETECTOR.md "The host's share"."""
from __future__ import annotations

import re
from typing import Any, Optional

from wotbench.rundir.evidence import VerdictParams

_AMOUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%|ms)\s*$")


def parse_tolerance(v: Any) -> dict[str, Optional[float]]:
    """{tolerance_share, tolerance_ms} of a ``verdict.tolerance``; ValueError saying why not."""
    if isinstance(v, bool):
        raise ValueError(f"expected a share of R (0 < x < 1), 'N %' or 'N ms', got {v!r}")
    if isinstance(v, (int, float)):
        if not 0 < v < 1:
            raise ValueError(f"a number is a share of the response time: 0 < x < 1, got {v!r} "
                             "(for milliseconds write 'N ms')")
        return {"tolerance_share": float(v), "tolerance_ms": None}
    m = _AMOUNT.match(str(v)) if isinstance(v, str) else None
    if not m:
        raise ValueError(f"expected a share of R (0 < x < 1), 'N %' or 'N ms', got {v!r}")
    x, unit = float(m.group(1)), m.group(2)
    if unit == "%":
        if not 0 < x < 100:
            raise ValueError(f"a percentage of R must be in (0, 100), got {v!r}")
        return {"tolerance_share": x / 100, "tolerance_ms": None}
    if not x > 0:
        raise ValueError(f"milliseconds must be > 0, got {v!r}")
    return {"tolerance_share": VerdictParams().tolerance_share, "tolerance_ms": x}


def from_config(raw: Optional[dict]) -> VerdictParams:
    """VerdictParams of a config's ``verdict:`` mapping (already checked by the schema)."""
    if not raw:
        return VerdictParams()
    out: dict[str, Any] = {}
    if raw.get("tolerance") is not None:
        out.update(parse_tolerance(raw["tolerance"]))
    if raw.get("confidence") is not None:
        out["confidence"] = float(raw["confidence"])
    return VerdictParams(**out)
