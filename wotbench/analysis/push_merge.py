"""The devices' own test-phase requests (devices[].push) as rows of the GE request table, so the
run's overall figures, per-device blocks, loss attribution and SLOs count them the way they
count the GEs' requests (issue 23). Setup and teardown requests are not the test's load: they
stay in the ``push`` block only (:mod:`wotbench.analysis.push_figures`).

A push row gets ``ge`` = :data:`PUSH_SOURCE` (it went from the device's own socket, not through
a GE) and the device's code in the run's device list; its times are made relative to the run's
test start from the device's own zero (``device-summary.json`` push ``start_mono_ns``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from wotbench.analysis.loading import OUTCOMES, RunData
from cd_module import evidence as evid
from wotbench.rundir import GeIntegrityParams

PUSH_SOURCE = "push"     # the ``ge`` of a device's own request
NS_PER_MS = 1e6


def _offset_ns(run: RunData, name: str) -> float:
    """The device's push zero relative to the run's test start (0 when it did not say)."""
    s = run.devices[name].log_summary
    p = s.push if s is not None else None
    return float(p.start_mono_ns - run.test_start_ns) if p is not None and p.started else 0.0


def _engine_offset_ns(run: RunData, f) -> float:
    """An engine's push zero relative to the run's test start (0 when it did not say)."""
    p = f.summary.push if f.summary is not None else None
    return float(p.start_mono_ns - run.test_start_ns) if p is not None and p.started else 0.0


def _frame(df: pd.DataFrame, off: float, device: np.ndarray) -> pd.DataFrame:
    """Push rows (push-requests.csv's columns) as GE request rows, ``off`` ns added."""
    user = df["received_ns"].to_numpy(np.float64) + off
    kern = df["received_kernel_ns"].to_numpy(np.float64) + off
    n = len(df)
    return pd.DataFrame({
        "ge": np.full(n, PUSH_SOURCE, dtype=object),
        "index": df["index"].to_numpy(),
        "device": device,
        "method": df["method"].astype(str).to_numpy(),
        "path": df["path"].astype(str).to_numpy(),
        "sched": df["scheduled_ns"].to_numpy(np.float64) + off,
        "sent": df["sent_ns"].to_numpy(np.float64) + off,
        "queued": np.full(n, np.nan),
        "recv": np.where(np.isnan(kern), user, kern),
        "recv_user": user, "recv_kernel": kern,
        "code": df["code"].astype(object).to_numpy(),
        "outcome": df["outcome"].astype(str).to_numpy(),
        "retransmissions": df["retransmissions"].to_numpy(np.float64),
        "client": np.full(n, np.nan),
    })


def test_rows(run: RunData, names: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The test-phase push rows of every device in ``names``, in the columns of
    :func:`wotbench.analysis.responses.combine_ge`, and their device codes (index into names);
    an engine's devices' rows come from its one fleet-push.csv, vectorised."""
    frames, codes = [], []
    for code, name in enumerate(names):
        d = run.devices.get(name)
        if d is None or d.push is None:
            continue
        df = d.push[d.push["phase"].astype(str) == "test"]
        if not len(df):
            continue
        frames.append(_frame(df, _offset_ns(run, name),
                             np.full(len(df), d.id if d.id is not None else -1, np.int64)))
        codes.append(np.full(len(df), code, np.int64))
    code_of = None
    for f in run.fleets.values():
        if f.push is None:
            continue
        df = f.push[f.push["phase"].astype(str) == "test"]
        if not len(df):
            continue
        code_of = code_of if code_of is not None else {n: i for i, n in enumerate(names)}
        idx = df["device"].to_numpy(np.int64)
        c = np.array([code_of.get(n, -1) for n in f.names_of(idx).tolist()], np.int64)
        keep = c >= 0
        frames.append(_frame(df[keep], _engine_offset_ns(run, f), idx[keep]))
        codes.append(c[keep])
    if not frames:
        return pd.DataFrame(), np.zeros(0, np.int64)
    out = pd.concat(frames, ignore_index=True)
    answered = (out["outcome"].to_numpy() == "ok") & ~np.isnan(out["recv"].to_numpy())
    recv = out["recv"].to_numpy()
    out["rt_sent_ms"] = np.where(answered, (recv - out["sent"].to_numpy()) / NS_PER_MS, np.nan)
    out["rt_sched_ms"] = np.where(answered, (recv - out["sched"].to_numpy()) / NS_PER_MS, np.nan)
    return out, np.concatenate(codes)


def merge(req: pd.DataFrame, codes: np.ndarray, push: pd.DataFrame, push_codes: np.ndarray
          ) -> tuple[pd.DataFrame, np.ndarray]:
    """The GE rows then the push rows, as one table (categoricals over both) and its codes."""
    if not len(push):
        return req, codes
    # an empty GE table (a run of pushing devices only) has no column types to keep
    parts = [p[list(push.columns)].copy() for p in (req, push) if len(p)]
    for col in ("ge", "method", "path", "code"):
        cats = [pd.Categorical(p[col].astype(object).where(p[col].notna(), None)) for p in parts]
        uc = union_categoricals(cats)
        for p, c in zip(parts, cats):
            p[col] = pd.Categorical(c, categories=uc.categories)
    out = pd.concat(parts, ignore_index=True)
    out["outcome"] = out["outcome"].astype(str).astype(pd.CategoricalDtype(list(OUTCOMES)))
    return out, np.concatenate([np.asarray(codes, np.int64), push_codes])


def tolerance_ms(push: pd.DataFrame, codes: np.ndarray, p: GeIntegrityParams) -> np.ndarray:
    """Per row, its device's send tolerance as the GE rule has it: max(rel_tolerance × the
    median interval between the device's scheduled test sends, min_tolerance_ms), so 2 ms
    late is nothing for a reading every 10 s and much for one every 5 ms."""
    sched = push["sched"].to_numpy(np.float64)
    out = np.full(len(push), p.min_tolerance_ms)
    if len(push) < 2:
        return out
    # every device's gaps at once (100 000 engine devices: no loop over devices)
    order = np.lexsort((sched, codes))
    c, gaps = codes[order], np.diff(sched[order]) / 1e6
    mine = (c[1:] == c[:-1]) & (gaps > 0)
    if mine.any():
        median = pd.Series(gaps[mine]).groupby(c[1:][mine]).median()
        tol = pd.Series(np.maximum(p.rel_tolerance * median.to_numpy(), p.min_tolerance_ms),
                        index=median.index).reindex(codes).to_numpy()
        out = np.where(np.isnan(tol), out, tol)
    return out


def sends(push: pd.DataFrame, codes: np.ndarray, names: list[str], run: RunData,
          p: GeIntegrityParams) -> dict[str, evid.GeSends]:
    """The pushing devices' sent test requests for the kernel evidence, one entry per place
    (``push core 2``: the devices pinned there; ``push devices``: the unpinned ones), so their
    late sends are judged as the testbed's, like a GE's (rule ``send_lag``)."""
    if not len(push):
        return {}
    tol = tolerance_ms(push, codes, p)
    place_of = evid.Places(run.run).of
    engine_place = {f.name: f"core {f.cpuset}" if f.cpuset else "devices" for f in run.run.fleets}
    where_of = [place_of.get(n) or engine_place.get(getattr(run.devices.get(n), "fleet", None),
                                                    "devices") for n in names]
    where = np.array([f"push {where_of[c]}" for c in codes], object)
    sent = push["sent"].to_numpy(np.float64)
    sched = push["sched"].to_numpy(np.float64)
    out = {}
    for place in sorted(set(where)):
        m = (where == place) & np.isfinite(sent)
        devs = tuple(sorted({names[c] for c in codes[where == place]}))
        out[place] = evid.GeSends(sched_ns=sched[m] + run.test_start_ns,
                                  lag_ms=(sent[m] - sched[m]) / 1e6, tolerance_ms=tol[m],
                                  devices=devs, rule=p)
    return out
