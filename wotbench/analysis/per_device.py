"""``series/per_device.csv``: one row per device, at any number of devices (vectorised: one
grouped sort per figure). summary.json's per-device blocks stop at
``AnalysisParams.per_device_max`` devices; this table does not, so the report can rank and
summarise 100 000 devices (top/bottom N, distributions) without reading 100 000 JSON blocks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from wotbench.analysis.loading import OUTCOMES
from wotbench.analysis.stats import grouped_stats
from wotbench.rundir.summary import LossBlock

COLUMNS = ["device", "requests", *OUTCOMES, "testbed_loss", "rt_p50_ms", "rt_p99_ms",
           "rt_max_ms", "rd_p50", "rd_p99", "device_in_p99_us", "service_p99_us"]


def _q(codes: np.ndarray, v: np.ndarray, n: int) -> dict[str, np.ndarray]:
    ok = ~np.isnan(v)
    return grouped_stats(codes[ok], v[ok], n, [0.5, 0.99])


def per_device_table(names: list[str], all_req: pd.DataFrame, all_codes: np.ndarray,
                     rd: np.ndarray, codes: np.ndarray, split: pd.DataFrame,
                     loss: LossBlock | None) -> pd.DataFrame:
    """``all_req``/``all_codes``: every counted request (GE rows, then the devices' own test
    requests); ``rd``/``codes``: R_d of the GE rows; ``split``: decomposition.split's frame."""
    n = len(names)
    out = pd.DataFrame({"device": names})
    oc = all_req["outcome"].cat.codes.to_numpy(np.int64)
    counts = np.bincount(all_codes * len(OUTCOMES) + oc,
                         minlength=n * len(OUTCOMES)).reshape(n, len(OUTCOMES))
    out["requests"] = counts.sum(axis=1)
    for j, o in enumerate(OUTCOMES):
        out[o] = counts[:, j]
    testbed = dict.fromkeys(names, 0)
    if loss is not None:
        testbed.update({k: v.get("testbed", 0) for k, v in loss.per_device.items()})
    out["testbed_loss"] = [testbed[k] for k in names]
    rt = _q(all_codes, all_req["rt_sent_ms"].to_numpy(np.float64), n)
    out["rt_p50_ms"], out["rt_p99_ms"] = rt["quantiles"][:, 0], rt["quantiles"][:, 1]
    out["rt_max_ms"] = rt["max"]
    r = _q(codes, rd, n)
    out["rd_p50"], out["rd_p99"] = r["quantiles"][:, 0], r["quantiles"][:, 1]
    sc = split["code"].to_numpy(np.int64)
    for col, part in (("device_in_p99_us", "device_in"), ("service_p99_us", "service")):
        out[col] = _q(sc, split[part].to_numpy(np.float64), n)["quantiles"][:, 1]
    return out[COLUMNS]
