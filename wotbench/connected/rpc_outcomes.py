"""One definition of a connected run's RPC outcomes in the judge's words (CONTRACTS §3d), shared
by summary.json's ``overall`` (from rpc-summary.json's counters) and the SLO (per row of
rpc-log.csv), so the two cannot disagree: an RPC never sent — overflow, its connection down
when it was due, or its write failed — is ``unsent`` (no ``send_ns``); ``reset`` is a ``lost``
RPC that was sent; the rest map one to one."""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from wotbench.rundir.connected_files import RpcSummary

# wot-rpcapp's outcomes in the judge's words (rejected: the server refused the RPC's request)
JUDGED = {"ok": "ok", "timeout": "timeout", "rejected": "error", "lost": "reset",
          "overflow": "unsent"}
UNSENT_LOST = ("unsent_down", "unsent_write")   # rpc-summary.json: lost rows never sent


def unsent_lost(app: RpcSummary) -> int:
    """rpc-summary.json's ``lost`` RPCs that were never sent (connection down, write failed)."""
    return sum(int(getattr(app, k) or 0) for k in UNSENT_LOST)


def judged_counts(outcomes: Mapping[str, int], never_sent_lost: int) -> dict[str, int]:
    """The judge's outcome counts from wot-rpcapp's counters."""
    lost = int(outcomes.get("lost", 0))
    if not 0 <= never_sent_lost <= lost:
        raise ValueError(f"rpc-summary.json: unsent_down + unsent_write = {never_sent_lost} "
                         f"is not within lost = {lost}")
    return {"ok": int(outcomes.get("ok", 0)), "error": int(outcomes.get("rejected", 0)),
            "timeout": int(outcomes.get("timeout", 0)), "reset": lost - never_sent_lost,
            "unsent": int(outcomes.get("overflow", 0)) + never_sent_lost}


def judged_rows(outcome: pd.Series, send_ns: pd.Series) -> pd.Series:
    """Each row's judged outcome: ``unsent`` wherever it has no send_ns."""
    return outcome.map(JUDGED).fillna("error").astype(str).where(send_ns.notna(), "unsent")
