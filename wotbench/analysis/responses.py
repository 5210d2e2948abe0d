"""Per-device and overall request outcomes, throughput and response times."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from wotbench.analysis.loading import OUTCOMES, GeData, RunData
from wotbench.analysis.stats import RT_QUANTILES, fnum, grouped_stats, row_stats
from wotbench.rundir.values import json_clean
from wotbench.rundir.summary import DeviceResponses, Overall

NS_PER_MS = 1e6
SERIES_QS = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def combine_ge(ges: list[GeData], test_start_ns: int) -> pd.DataFrame:
    """Concatenate GE request logs; times become float ns relative to the test start.

    Columns: ge, index, device (trace device id), method, path, sched, sent, recv, recv_user,
    recv_kernel (float ns relative to ``test_start_ns``; NaN when empty), code, outcome,
    retransmissions, client (the client endpoint, NaN without one),
    rt_sent_ms / rt_sched_ms (response time from the actual / scheduled send; NaN unless the
    outcome is ``ok`` with a receive time: lost requests never count as 0 ms).

    ``recv`` is the kernel's receive stamp (``received_kernel_ns``) where the GE recorded one,
    else the time its loop read the response (``received_ns``, ``recv_user``): R then
    does not include how long the GE took to wake up.
    """
    frames = []
    for g in ges:
        df = g.requests
        off = float(g.start_mono_ns - test_start_ns)
        user = df["received_ns"].to_numpy(np.float64) + off
        kern = (df["received_kernel_ns"].to_numpy(np.float64) + off
                if "received_kernel_ns" in df.columns else np.full(len(df), np.nan))
        frames.append(pd.DataFrame({
            "ge": np.full(len(df), g.ge_id, dtype=object),
            "index": df["index"].to_numpy(),
            "device": df["device"].to_numpy(np.int64),
            "method": df["method"],
            "path": df["path"],
            "sched": df["scheduled_ns"].to_numpy(np.float64) + off,
            "sent": df["sent_ns"].to_numpy(np.float64) + off,
            # HTTP: when it began waiting for a busy target's connection (NaN: it did not)
            "queued": (df["queued_ns"].to_numpy(np.float64) + off if "queued_ns" in df.columns
                       else np.full(len(df), np.nan)),
            "recv": np.where(np.isnan(kern), user, kern),
            "recv_user": user,
            "recv_kernel": kern,
            "code": df["code"],
            "outcome": df["outcome"],
            "retransmissions": df["retransmissions"].to_numpy(np.float64),
            # the client endpoint (closed loop, or a trace's client column); NaN: none
            "client": (df["client"].to_numpy(np.float64) if "client" in df.columns
                       else np.full(len(df), np.nan)),
        }))
    if not frames:   # no main GE: the typed empty table (categoricals, floats) its readers expect
        cat = pd.Categorical([])
        f = {c: np.zeros(0) for c in ("sched", "sent", "queued", "recv", "recv_user", "recv_kernel",
                                     "retransmissions", "client", "rt_sent_ms", "rt_sched_ms")}
        return pd.DataFrame({"ge": cat, "index": np.zeros(0, np.int64),
                             "device": np.zeros(0, np.int64), "method": cat, "path": cat, **f,
                             "code": cat, "outcome": pd.Categorical([], categories=list(OUTCOMES)),
                             })[["ge", "index", "device", "method", "path", "sched", "sent",
                                 "queued", "recv", "recv_user", "recv_kernel", "code", "outcome",
                                 "retransmissions", "client", "rt_sent_ms", "rt_sched_ms"]]
    if len(frames) == 1:
        out = frames[0]
    else:
        for col in ("method", "path", "code"):
            uc = union_categoricals([f[col] for f in frames])
            for f in frames:
                f[col] = pd.Categorical(f[col], categories=uc.categories)
        out = pd.concat(frames, ignore_index=True)
    out["ge"] = out["ge"].astype("category")
    out["outcome"] = out["outcome"].astype(pd.CategoricalDtype(list(OUTCOMES)))
    answered = (out["outcome"].to_numpy() == "ok") & ~np.isnan(out["recv"].to_numpy())
    recv = out["recv"].to_numpy()
    out["rt_sent_ms"] = np.where(answered, (recv - out["sent"].to_numpy()) / NS_PER_MS, np.nan)
    out["rt_sched_ms"] = np.where(answered, (recv - out["sched"].to_numpy()) / NS_PER_MS, np.nan)
    return out


def device_codes(req: pd.DataFrame, run: RunData) -> tuple[np.ndarray, list[str]]:
    """Map trace device ids to codes 0..n-1 into a list of device names (run.json order)."""
    names = list(run.devices)
    id_to_code = {}
    for i, (name, d) in enumerate(run.devices.items()):
        if d.id is not None:
            id_to_code[int(d.id)] = i
    ids = req["device"].to_numpy(np.int64)
    uniq = np.unique(ids)
    for u in uniq:
        if int(u) not in id_to_code:
            run.warnings.append(f"device id {int(u)} in a GE log is not in run.json devices; "
                                f"reported as dev-{int(u)}")
            id_to_code[int(u)] = len(names)
            names.append(f"dev-{int(u)}")
    lut_keys = np.array(sorted(id_to_code), dtype=np.int64)
    lut_vals = np.array([id_to_code[k] for k in lut_keys], dtype=np.int64)
    codes = lut_vals[np.searchsorted(lut_keys, ids)] if len(ids) else np.zeros(0, np.int64)
    return codes, names


def _outcome_block(counts: np.ndarray, requests: int, duration_s: float) -> dict[str, Any]:
    """counts: array over OUTCOMES."""
    oc = {o: int(c) for o, c in zip(OUTCOMES, counts)}
    sent = requests - oc["unsent"]
    return {
        "requests": int(requests),
        "sent": int(sent),
        "outcomes": oc,
        "rates": {o: (oc[o] / requests if requests else None) for o in OUTCOMES},
        "loss_rate_of_sent": (oc["timeout"] / sent if sent else None),
        "offered_rps": requests / duration_s if duration_s else None,
        "throughput_rps": oc["ok"] / duration_s if duration_s else None,
    }


def compute_responses(req: pd.DataFrame, codes: np.ndarray, names: list[str],
                      duration_s: float, detail: bool = True
                      ) -> tuple[Overall, dict[str, DeviceResponses]]:
    """The ``overall`` and ``per_device`` blocks of summary.json (``detail`` False: no
    per-device block, ``AnalysisParams.per_device_max``)."""
    n = len(names)
    oc_codes = req["outcome"].cat.codes.to_numpy(np.int64)
    counts = np.zeros((n, len(OUTCOMES)), dtype=np.int64)
    _add_counts(counts, codes, oc_codes)
    rt = {}
    for key, col in (("from_sent", "rt_sent_ms"), ("from_scheduled", "rt_sched_ms")):
        v = req[col].to_numpy()
        m = ~np.isnan(v)
        rt[key] = (grouped_stats(codes[m], v[m], n, list(RT_QUANTILES.values())),
                   grouped_stats(np.zeros(int(m.sum()), np.int64), v[m], 1,
                                 list(RT_QUANTILES.values())))
    ge_of_device: dict[int, str] = {}
    if len(req):
        first = pd.DataFrame({"c": codes, "g": req["ge"].astype(str).to_numpy()}).drop_duplicates("c")
        ge_of_device = dict(zip(first["c"].tolist(), first["g"].tolist()))
    per_device: dict[str, Any] = {}
    for i, name in enumerate(names if detail else []):
        block = _outcome_block(counts[i], int(counts[i].sum()), duration_s)
        block["ge"] = ge_of_device.get(i)
        block["response_time_ms"] = {k: row_stats(rt[k][0], i) for k in rt}
        per_device[name] = block
    tot = counts.sum(axis=0)
    overall = _outcome_block(tot, int(tot.sum()), duration_s)
    overall["devices"] = n
    overall["duration_s"] = duration_s
    overall["response_time_ms"] = {k: row_stats(rt[k][1], 0) for k in rt}
    overall["response_codes"] = response_codes(req)
    return (Overall.model_validate(json_clean(overall)),
            {k: DeviceResponses.model_validate(json_clean(v)) for k, v in per_device.items()})


def _add_counts(counts: np.ndarray, codes: np.ndarray, oc_codes: np.ndarray) -> None:
    k = counts.shape[1]
    flat = np.bincount(codes * k + oc_codes, minlength=counts.size)
    counts += flat.reshape(counts.shape)


def response_series(req: pd.DataFrame, codes: np.ndarray, names: list[str],
                    detail: bool = True) -> pd.DataFrame:
    """Per second (of the scheduled send, relative to the test start) and device (+ 'all';
    ``detail`` False: 'all' only)."""
    sec = np.floor(req["sched"].to_numpy() / 1e9)
    rows = []
    if len(req) == 0:
        return pd.DataFrame(columns=["second", "device", "count", "p50_ms", "p95_ms", "p99_ms",
                                     "p50_sched_ms", "p95_sched_ms", "p99_sched_ms"])
    smin = int(np.nanmin(sec))
    s_idx = (sec - smin).astype(np.int64)
    n_sec = int(s_idx.max()) + 1
    qs = list(SERIES_QS.values())
    n = len(names)
    for label, grp, ngroups in (("dev", codes * n_sec + s_idx, n * n_sec),
                                ("all", s_idx, n_sec))[0 if detail else 1:]:
        cols = {}
        for key, col in (("", "rt_sent_ms"), ("_sched", "rt_sched_ms")):
            v = req[col].to_numpy()
            m = ~np.isnan(v)
            g = grouped_stats(grp[m], v[m], ngroups, qs)
            if key == "":
                cols["count"] = g["count"]  # answered (ok) requests in that second
            for j, k in enumerate(SERIES_QS):
                cols[f"{k}{key}_ms"] = g["quantiles"][:, j]
        all_count = np.bincount(grp, minlength=ngroups)
        keep = all_count > 0
        idx = np.nonzero(keep)[0]
        df = pd.DataFrame({k: v[keep] for k, v in cols.items()})
        if label == "dev":
            df.insert(0, "device", [names[i] for i in idx // n_sec])
            df.insert(0, "second", idx % n_sec + smin)
        else:
            df.insert(0, "device", "all")
            df.insert(0, "second", idx + smin)
        rows.append(df)
    out = pd.concat(rows, ignore_index=True)
    return out.sort_values(["device", "second"], kind="stable").reset_index(drop=True)


CDF_POINTS_MAX = 1500


def rt_cdf_series(req: pd.DataFrame, n_max: int = CDF_POINTS_MAX) -> pd.DataFrame:
    """The empirical CDF of the response times (from the actual send) of every ``ok`` request,
    thinned evenly in probability to at most ``n_max`` points, both ends kept: rt_ms, cdf."""
    x = req["rt_sent_ms"].to_numpy(np.float64)
    x = np.sort(x[np.isfinite(x)])
    y = np.arange(1, len(x) + 1) / len(x) if len(x) else np.zeros(0)
    if len(x) > n_max:
        idx = np.unique(np.r_[np.linspace(0, len(x) - 1, n_max).astype(int), len(x) - 1])
        x, y = x[idx], y[idx]
    return pd.DataFrame({"rt_ms": x, "cdf": y})


def response_codes(req: pd.DataFrame) -> dict[str, int]:
    """CoAP response code -> number of responses with it (all main-GE requests)."""
    codes = req["code"].astype(object).where(req["code"].notna(), "").astype(str)
    counts = codes[codes != ""].value_counts().sort_index()
    return {str(c): int(n) for c, n in counts.items()}


def outcome_series(req: pd.DataFrame, codes: np.ndarray, names: list[str]
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-device outcome totals + 'all' row, per-second outcome counts over all devices)."""
    n = len(names)
    oc_codes = req["outcome"].cat.codes.to_numpy(np.int64)
    counts = np.zeros((n, len(OUTCOMES)), dtype=np.int64)
    _add_counts(counts, codes, oc_codes)
    tot = pd.DataFrame(counts, columns=list(OUTCOMES))
    tot.insert(0, "device", names)
    tot.loc[len(tot)] = ["all", *counts.sum(axis=0).tolist()]
    tot["requests"] = tot[list(OUTCOMES)].sum(axis=1)
    if len(req) == 0:
        return tot, pd.DataFrame(columns=["second", *OUTCOMES])
    sec = np.floor(req["sched"].to_numpy() / 1e9).astype(np.int64)
    smin = int(sec.min())
    n_sec = int(sec.max()) - smin + 1
    per = np.zeros((n_sec, len(OUTCOMES)), dtype=np.int64)
    _add_counts(per, sec - smin, oc_codes)
    ts = pd.DataFrame(per, columns=list(OUTCOMES))
    ts.insert(0, "second", np.arange(n_sec) + smin)
    return tot, ts


__all__ = ["combine_ge", "device_codes", "compute_responses", "response_series",
           "outcome_series", "rt_cdf_series", "response_codes", "fnum"]
