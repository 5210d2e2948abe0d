"""Relative response-time deviation R_d and the response-time decomposition.

R_d = (R − S) / S per answered (``ok``) request, with R = received − sent (from the GE log) and S
the resource's ``service_time_us`` looked up by the request's path in the device's resource file.
Requests to resources with S = 0 or to unknown paths get no R_d.

Decomposition (device log joined to GE rows; all ms):
  network_stack = R − (end − arrival)   # both network directions + CoAP stacks
  queueing      = start − arrival       # waiting in the device's request queue
  service       = end − start           # the emulated service itself

Join rule (per device and path; device-log times are absolute CLOCK_MONOTONIC ns, GE times are
converted from ``start_mono_ns``-relative; the GE reads ``sent_ns`` right before sendto(), so
arrival > sent and ``join_slack_us`` defaults to 0):
  1. hi(l) = the GE request with the latest sent ≤ arrival(l) + slack (merge_asof backward).
     Log rows with no such request, arriving more than the GE timeout after it, or after it was
     already answered, belong to no request (probes, stray packets) and are dropped.
  2. The path GE → device is FIFO, so the mapping is monotone: in arrival order, each log row
     gets the latest request consistent with that, pos(l) = min(hi(l), pos(l+1) − 1), a reverse
     cumulative minimum per key. Requests to one path that are in flight together (request k+1
     sent before request k arrived) are thereby matched by order, and requests lost before the
     device are skipped instead of shifting the rest.
  3. A match is kept only if sent ≤ arrival (+ slack), arrival ≤ received (when answered) and
     arrival − sent ≤ the GE timeout; the rest count as unmatched.
Limitation: with ``--retransmit`` a duplicate arrival can displace a match (then step 3 usually
rejects it and it is counted as unmatched).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from wotbench.rundir import RdParams
from wotbench.rundir.summary import CdRd, RdBlock

from wotbench.analysis.loading import DeviceInfo
from wotbench.analysis.stats import grouped_stats, row_stats
from wotbench.rundir.values import json_clean

RD_QS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
DECOMP = ("network_stack", "queueing", "service")


def service_times_ms(req: pd.DataFrame, codes: np.ndarray,
                     resources: list[pd.DataFrame | None]) -> np.ndarray:
    """S in ms per request row (NaN when unknown); ``resources[code]`` is that device's file.

    A resource path ``*`` (used when only run.json's cd.service_time_us is known) matches all.
    """
    cats = req["path"].cat.categories
    n_cat = len(cats) + 1
    pcode = req["path"].cat.codes.to_numpy(np.int64)
    keys, vals, wild = [], [], np.full(len(resources), np.nan)
    users: dict[int, list[int]] = {}    # a frame many devices share (a fleet's) is looked up once
    frames: dict[int, pd.DataFrame] = {}
    for c, res in enumerate(resources):
        if res is not None and len(res):
            users.setdefault(id(res), []).append(c)
            frames[id(res)] = res
    for key, res in frames.items():
        cs = np.asarray(users[key], np.int64)
        paths = res["path"].astype(str).to_numpy()
        s_ms = res["service_time_us"].to_numpy(np.float64) / 1e3
        star = paths == "*"
        if star.any():
            wild[cs] = s_ms[star][0]
        idx = cats.get_indexer(paths[~star])
        ok = idx >= 0
        keys.append(np.add.outer(cs * n_cat, idx[ok]).ravel())
        vals.append(np.tile(s_ms[~star][ok], len(cs)))
    out = wild[codes] if len(codes) else np.zeros(0)
    k = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    if len(k):   # (no resource path among the requested ones: nothing to look up)
        v = np.concatenate(vals)
        order = np.argsort(k, kind="stable")
        k, v = k[order], v[order]
        rk = codes * n_cat + pcode
        pos = np.clip(np.searchsorted(k, rk), 0, max(len(k) - 1, 0))
        hit = (k[pos] == rk) & (pcode >= 0)
        out = np.where(hit, v[pos], out)
    return out


def rd_values(req: pd.DataFrame, s_ms: np.ndarray) -> np.ndarray:
    r = req["rt_sent_ms"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((s_ms > 0) & ~np.isnan(r), (r - s_ms) / s_ms, np.nan)


def _token_rows(req: pd.DataFrame, salts: dict[str, int]) -> dict[int, tuple[int, np.ndarray]]:
    """salt_hi -> (salt_lo, row of request index i at [i]) for every GE with a known salt."""
    out = {}
    ges = req["ge"].astype(str).to_numpy()
    idx = req["index"].to_numpy(np.int64)
    for ge, salt in salts.items():
        rows = np.flatnonzero(ges == ge)
        if not len(rows):
            continue
        lut = np.full(int(idx[rows].max()) + 1, -1, np.int64)
        lut[idx[rows]] = rows
        out[salt >> 32] = (salt & 0xFFFFFFFF, lut)
    return out


_HEX = np.full(256, -1, np.int64)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def token_words(token: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 32-bit words of 8-byte hex tokens, vectorised (high -1: not a GE
    token: empty, another length, not hex)."""
    tok = token.astype(object).where(token.notna(), "")
    ok = (tok.str.len() == 16).to_numpy()
    digits = _HEX[np.frombuffer(tok.to_numpy()[ok].astype("S16").tobytes(), np.uint8)
                  ].reshape(-1, 16)
    good = (digits >= 0).all(axis=1)
    weights = np.int64(16) ** np.arange(7, -1, -1, dtype=np.int64)
    hi, lo = np.full(len(token), -1, np.int64), np.zeros(len(token), np.int64)
    rows = np.flatnonzero(ok)[good]
    hi[rows] = digits[good, :8] @ weights
    lo[rows] = digits[good, 8:] @ weights
    return hi, lo


def _join_by_token(req: pd.DataFrame, codes: np.ndarray, c: int | np.ndarray, lg: pd.DataFrame,
                   tokens: dict[int, tuple[int, np.ndarray]], test_start_ns: int) -> pd.DataFrame:
    """Exact join of log rows that carry a GE token (salt_hi, salt_lo ^ index); ``c``: the
    device's code, or each row's (a fleet's log holds many devices)."""
    hi, lo = token_words(lg["token"])
    rows = np.full(len(lg), -1, np.int64)
    for salt_hi, (salt_lo, lut) in tokens.items():
        m = hi == salt_hi
        i = lo[m] ^ salt_lo
        r = np.where(i < len(lut), lut[np.minimum(i, len(lut) - 1)], -1)
        rows[np.flatnonzero(m)] = r
    keep = rows >= 0
    c = np.broadcast_to(np.asarray(c, np.int64), rows.shape)
    keep[keep] &= codes[rows[keep]] == c[keep]    # the token names a request to this device
    return pd.DataFrame({"row": rows[keep], "code": c[keep],
                         "arrival": lg["arrival_ns"].to_numpy(np.int64)[keep] - test_start_ns,
                         "start": lg["start_ns"].to_numpy(np.float64)[keep] - test_start_ns,
                         "end": lg["end_ns"].to_numpy(np.float64)[keep] - test_start_ns,
                         **_stamp_cols(lg, keep, test_start_ns)})


def _stamp_cols(lg: pd.DataFrame, keep: np.ndarray | slice, test_start_ns: int) -> dict[str, Any]:
    """arrival_k / dev_sent (float ns from the test start, NaN when the log has no such stamp):
    the device's kernel arrival stamp and when it handed the response to the kernel."""
    out = {}
    for name, col in (("arrival_k", "arrival_kernel_ns"), ("dev_sent", "response_sent_ns")):
        v = lg[col].to_numpy(np.float64) if col in lg.columns else np.full(len(lg), np.nan)
        out[name] = v[keep] - test_start_ns
    return out


def join_device_logs(req: pd.DataFrame, codes: np.ndarray, devices: list[DeviceInfo | None],
                     test_start_ns: int, timeout_ms: float, p: RdParams,
                     salts: dict[str, int] | None = None,
                     fleet_logs: Sequence[tuple[np.ndarray, pd.DataFrame]] = ()
                     ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Match device-log rows to GE rows. Returns (matched frame, counters).

    A log that records the request tokens (wot-device's ``token`` column) is joined exactly:
    a GE's token is its ``token_salt``'s high word, then the low word XOR the request index
    (``salts``: GE id -> salt). Other logs are joined by path and time (rule in the module
    docstring). Matched frame columns: row (position in ``req``), code, arrival, start, end,
    arrival_k, dev_sent (float ns relative to the test start; start/end NaN for requests no
    worker served, arrival_k/dev_sent NaN where the log has no such stamp).
    ``fleet_logs``: each wot-fleet engine's log (every device in one frame) with each row's
    device code (-1: a device outside ``devices``), joined by the same rules in one go.
    """
    cats = req["path"].cat.categories
    n_cat = len(cats) + 1
    logs = []
    exact = []
    log_rows = 0
    tokens = _token_rows(req, salts or {})
    per_device = [(c, dev.log) for c, dev in enumerate(devices)
                  if dev is not None and dev.log is not None and len(dev.log)]
    for c, lg in per_device + [(fc, flg) for fc, flg in fleet_logs if len(flg)]:
        if tokens and "token" in lg.columns:
            log_rows += len(lg)
            exact.append(_join_by_token(req, codes, c, lg, tokens, test_start_ns))
            continue
        log_rows += len(lg)
        pc = cats.get_indexer(lg["path"].astype(str).to_numpy())
        logs.append(pd.DataFrame({
            "key": np.where((pc >= 0) & (np.asarray(c) >= 0), c * n_cat + pc, -1
                            ).astype(np.int64),
            "arrival": lg["arrival_ns"].to_numpy(np.int64) - test_start_ns,
            "start": lg["start_ns"].to_numpy(np.float64) - test_start_ns,   # NaN: not served
            "end": lg["end_ns"].to_numpy(np.float64) - test_start_ns,
            **_stamp_cols(lg, slice(None), test_start_ns),
        }))
    counters = {"log_rows": log_rows, "matched": 0, "unmatched_log_rows": log_rows}
    empty = pd.DataFrame({"row": np.zeros(0, np.int64), "code": np.zeros(0, np.int64),
                          "arrival": [], "start": [], "end": [], "arrival_k": [], "dev_sent": []})
    matched = [_join_by_time(req, codes, logs, n_cat, timeout_ms, p)] if logs else []
    parts = [m for m in exact + matched if len(m)]
    if not parts:
        return empty, counters
    out = pd.concat(parts, ignore_index=True)
    counters["matched"] = int(len(out))
    counters["unmatched_log_rows"] = int(log_rows - len(out))
    return out, counters


def _join_by_time(req: pd.DataFrame, codes: np.ndarray, logs: list[pd.DataFrame], n_cat: int,
                  timeout_ms: float, p: RdParams) -> pd.DataFrame:
    """Join log rows (key = device * n_cat + path, arrival, start, end) to GE rows by path and
    time: the rule in the module docstring."""
    left = pd.concat(logs, ignore_index=True)
    left = left[left["key"] >= 0]
    slack = int(p.join_slack_us * 1e3)
    left["probe"] = left["arrival"] + slack

    sent = req["sent"].to_numpy()
    recv_all = req["recv"].to_numpy()
    m = ~np.isnan(sent)
    right = pd.DataFrame({
        "key": (codes[m] * n_cat + req["path"].cat.codes.to_numpy(np.int64)[m]),
        "sent_i": np.round(sent[m]).astype(np.int64),
        "row": np.nonzero(m)[0],
    }).sort_values(["key", "sent_i"], kind="stable").reset_index(drop=True)
    k_arr = right["key"].to_numpy(np.int64)
    s_arr = right["sent_i"].to_numpy(np.int64)
    r_arr = right["row"].to_numpy(np.int64)
    right["pos"] = np.arange(len(right), dtype=np.int64)
    j = pd.merge_asof(left.sort_values("probe", kind="stable"),
                      right.sort_values("sent_i", kind="stable")[["key", "sent_i", "pos"]],
                      left_on="probe", right_on="sent_i", by="key", direction="backward",
                      allow_exact_matches=True).dropna(subset=["pos"])
    hi = j["pos"].to_numpy(np.int64)
    arr = j["arrival"].to_numpy(np.int64)
    # log rows that belong to no GE request: later than the timeout after the latest possible
    # send, or arriving after that request was already answered with nothing else in flight
    rec_hi = recv_all[r_arr[hi]]
    plausible = (arr - s_arr[hi] <= timeout_ms * 1e6) & ~(rec_hi + slack < arr)
    j = j[plausible].sort_values(["key", "arrival"], kind="stable").reset_index(drop=True)
    # latest monotone assignment: pos(l) = min(hi(l), pos(l+1) - 1) within each key
    rank = j.groupby("key", sort=False).cumcount().to_numpy(np.int64)
    d = pd.Series(j["pos"].to_numpy(np.int64) - rank)
    sufmin = d[::-1].groupby(j["key"].to_numpy()[::-1], sort=False).cummin()[::-1].to_numpy()
    pos = sufmin + rank
    posc = np.clip(pos, 0, max(len(k_arr) - 1, 0))
    key = j["key"].to_numpy(np.int64)
    arr = j["arrival"].to_numpy(np.float64)
    rows = r_arr[posc]
    recv = recv_all[rows]
    snt = sent[rows]
    valid = ((pos >= 0) & (k_arr[posc] == key) & (arr + slack >= snt)
             & (np.isnan(recv) | (arr <= recv + slack)) & (arr - snt <= timeout_ms * 1e6))
    j = j[valid].assign(row=rows[valid])
    out = pd.DataFrame({"row": j["row"].to_numpy(np.int64),
                        "code": codes[j["row"].to_numpy(np.int64)],
                        "arrival": j["arrival"].to_numpy(np.float64),
                        "start": j["start"].to_numpy(np.float64),
                        "end": j["end"].to_numpy(np.float64),
                        "arrival_k": j["arrival_k"].to_numpy(np.float64),
                        "dev_sent": j["dev_sent"].to_numpy(np.float64)})
    return out


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


def _stats_rows(codes: np.ndarray, v: np.ndarray, n: int, unit: str, detail: bool = True
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    m = ~np.isnan(v)
    qs = list(RD_QS.values())
    a = grouped_stats(np.zeros(int(m.sum()), np.int64), v[m], 1, qs)
    if not detail:
        return [], row_stats(a, 0, RD_QS, unit)
    g = grouped_stats(codes[m], v[m], n, qs)
    return [row_stats(g, i, RD_QS, unit) for i in range(n)], row_stats(a, 0, RD_QS, unit)


def cd_rd(cd: pd.DataFrame, name: str) -> CdRd:
    """The CD node's R_d per phase; ``cd``: its samples (phase, rd, outcome)."""
    ph = cd["phase"].to_numpy()
    block: dict[str, Any] = {"device": name}
    for phase in ("calibration", "test"):
        v = cd["rd"].to_numpy()[ph == phase]
        v = v[~np.isnan(v)]
        st = row_stats(grouped_stats(np.zeros(len(v), np.int64), v, 1, list(RD_QS.values())),
                       0, RD_QS, "")
        st["lost"] = int(((cd["outcome"] != "ok") & (cd["outcome"] != "unsent"))
                         .to_numpy()[ph == phase].sum())
        block[phase] = st
    return CdRd.model_validate(json_clean(block))


def rd_block(rd: np.ndarray, codes: np.ndarray, names: list[str], dec: pd.DataFrame,
             counters: dict[str, int], has_s: np.ndarray, cd: Optional[CdRd] = None,
             detail: bool = True) -> RdBlock:
    """The ``rd`` block of summary.json for the main devices (and the CD node's, when given;
    ``detail`` False: no per-device block)."""
    n = len(names)
    per_rd, all_rd = _stats_rows(codes, rd, n, "", detail)
    dec_codes = dec["code"].to_numpy(np.int64)
    per_dec = {k: _stats_rows(dec_codes, dec[k].to_numpy(), n, "_ms", detail) for k in DECOMP}
    per_device = {}
    for i, name in enumerate(names if detail else []):
        per_device[name] = {
            "rd": per_rd[i],
            "decomposition_ms": {k: per_dec[k][0][i] for k in DECOMP},
        }
    return RdBlock.model_validate(json_clean({
        "definition": "R_d = (R - S) / S, R = received - sent, S = service_time_us of the path",
        "requests_with_s": int(np.count_nonzero(has_s)),
        "overall": {"rd": all_rd, "decomposition_ms": {k: per_dec[k][1] for k in DECOMP}},
        "join": counters,
        "per_device": per_device,
    })).model_copy(update={"cd": cd})


def rd_series(req: pd.DataFrame, rd: np.ndarray, codes: np.ndarray, names: list[str],
              window_s: float, label_all: str = "all", detail: bool = True) -> pd.DataFrame:
    """R_d per window (of the scheduled send, relative to the test start) per device + 'all'
    (``detail`` False: 'all' only)."""
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
    for grp, ng, is_dev in ((c * nw + wi, len(names) * nw, True), (wi, nw, False))[
            0 if detail else 1:]:
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
