"""An HTTP run's own figures (issue 22): status codes, requests without a status, the waits for
a free keep-alive connection and the GEs' pool counters -> summary.json ``http``
(:class:`~wotbench.rundir.http_block.HttpBlock`). The outcomes, loss attribution (503 = refused, other
4xx/5xx = the system under test's errors, reset/timeout) and R are the common analysis's; this
block adds what only HTTP has. None for a CoAP run."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.loading import RunData
from wotbench.analysis.stats import quantiles_of
from wotbench.rundir.http_block import HttpBlock, HttpPool, WaitStats

POOL_KEYS = tuple(HttpPool.model_fields)


def analyse(run: RunData, req: pd.DataFrame) -> Optional[HttpBlock]:
    """``req``: the main GEs' requests (``analysis.responses.combine_ge``)."""
    gs = [g.summary.http for g in run.ges if g.summary.http is not None]
    if not gs:
        return None
    modes = {h.connection for h in gs}
    code = req["code"].astype("string").fillna("") if len(req) else pd.Series([], dtype="string")
    has = (code != "").to_numpy()
    status = {str(k): int(v) for k, v in code[has].value_counts().sort_index().items()}
    no_status = req["outcome"].astype(str)[~has].value_counts() if len(req) else pd.Series([])
    queued = req["queued"].to_numpy(np.float64) if len(req) else np.zeros(0)
    waited = ~np.isnan(queued)
    wait_ms = (req["sent"].to_numpy(np.float64)[waited] - queued[waited]) / 1e6
    n = int(len(req))
    return HttpBlock(
        connection=modes.pop() if len(modes) == 1 else "mixed",
        connections_per_target=max(h.connections_per_target for h in gs),
        requests=n, status_codes=status,
        without_status={str(k): int(v) for k, v in no_status.items() if v},
        queued=int(waited.sum()), queued_share=float(waited.sum() / n) if n else 0.0,
        wait_ms=quantiles_of(WaitStats, wait_ms),
        pool=HttpPool(**{k: sum(getattr(h, k) for h in gs) for k in POOL_KEYS}))
