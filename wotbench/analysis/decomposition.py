"""Where R − S goes: the testbed's own share of a response time, split by place.

Per answered (``ok``) request matched to its device-log row (``rd.join_device_logs``), with all
stamps on the host's one CLOCK_MONOTONIC (ns; GE times from requests.csv, device times from
device-log.csv):

  sent        GE, read right before sendto()
  arrival_k   device, kernel receive stamp of the request (SO_TIMESTAMPNS)
  start, end  device, the emulated service
  dev_sent    device, read right before the response went to sendmsg()
  recv        GE, kernel receive stamp of the response (``received_kernel_ns``)
  recv_user   GE, when its loop read the response (``received_ns``)

  R − S          = recv − sent − S
  network        = network_out + network_back (both ways: stacks, bridge, impairments)
    network_out  = arrival_k − sent
    network_back = recv − dev_sent
  device         = device_in + device_out (queueing + hand-offs inside the device)
    device_in    = start − arrival_k   (I/O-thread wake-up, queue, hand-off to a worker)
    device_out   = dev_sent − end      (hand-back to the I/O thread, libcoap, send call)
  service        = (end − start) − S   (the emulation's overshoot; stretched by contention)
  ge_side        = recv_user − recv    (the GE's read delay; not part of R, which ends at the
                                        kernel stamp, but part of every R measured before)

network + device + service = R − S exactly. Older logs lack some stamps; then the split falls
back and says so in ``stamps``: without a device kernel stamp ``arrival`` (read in the handler)
stands in for arrival_k, without dev_sent the hand-back is counted as network (device_out NaN),
and without the GE's kernel stamp R ends at recv_user and ge_side is unknown (NaN).
All figures are µs.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from wotbench.analysis.stats import grouped_stats, row_stats
from wotbench.rundir.values import json_clean
from wotbench.rundir.summary import CdSplit, SplitBlock

QS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
PARTS = ("r_minus_s", "network", "network_out", "network_back", "device", "device_in",
         "device_out", "service", "ge_side")
DEFINITION = ("R - S = network (out + back) + device (in + out: queueing and hand-offs) + "
              "service (end - start - S); ge_side = the GE's read delay after the kernel stamp "
              "(not part of R). Kernel receive stamps at both ends; see "
              "wotbench/analysis/decomposition.py")


def split(req: pd.DataFrame, matched: pd.DataFrame, s_ms: np.ndarray) -> pd.DataFrame:
    """One row per matched ``ok`` request with a known S: row (in ``req``), code, kernel (all
    stamps present) and the PARTS (µs).

    ``req`` is ``responses.combine_ge`` output, ``matched`` ``rd.join_device_logs`` output and
    ``s_ms`` the service time per ``req`` row (NaN = unknown).
    """
    rows = matched["row"].to_numpy(np.int64)
    outcome = req["outcome"].to_numpy()[rows] if len(rows) else np.zeros(0, object)
    s = s_ms[rows] if len(rows) else np.zeros(0)
    sent = req["sent"].to_numpy()[rows]
    recv = req["recv"].to_numpy()[rows]
    recv_user = req["recv_user"].to_numpy()[rows]
    ge_k = ~np.isnan(req["recv_kernel"].to_numpy()[rows])
    keep = (outcome == "ok") & ~np.isnan(recv) & ~np.isnan(s) & ~np.isnan(sent)
    m = matched[keep]
    sent, recv, recv_user, s = sent[keep], recv[keep], recv_user[keep], s[keep] * 1e6
    ge_k = ge_k[keep]
    start, end = m["start"].to_numpy(np.float64), m["end"].to_numpy(np.float64)
    arrival = m["arrival"].to_numpy(np.float64)
    arr_k = m["arrival_k"].to_numpy(np.float64) if "arrival_k" in m.columns else arrival * np.nan
    dev_sent = m["dev_sent"].to_numpy(np.float64) if "dev_sent" in m.columns else arr_k * np.nan
    dev_k = ~np.isnan(arr_k)
    arr = np.where(dev_k, arr_k, arrival)
    has_out = ~np.isnan(dev_sent)
    back_from = np.where(has_out, dev_sent, end)
    parts = {
        "r_minus_s": recv - sent - s,
        "network_out": arr - sent,
        "network_back": recv - back_from,
        "device_in": start - arr,
        "device_out": np.where(has_out, dev_sent - end, np.nan),
        "service": end - start - s,
        "ge_side": np.where(ge_k, recv_user - recv, np.nan),
    }
    parts["network"] = parts["network_out"] + parts["network_back"]
    parts["device"] = parts["device_in"] + np.where(has_out, parts["device_out"], 0.0)
    out = pd.DataFrame({"row": m["row"].to_numpy(np.int64), "code": m["code"].to_numpy(np.int64),
                        "kernel": dev_k & ge_k & has_out})
    for k in PARTS:
        out[k] = parts[k] / 1e3
    return out


def _stamps(kernel: np.ndarray) -> str:
    if len(kernel) == 0:
        return "none"
    return "kernel" if kernel.all() else "user" if not kernel.any() else "mixed"


def _stats(codes: np.ndarray, frame: pd.DataFrame, i: Optional[int]) -> dict[str, Any]:
    """The PARTS of group i (None: all rows) as {part: {count, mean_us, p50_us, ...}}."""
    block: dict[str, Any] = {}
    sel = np.ones(len(frame), bool) if i is None else codes == i
    block["stamps"] = _stamps(frame["kernel"].to_numpy()[sel])
    for k in PARTS:
        v = frame[k].to_numpy()[sel]
        v = v[~np.isnan(v)]
        g = grouped_stats(np.zeros(len(v), np.int64), v, 1, list(QS.values()))
        block[k] = row_stats(g, 0, QS, "_us")
    return block


def split_block(frame: pd.DataFrame, names: list[str], cd: Optional[CdSplit] = None,
                detail: bool = True) -> SplitBlock:
    """The ``decomposition`` block for the frame of :func:`split` (the CD node's, when given;
    ``detail`` False: no per-device block)."""
    codes = frame["code"].to_numpy(np.int64)
    return SplitBlock.model_validate(json_clean({
        "definition": DEFINITION, "overall": _stats(codes, frame, None),
        "per_device": {name: _stats(codes, frame, i)
                       for i, name in enumerate(names if detail else [])
                       if (codes == i).any()}})).model_copy(
        update={"cd": cd})


def cd_block(frame: pd.DataFrame, phase: np.ndarray) -> CdSplit:
    """The CD node's split per phase (calibration, test); ``phase`` per frame row."""
    codes = np.zeros(len(frame), np.int64)
    return CdSplit.model_validate(json_clean(
        {ph: _stats(codes[phase == ph], frame[phase == ph].reset_index(drop=True), None)
         for ph in ("calibration", "test")}))
