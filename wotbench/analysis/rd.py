"""Relative response-time deviation R_d and the response-time decomposition.

R_d = (R − S) / S per answered (``ok``) request, with R = received − sent (from the GE log) and S
the resource's ``service_time_us`` looked up by the request's path in the device's resource file.
Requests to resources with S = 0 or to unknown paths get no R_d.

Decomposition (device log joined to GE rows; all ms):
  network_stack = R − (end − arrival)   # both network directions + CoAP stacks
  queueing      = start − arrival       # waiting in the device's request queue
  service       = end − start           # the emulated service itself

Join rule: per device and path, every device-log row is attributed to the GE request to the same
device and path with the latest ``sent`` ≤ ``arrival + join_slack`` (pandas merge_asof,
backward; device-log times are absolute CLOCK_MONOTONIC ns, GE times are converted from
``start_mono_ns``-relative). A GE request claimed by several log rows is resolved by order (see
``_resolve_conflicts``: concurrent requests to one path shift back to the preceding unclaimed
requests; retransmission duplicates keep the earliest arrival). A match is discarded if the arrival is later than the request's receive time
(+ slack) or more than the GE timeout after the send. Lost requests that never reached the
device therefore stay unmatched instead of stealing the next request's log row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .loading import DeviceInfo
from .stats import fnum, grouped_stats

RD_QS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
DECOMP = ("network_stack", "queueing", "service")


@dataclass
class RdParams:
    join_slack_us: float = 50.0
    window_s: float = 10.0


def service_times_ms(req: pd.DataFrame, codes: np.ndarray,
                     resources: list[pd.DataFrame | None]) -> np.ndarray:
    """S in ms per request row (NaN when unknown); ``resources[code]`` is that device's file.

    A resource path ``*`` (used when only run.json's cd.service_time_us is known) matches all.
    """
    cats = req["path"].cat.categories
    n_cat = len(cats) + 1
    pcode = req["path"].cat.codes.to_numpy(np.int64)
    keys, vals, wild = [], [], np.full(len(resources), np.nan)
    for c, res in enumerate(resources):
        if res is None or len(res) == 0:
            continue
        paths = res["path"].astype(str).to_numpy()
        s_ms = res["service_time_us"].to_numpy(np.float64) / 1e3
        star = paths == "*"
        if star.any():
            wild[c] = s_ms[star][0]
        idx = cats.get_indexer(paths[~star])
        ok = idx >= 0
        keys.append(c * n_cat + idx[ok])
        vals.append(s_ms[~star][ok])
    out = wild[codes] if len(codes) else np.zeros(0)
    if keys:
        k = np.concatenate(keys)
        v = np.concatenate(vals)
        order = np.argsort(k, kind="stable")
        k, v = k[order], v[order]
        rk = codes * n_cat + pcode
        pos = np.clip(np.searchsorted(k, rk), 0, max(len(k) - 1, 0))
        hit = (len(k) > 0) & (k[pos] == rk) & (pcode >= 0)
        out = np.where(hit, v[pos], out)
    return out


def rd_values(req: pd.DataFrame, s_ms: np.ndarray) -> np.ndarray:
    r = req["rt_sent_ms"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((s_ms > 0) & ~np.isnan(r), (r - s_ms) / s_ms, np.nan)


def join_device_logs(req: pd.DataFrame, codes: np.ndarray, devices: list[DeviceInfo | None],
                     test_start_ns: int, timeout_ms: float, p: RdParams
                     ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Match device-log rows to GE rows. Returns (matched frame, counters).

    Matched frame columns: row (position in ``req``), code, arrival, start, end (float ns relative
    to the test start).
    """
    cats = req["path"].cat.categories
    n_cat = len(cats) + 1
    logs = []
    log_rows = 0
    for c, dev in enumerate(devices):
        if dev is None or dev.log is None or len(dev.log) == 0:
            continue
        lg = dev.log
        log_rows += len(lg)
        pc = cats.get_indexer(lg["path"].astype(str).to_numpy())
        logs.append(pd.DataFrame({
            "key": np.where(pc >= 0, c * n_cat + pc, -1).astype(np.int64),
            "arrival": lg["arrival_ns"].to_numpy(np.int64) - test_start_ns,
            "start": lg["start_ns"].to_numpy(np.int64) - test_start_ns,
            "end": lg["end_ns"].to_numpy(np.int64) - test_start_ns,
        }))
    counters = {"log_rows": log_rows, "matched": 0, "unmatched_log_rows": log_rows}
    empty = pd.DataFrame({"row": np.zeros(0, np.int64), "code": np.zeros(0, np.int64),
                          "arrival": [], "start": [], "end": []})
    if not logs:
        return empty, counters
    left = pd.concat(logs, ignore_index=True)
    left = left[left["key"] >= 0]
    slack = int(p.join_slack_us * 1e3)
    left["probe"] = left["arrival"] + slack
    left = left.sort_values("probe", kind="stable")

    sent = req["sent"].to_numpy()
    m = ~np.isnan(sent)
    rows = np.nonzero(m)[0]
    right = pd.DataFrame({
        "key": (codes[m] * n_cat + req["path"].cat.codes.to_numpy(np.int64)[m]),
        "sent_i": np.round(sent[m]).astype(np.int64),
        "row": rows,
    }).sort_values("sent_i", kind="stable")
    j = pd.merge_asof(left, right, left_on="probe", right_on="sent_i", by="key",
                      direction="backward", allow_exact_matches=True)
    j = j.dropna(subset=["row"])
    j["row"] = j["row"].astype(np.int64)
    j = _resolve_conflicts(j, right, len(req), slack)
    recv = req["recv"].to_numpy()[j["row"].to_numpy()]
    arr = j["arrival"].to_numpy(np.float64)
    snt = sent[j["row"].to_numpy()]
    valid = (np.isnan(recv) | (arr <= recv + slack)) & (arr - snt <= timeout_ms * 1e6)
    j = j[valid]
    out = pd.DataFrame({"row": j["row"].to_numpy(np.int64),
                        "code": codes[j["row"].to_numpy(np.int64)],
                        "arrival": j["arrival"].to_numpy(np.float64),
                        "start": j["start"].to_numpy(np.float64),
                        "end": j["end"].to_numpy(np.float64)})
    counters["matched"] = int(len(out))
    counters["unmatched_log_rows"] = int(log_rows - len(out))
    return out, counters


def _resolve_conflicts(j: pd.DataFrame, right: pd.DataFrame, n_rows: int, slack: int
                       ) -> pd.DataFrame:
    """Give every GE row at most one log row.

    c > 1 log rows claiming GE row r (sorted by arrival) arise from (a) requests to the same path
    in flight at once — the earlier arrivals belong to the preceding, unclaimed GE rows of the
    same key — or (b) retransmissions — duplicates of r. The i-th of c claimants moves to the
    GE row c−1−i places earlier in the key's send order when that row exists, is unclaimed and
    was sent by the claimant's arrival (+ slack); the last claimant keeps r. When no claimant
    can move, the earliest keeps r (retransmission) and the others are dropped.
    """
    j = j.sort_values(["row", "arrival"], kind="stable").reset_index(drop=True)
    rows = j["row"].to_numpy(np.int64)
    c = j.groupby("row", sort=False)["row"].transform("size").to_numpy(np.int64)
    if (c <= 1).all():
        return j
    i = j.groupby("row", sort=False).cumcount().to_numpy(np.int64)
    key_sorted = right.sort_values(["key", "sent_i"], kind="stable")
    k_arr = key_sorted["key"].to_numpy(np.int64)
    r_arr = key_sorted["row"].to_numpy(np.int64)
    s_arr = key_sorted["sent_i"].to_numpy(np.int64)
    inv = np.full(n_rows, -1, np.int64)
    inv[r_arr] = np.arange(len(r_arr))
    claimed = np.zeros(n_rows, bool)
    claimed[rows] = True
    t = inv[rows] - (c - 1 - i)
    tc = np.clip(t, 0, max(len(r_arr) - 1, 0))
    valid = ((i < c - 1) & (t >= 0) & (k_arr[tc] == j["key"].to_numpy(np.int64))
             & ~claimed[r_arr[tc]] & (s_arr[tc] <= j["arrival"].to_numpy(np.int64) + slack))
    any_valid = pd.Series(valid).groupby(rows).transform("any").to_numpy(bool)
    new_row = np.where(valid, r_arr[tc], rows)
    keep = np.where(any_valid, valid | (i == c - 1), i == 0)
    j = j.assign(row=new_row)[keep]
    return j.sort_values(["row", "arrival"], kind="stable").drop_duplicates("row", keep="first")


def decomposition(req: pd.DataFrame, matched: pd.DataFrame) -> pd.DataFrame:
    """Per matched ``ok`` request: code, network_stack, queueing, service (ms)."""
    rt = req["rt_sent_ms"].to_numpy()[matched["row"].to_numpy()]
    ok = ~np.isnan(rt)
    mt = matched[ok]
    rt = rt[ok]
    dev_ms = (mt["end"].to_numpy() - mt["arrival"].to_numpy()) / 1e6
    return pd.DataFrame({
        "code": mt["code"].to_numpy(),
        "network_stack": rt - dev_ms,
        "queueing": (mt["start"].to_numpy() - mt["arrival"].to_numpy()) / 1e6,
        "service": (mt["end"].to_numpy() - mt["start"].to_numpy()) / 1e6,
    })


def _stats_rows(codes: np.ndarray, v: np.ndarray, n: int, unit: str
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    m = ~np.isnan(v)
    qs = list(RD_QS.values())
    g = grouped_stats(codes[m], v[m], n, qs)
    a = grouped_stats(np.zeros(int(m.sum()), np.int64), v[m], 1, qs)

    def one(gg: dict[str, np.ndarray], i: int) -> dict[str, Any]:
        d = {"count": int(gg["count"][i]), f"mean{unit}": fnum(gg["mean"][i])}
        for j, k in enumerate(RD_QS):
            d[f"{k}{unit}"] = fnum(gg["quantiles"][i, j])
        d[f"max{unit}"] = fnum(gg["max"][i])
        return d

    return [one(g, i) for i in range(n)], one(a, 0)


def rd_block(rd: np.ndarray, codes: np.ndarray, names: list[str], dec: pd.DataFrame,
             counters: dict[str, int], has_s: np.ndarray) -> dict[str, Any]:
    """The ``rd`` block of summary.json for the main devices."""
    n = len(names)
    per_rd, all_rd = _stats_rows(codes, rd, n, "")
    dec_codes = dec["code"].to_numpy(np.int64)
    per_dec = {k: _stats_rows(dec_codes, dec[k].to_numpy(), n, "_ms") for k in DECOMP}
    per_device = {}
    for i, name in enumerate(names):
        per_device[name] = {
            "rd": per_rd[i],
            "decomposition_ms": {k: per_dec[k][0][i] for k in DECOMP},
        }
    return {
        "definition": "R_d = (R - S) / S, R = received - sent, S = service_time_us of the path",
        "requests_with_s": int(np.count_nonzero(has_s)),
        "overall": {"rd": all_rd, "decomposition_ms": {k: per_dec[k][1] for k in DECOMP}},
        "join": counters,
        "per_device": per_device,
    }


def rd_series(req: pd.DataFrame, rd: np.ndarray, codes: np.ndarray, names: list[str],
              window_s: float, label_all: str = "all") -> pd.DataFrame:
    """R_d per window (of the scheduled send, relative to the test start) per device + 'all'."""
    m = ~np.isnan(rd)
    cols = ["window_start_s", "window_end_s", "device", "count", "p50_rd", "p95_rd", "mean_rd"]
    if not m.any():
        return pd.DataFrame(columns=cols)
    w = np.floor(req["sched"].to_numpy()[m] / 1e9 / window_s).astype(np.int64)
    wmin = int(w.min())
    wi = w - wmin
    nw = int(wi.max()) + 1
    v = rd[m]
    c = codes[m]
    frames = []
    for grp, ng, is_dev in ((c * nw + wi, len(names) * nw, True), (wi, nw, False)):
        g = grouped_stats(grp, v, ng, [0.5, 0.95])
        keep = np.nonzero(g["count"] > 0)[0]
        widx = keep % nw if is_dev else keep
        frames.append(pd.DataFrame({
            "window_start_s": (widx + wmin) * window_s,
            "window_end_s": (widx + wmin + 1) * window_s,
            "device": [names[i] for i in keep // nw] if is_dev else label_all,
            "count": g["count"][keep],
            "p50_rd": g["quantiles"][keep, 0],
            "p95_rd": g["quantiles"][keep, 1],
            "mean_rd": g["mean"][keep],
        }))
    return pd.concat(frames, ignore_index=True)[cols]
