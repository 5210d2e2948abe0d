"""Observations (RFC 7641): notification latency, rate, loss and R_d of the notification
service time, from the GE's notifications.csv / observe.json and the devices' notify-log.csv.

Join: a GE notification is (observation = the OBSERVE request's index, seq); its token is the
GE's salted index (``token_salt``, contract §2), so (token, seq) names exactly one row of the
device's notify-log.csv (kind ``notify``). Both clocks are the host's CLOCK_MONOTONIC, so

  latency  = GE receive − device emission          (one way, device -> GE; exact)
  (GE receive = its kernel receive stamp, ``received_kernel_ns``, where recorded)
  R        = GE receive − the read's scheduled tick (the notification's "response time")
  R_d      = (R − S) / S, S = the resource's notify_service_us (no R_d when S = 0)

Loss: a notification the device emitted to a GE token and the GE never received, counted only
if it was emitted at least ``IN_FLIGHT_S`` before that observation's CANCEL left (or the GE
ended): later ones may simply have arrived after the GE stopped listening; loss_share =
lost / (lost + received). ``skipped``: sequence
numbers missing at the GE that the device never emitted to that observer (libcoap coalesces a
notification when the previous CON one is still unacknowledged) - not a network loss.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir.summary import ObserveBlock, ObserveDevice, ObserveQuantiles

from wotbench.analysis.loading import RunData
from wotbench.analysis.stats import fnum, quantiles_of

IN_FLIGHT_S = 1.0
SERIES_MAX_ROWS = 200_000


def _token(salt: int, idx: np.ndarray) -> np.ndarray:
    hi = f"{salt >> 32:08x}"
    lo = (salt & 0xFFFFFFFF) ^ idx.astype(np.int64)
    return np.array([f"{hi}{v:08x}" for v in lo.tolist()], dtype=object)


def _q(v: np.ndarray, qs: tuple[str, ...]) -> ObserveQuantiles:
    """The block's quantiles of ``v``; ``qs``: those computed (the others stay None)."""
    q = quantiles_of(ObserveQuantiles, v)
    return q.model_copy(update={k: None for k in ObserveQuantiles.QS if k not in qs})


def _observations(run: RunData) -> pd.DataFrame:
    """One row per observation: ge, obs (OBSERVE index), device id, path, token, registration
    and cancel instants (absolute ns; NaN when none), outcome of the registration."""
    rows = []
    for g in run.ges:
        o = g.observe_requests
        salt = g.summary.salt
        if o is None or not len(o) or salt is None:   # an older GE: tokens name no request
            continue
        reg = o[o["method"] == "OBSERVE"]
        can = o[o["method"] == "CANCEL"]
        # the GE pairs a CANCEL with the oldest open OBSERVE of the same device and uri (FIFO)
        cancel_at: dict[int, float] = {}
        pending: dict[tuple[int, str], list[int]] = {}
        events = pd.concat([reg.assign(_k=0), can.assign(_k=1)]).sort_values("index", kind="stable")
        for idx, dev, path, kind, sent in zip(events["index"].tolist(), events["device"].tolist(),
                                              events["path"].astype(str).tolist(),
                                              events["_k"].tolist(), events["sent_ns"].tolist()):
            key = (dev, path)
            if kind == 0:
                pending.setdefault(key, []).append(idx)
            elif pending.get(key):
                cancel_at[pending[key].pop(0)] = sent
        idx = reg["index"].to_numpy(np.int64)
        rows.append(pd.DataFrame({
            "ge": g.ge_id, "obs": idx, "device": reg["device"].to_numpy(np.int64),
            "path": reg["path"].astype(str).str.split("?").str[0].to_numpy(),
            "token": _token(salt, idx),
            "reg_ns": reg["received_ns"].to_numpy(np.float64) + g.start_mono_ns,
            "cancel_ns": np.array([cancel_at.get(i, np.nan) for i in idx.tolist()]) + g.start_mono_ns,
            "end_ns": float(g.summary.end_mono_ns),
            "ok": (reg["outcome"].astype(str) == "ok").to_numpy(),
        }))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _recv(n: pd.DataFrame) -> np.ndarray:
    """The kernel receive stamp where the GE recorded one (a burst of notifications read in one
    batch shares its user-space reading), else the loop's reading (older GEs)."""
    user = n["received_ns"].to_numpy(np.float64)
    if "received_kernel_ns" not in n.columns:
        return user
    kern = n["received_kernel_ns"].to_numpy(np.float64)
    return np.where(np.isnan(kern), user, kern)


def _notes(run: RunData, obs: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for g in run.ges:
        n = g.notifications
        if n is None or not len(n):
            continue
        frames.append(pd.DataFrame({
            "ge": g.ge_id, "obs": n["observation"].to_numpy(np.int64),
            "seq": n["seq"].to_numpy(np.int64),
            "recv_ns": _recv(n) + g.start_mono_ns,
            "flags": n["flags"].astype(str).replace("nan", "").to_numpy()}))
    if not frames:
        return pd.DataFrame(columns=["ge", "obs", "seq", "recv_ns", "flags", "token", "device"])
    notes = pd.concat(frames, ignore_index=True)
    return notes.merge(obs[["ge", "obs", "token", "device", "path"]], on=["ge", "obs"], how="left")


def _resource_columns(res: Optional[pd.DataFrame]) -> tuple[dict, dict]:
    """path -> notify_service_us, path -> notify_mean_us of a resource table."""
    if res is None:
        return {}, {}
    cols = [dict(zip(res["path"].astype(str), res[c].astype(float))) if c in res.columns else {}
            for c in ("notify_service_us", "notify_mean_us")]
    return cols[0], cols[1]


def _fleet_emitted(run: RunData) -> list[pd.DataFrame]:
    """The notifications the wot-fleet engines emitted (fleet-notify-<loop>.csv, one frame per
    engine; the ``device`` column is the trace's id). The devices of an engine share a few
    resource tables (loading.ResourceReader), so S and the period are looked up per table."""
    frames = []
    for f in run.fleets.values():
        if f.notify is None or not len(f.notify):
            continue
        lg = f.notify[f.notify["kind"].astype(str) == "notify"]
        dev = lg["device"].to_numpy(np.int64)
        paths = lg["path"].astype(str).to_numpy()
        s_us = np.full(len(lg), np.nan)
        mean_us = np.full(len(lg), np.nan)
        table_of = {int(i): run.devices[str(n)].resources for i, n in zip(f.index, f.names)
                    if str(n) in run.devices}
        by_table: dict[int, list[int]] = {}
        for i, t in table_of.items():
            by_table.setdefault(id(t), []).append(i)
        for ids in by_table.values():
            rows = np.isin(dev, ids)
            s_map, m_map = _resource_columns(table_of[ids[0]])
            s_us[rows] = pd.Series(paths[rows]).map(s_map).to_numpy(np.float64)
            mean_us[rows] = pd.Series(paths[rows]).map(m_map).to_numpy(np.float64)
        frames.append(_emitted_frame(dev, lg, s_us, mean_us))
    return frames


def _emitted_frame(device, lg: pd.DataFrame, s_us: np.ndarray, mean_us: np.ndarray
                   ) -> pd.DataFrame:
    """The notify rows ``lg`` of a notification log as _emitted's columns."""
    return pd.DataFrame({
        "device": device, "token": lg["token"].astype(str).to_numpy(),
        "seq": lg["seq"].to_numpy(np.float64).astype(np.int64),
        "emit_ns": lg["emit_ns"].to_numpy(np.float64),
        "tick_ns": lg["tick_ns"].to_numpy(np.float64),
        "read_ns": (lg["read_end_ns"] - lg["read_start_ns"]).to_numpy(np.float64),
        "s_us": s_us, "mean_us": mean_us})


def _emitted(run: RunData, names: dict[int, str]) -> pd.DataFrame:
    frames = _fleet_emitted(run)
    for dev_id, name in names.items():
        d = run.devices.get(name)
        if d is None or d.notify_log is None:
            continue
        lg = d.notify_log[d.notify_log["kind"].astype(str) == "notify"]
        s_us, mean_us = _resource_columns(d.resources)
        paths = lg["path"].astype(str)
        frames.append(_emitted_frame(dev_id, lg, paths.map(s_us).to_numpy(np.float64),
                                     paths.map(mean_us).to_numpy(np.float64)))
    if not frames:
        return pd.DataFrame(columns=["device", "token", "seq", "emit_ns", "tick_ns", "read_ns", "s_us", "mean_us"])
    return pd.concat(frames, ignore_index=True)


def analyse(run: RunData, names: list[str]) -> tuple[Optional[ObserveBlock], dict[str, pd.DataFrame]]:
    """The ``observe`` block of summary.json (None without observations) and its series."""
    obs = _observations(run)
    if obs.empty:
        return None, {}
    id_name = {int(d.id): n for n, d in run.devices.items() if d.id is not None}
    notes = _notes(run, obs)
    em = _emitted(run, id_name)
    ours = em[em["token"].isin(set(obs["token"]))]
    j = notes.merge(ours, on=["token", "seq"], how="left", suffixes=("", "_dev"))
    lat_ms = (j["recv_ns"] - j["emit_ns"]).to_numpy(np.float64) / 1e6
    r_ms = (j["recv_ns"] - j["tick_ns"]).to_numpy(np.float64) / 1e6
    s_ms = j["s_us"].to_numpy(np.float64) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        rd = np.where(s_ms > 0, (r_ms - s_ms) / s_ms, np.nan)

    # loss: emitted to a GE observer, not received, emitted well before that observer stopped
    stop = obs.set_index("token")["cancel_ns"].fillna(obs.set_index("token")["end_ns"])
    got = set(zip(notes["token"].tolist(), notes["seq"].tolist()))
    key = list(zip(ours["token"].tolist(), ours["seq"].tolist()))
    received = np.array([k in got for k in key], bool)
    settled = ours["emit_ns"].to_numpy() + IN_FLIGHT_S * 1e9 < ours["token"].map(stop).to_numpy(np.float64)
    lost = ~received & settled
    # skipped by the device: GE-side sequence holes the device never emitted to that token
    skipped = 0
    emitted_by_tok = ours.groupby("token")["seq"].apply(set).to_dict() if len(ours) else {}
    for tok, seqs in notes.groupby("token")["seq"]:
        s = np.sort(seqs.to_numpy())
        if len(s) > 1:
            full = set(range(int(s[0]), int(s[-1]) + 1))
            skipped += len(full - set(s.tolist()) - emitted_by_tok.get(tok, set()))

    # rate per observation: received per second of observed time vs the configured rate
    span = (obs["cancel_ns"].fillna(obs["end_ns"]) - obs["reg_ns"]).to_numpy(np.float64) / 1e9
    per_obs_n = notes.groupby(["ge", "obs"]).size()
    obs["received"] = [int(per_obs_n.get((g, o), 0)) for g, o in zip(obs["ge"], obs["obs"])]
    obs["span_s"] = span
    conf = em.groupby("device")["mean_us"].first().to_dict() if len(em) else {}
    per_device: dict[str, ObserveDevice] = {}
    lat_by_dev = pd.Series(lat_ms).groupby(j["device"].to_numpy())
    lost_by_dev = pd.Series(lost.astype(int)).groupby(ours["device"].to_numpy()).sum() if len(ours) else pd.Series(dtype=int)
    for dev, grp in obs.groupby("device"):
        name = id_name.get(int(dev), str(dev))
        valid = grp["span_s"].to_numpy() > 0
        rate = float(grp["received"].to_numpy()[valid].sum() / grp["span_s"].to_numpy()[valid].sum()) \
            if valid.any() else None
        mean_us = conf.get(int(dev))
        lv = lat_by_dev.get_group(dev).to_numpy() if dev in lat_by_dev.groups else np.zeros(0)
        lv = lv[~np.isnan(lv)]
        per_device[name] = ObserveDevice(
            observations=len(grp), established=int(grp["ok"].sum()),
            received=int(grp["received"].sum()), emitted=int((ours["device"] == dev).sum()),
            lost=int(lost_by_dev.get(dev, 0)),
            configured_rate=fnum(1e6 / mean_us) if mean_us else None,
            achieved_rate=fnum(rate) if rate is not None else None,
            latency_p50_ms=fnum(float(np.median(lv))) if len(lv) else None,
            latency_p99_ms=fnum(float(np.quantile(lv, 0.99))) if len(lv) else None)
    # the GEs' own counts (observe.json; every GE with observations wrote one, see loading)
    ge_obs = [g.observe for g in run.ges if g.observe is not None]
    ge_tot = {k: sum(getattr(o, k) for o in ge_obs)
              for k in ("gaps", "reordered", "duplicates", "after_cancel", "dropped", "acks_sent", "rsts_sent")}
    warnings = []
    if ge_tot["dropped"]:
        warnings.append(f"{ge_tot['dropped']} notifications were not recorded (GE --max-notifications)")
    unmatched = int(np.isnan(lat_ms).sum())
    if unmatched:
        warnings.append(f"{unmatched} received notifications have no device-log row (token, seq)")
    rates = [v.achieved_rate / v.configured_rate for v in per_device.values()
             if v.achieved_rate is not None and v.configured_rate]
    emitted_n = int(len(ours))
    block = ObserveBlock(
        observations=len(obs), established=int(obs["ok"].sum()), received=len(notes),
        emitted=emitted_n, lost=int(lost.sum()),
        loss_share=fnum(float(lost.sum() / (lost.sum() + len(notes)))) if len(notes) + lost.sum() else None,
        in_flight_at_stop=int((~received & ~settled).sum()), skipped_by_device=int(skipped),
        **ge_tot,
        latency_ms=_q(lat_ms, ("p50", "p90", "p99")),
        service_ms=_q(ours["read_ns"].to_numpy(np.float64) / 1e6, ("p50", "p90", "p99")),
        configured_service_ms=fnum(float(np.nanmean(ours["s_us"].to_numpy()) / 1e3)) if len(ours) else None,
        rd=_q(rd, ("p50", "p95", "p99")),
        rate_ratio_median=fnum(float(np.median(rates))) if rates else None,
        per_device=per_device, warnings=warnings)
    t_s = (j["recv_ns"].to_numpy(np.float64) - run.test_start_ns) / 1e9
    pts = pd.DataFrame({"t_s": t_s, "device": [id_name.get(int(d), str(d)) for d in j["device"]],
                        "latency_ms": lat_ms, "rd": rd})
    if len(pts) > SERIES_MAX_ROWS:
        pts = pts.iloc[np.linspace(0, len(pts) - 1, SERIES_MAX_ROWS).astype(int)]
    w = np.floor(t_s).astype(np.int64)
    ok = ~np.isnan(lat_ms)
    over = (pd.DataFrame({"t_s": w[ok], "lat": lat_ms[ok]}).groupby("t_s")["lat"]
            .agg(n="size", p50=lambda v: np.quantile(v, 0.5), p99=lambda v: np.quantile(v, 0.99))
            .reset_index())
    v = np.sort(lat_ms[ok])
    idx = np.unique(np.linspace(0, len(v) - 1, min(len(v), 1001)).astype(int)) if len(v) else np.zeros(0, int)
    cdf = pd.DataFrame({"latency_ms": v[idx], "cdf": (idx + 1) / max(len(v), 1)})
    return block, {"notify_latency": pts, "notify_latency_over_time": over, "notify_latency_cdf": cdf}
