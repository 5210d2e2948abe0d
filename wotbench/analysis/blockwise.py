"""Block-wise transfers (RFC 7959): how long whole transfers took, how many blocks and
retransmissions they needed and how many failed, from the GE's blockwise.csv joined to its
requests.csv by request index.

A transfer is a request whose datagram carried a Block option (every GET with --block-size,
every PUT/POST body above one block); ``multi`` transfers needed more than one block. The
transfer time is the request's response time (first block sent -> final response), so a lost
and retransmitted block shows up as a stretch of 2-3 s per lost datagram (RFC 7252 timers).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir.summary import BlockKind, BlockTimes, BlockwiseBlock

from wotbench.analysis.loading import RunData
from wotbench.analysis.stats import fnum, quantiles_of


def transfers(run: RunData) -> pd.DataFrame:
    frames = []
    for g in run.ges:
        if g.blockwise is None or not len(g.blockwise):
            continue
        req = g.requests.set_index("index")
        b = g.blockwise
        idx = b["index"].to_numpy(np.int64)
        known = np.isin(idx, req.index.to_numpy())
        b, idx = b[known], idx[known]
        r = req.loc[idx]
        sent = r["sent_ns"].to_numpy(np.float64)
        recv = r["received_ns"].to_numpy(np.float64)
        ok = (r["outcome"].astype(str) == "ok").to_numpy()
        frames.append(pd.DataFrame({
            "ge": g.ge_id, "index": idx, "device": r["device"].to_numpy(np.int64),
            "kind": b["kind"].astype(str).to_numpy(), "body_bytes": b["body_bytes"].to_numpy(np.int64),
            "block_size": b["block_size"].to_numpy(np.int64), "blocks": b["blocks"].to_numpy(np.int64),
            "retransmissions": b["retransmissions"].to_numpy(np.int64),
            "outcome": r["outcome"].astype(str).to_numpy(),
            "t_s": (sent + g.start_mono_ns - run.test_start_ns) / 1e9,
            "time_ms": np.where(ok, (recv - sent) / 1e6, np.nan)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def analyse(run: RunData) -> tuple[Optional[BlockwiseBlock], dict[str, pd.DataFrame]]:
    """The ``blockwise`` block of summary.json (None without block-wise requests) and series."""
    t = transfers(run)
    if t.empty:
        return None, {}
    by_kind: dict[str, BlockKind] = {}
    for kind, g in t.groupby("kind"):
        multi = g[g["blocks"] > 1]
        ok = multi["outcome"] == "ok"
        clean = multi[ok & (multi["retransmissions"] == 0)]["time_ms"].to_numpy(np.float64)
        retx = multi[ok & (multi["retransmissions"] > 0)]["time_ms"].to_numpy(np.float64)
        by_kind[str(kind)] = BlockKind(
            transfers=len(g), multi_block=len(multi), ok=int(ok.sum()), failed=int((~ok).sum()),
            outcomes={str(k): int(v) for k, v in multi["outcome"].value_counts().items()},
            body_bytes_median=fnum(float(multi["body_bytes"].median())) if len(multi) else None,
            blocks_median=fnum(float(multi["blocks"].median())) if len(multi) else None,
            block_size=int(multi["block_size"].mode().iloc[0]) if len(multi) else None,
            retransmissions=int(multi["retransmissions"].sum()),
            with_retransmissions=int((multi["retransmissions"] > 0).sum()),
            time_ms=quantiles_of(BlockTimes, multi[ok]["time_ms"].to_numpy(np.float64)),
            time_ms_no_retransmission=quantiles_of(BlockTimes, clean),
            time_ms_with_retransmission=quantiles_of(BlockTimes, retx))
    series = {"blockwise_transfers": t[["t_s", "ge", "index", "device", "kind", "body_bytes", "blocks",
                                         "retransmissions", "outcome", "time_ms"]]}
    return BlockwiseBlock(by_kind=by_kind), series
