"""Which receive stamp a connected run's messages got (``summary.json`` ``connected.stamps``):
the engines (``conn-summary.json`` ``stamps``; ``conn-log-*.csv`` ``read_ns``,
``arrival_stamp``) and wot-rpcapp (``rpc-log.csv`` ``reply_read_ns``, ``reply_stamp``) stamp
each message by the TCP read that completed it — the kernel's stamp of that read's last
segment, or the read's own time where the kernel gave none (common/tcpstamp.h). The read lag
(read − kernel stamp) is the reader's own delay: the testbed's, no longer inside the server's
span. Files of a build without the columns give None."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.stats import quantiles_of
from wotbench.rundir.connected_block import ConnStats, RxStamps
from wotbench.rundir.connected_files import ConnSummary, RpcSummary


def _lag_ms(frame: pd.DataFrame, read: str, at: str, src: str) -> np.ndarray:
    k = frame[frame[src] == "kernel"]
    return ((k[read] - k[at]) / 1e6).to_numpy(float)


def rx_stamps(engines: list[ConnSummary], dev: pd.DataFrame, app: Optional[RpcSummary],
              rpcs: Optional[pd.DataFrame], warm: int) -> Optional[RxStamps]:
    """The counts by stamp and the read lags of the RPCs scheduled (at the devices: arrived)
    after the warm-up; None when the engines' files predate the stamps."""
    if not engines or any(e.stamps is None for e in engines):
        return None
    has_dev = {"read_ns", "arrival_stamp"} <= set(dev.columns)
    has_app = rpcs is not None and {"reply_read_ns", "reply_stamp"} <= set(rpcs.columns)
    a = rpcs[(rpcs["sched_ns"] >= warm) & (rpcs["outcome"] == "ok")] if has_app else None
    if not has_dev:
        d = dev[:0]
    elif rpcs is not None and "id" in rpcs.columns:
        # the devices' replies to the RPCs scheduled after the warm-up, matched by id: the
        # applications' clock is the run's (rebased in a merged run), while each cell's device
        # logs keep their own host's, so a device row's time cannot be compared with ``warm``
        after = set(rpcs.loc[rpcs["sched_ns"] >= warm, "id"].astype(str))
        d = dev[(dev["outcome"] == "sent") & dev["id"].astype(str).isin(after)]
    else:
        d = dev[(dev["outcome"] == "sent") & (dev["arrival_ns"] >= warm)]
    return RxStamps(
        device_kernel=sum(e.stamps.kernel for e in engines),
        device_user=sum(e.stamps.user for e in engines),
        reply_kernel=(app.replies_kernel_stamped or 0) if app else 0,
        reply_user=(app.replies_user_stamped or 0) if app else 0,
        engine_read_lag=quantiles_of(ConnStats, _lag_ms(d, "read_ns", "arrival_ns",
                                                        "arrival_stamp") if has_dev
                                     else np.zeros(0)),
        app_read_lag=quantiles_of(ConnStats, _lag_ms(a, "reply_read_ns", "reply_ns",
                                                     "reply_stamp") if a is not None
                                  else np.zeros(0)))
