"""Gateway-emulator integrity (paper §6.1, Table 1): did the devices get the trace's workload?

For every GE and every device it serves, the rows that were actually sent (``sent_ns`` not empty)
are taken in trace order. Expected RIT = difference of consecutive ``scheduled_ns`` of the same
device, submitted RIT = difference of consecutive ``sent_ns``. Send lag = sent − scheduled.

The rule is judged on the workload's own time scale, not on an absolute 1 ms:
  * each device's tolerance = max(rel_tolerance × its median positive expected RIT,
    min_tolerance_ms) (a device with a single request: the median of the GE's other devices'
    medians, when there are any): a 5 % slip of a 125 ms period is invisible to the device, a 5 % slip of a
    300 µs period is not;
  * a send is late (early) when its lag exceeds +tolerance (−tolerance) of its device;
  * the late and the early share are each judged by a one-sided binomial test against
    ``max_late_share`` (1 %) at ``alpha``: the GE is flagged only when the data show, with
    confidence 1 − alpha, that more than 1 % of sends were off — so 2 late probes out of 100
    (a CD-GE's whole sample) do not flag it, 6 do;
  * the RIT distributions agree: KS distance of expected vs submitted RITs, each divided by its
    device's median expected RIT (so devices of different rates pool; at least by
    min_tolerance_ms / rel_tolerance, so the tolerance never drops below the lateness floor) and
    compared with a horizontal tolerance of ``rel_tolerance``, must stay within max(max_ks, the two-sample KS
    critical value at ``alpha``) — the latter keeps small samples from flagging on noise.
``late_abs_share`` (lag > late_threshold_ms, absolute) is reported for comparison only.

A time-varying schedule (``devices[].rate_profile``: steps, ramps, bursts, a sinusoid; issue 35)
has no one median RIT: 5 % of a 1 Hz step's period would excuse any lateness in its 500 Hz step.
When some device's expected RITs, taken over tenths of its requests, have medians more than
:data:`VARYING_RATIO` apart, every scale above becomes *local*: the rolling median of the device's
expected RITs over :data:`LOCAL_WINDOW` neighbours (both the lateness tolerance of each send and
the unit each RIT is divided by for the KS comparison). A steady schedule is judged as before.
``kept_up`` is None (not checked) with fewer than 2 sent requests.

A closed-loop GE (``--clients N``, summary.json ``closed_loop``) has no trace schedule: each
request's ``scheduled_ns`` is the instant its client meant to send (the previous outcome's
kernel stamp + the think time), so its send lag is a *stall*, the time the GE held a client
that wanted to go. The question becomes "did the clients stall beyond their think time?", and
the rule (:data:`CLOSED_RULE_TEXT`) judges the stalls by what they cost: over the measured phase,
per client, the sum of the stalls divided by the sum of the cycle times (send to the client's
next send) is the share of the clients' throughput the GE itself took; it may be at most
``max_stall_share`` (5 %). Below it, the server (or the think time) set the pace, not the GE.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd
from scipy.stats import binom

from wotbench.rundir import GeIntegrityParams
from wotbench.rundir.ge_files import GeSummary
from wotbench.rundir.summary import (ClosedLoopIntegrity, GeDeviceIntegrity, GeIntegrity,
                                     LagStats, RitStats)

from wotbench.analysis.stats import cdf_points, fnum, grouped_stats, ks_distance

RULE_TEXT = ("kept_up unless, with confidence 1 - alpha, more than max_late_share of sends were "
             "later (or earlier) than their device's tolerance = max(rel_tolerance x median "
             "expected RIT, min_tolerance_ms) (one-sided binomial test), or the RIT "
             "distributions, normalised by each device's median RIT, differ by KS (+-rel_tolerance) "
             "> max(max_ks, KS critical value at alpha)")


CLOSED_RULE_TEXT = ("closed loop: kept_up unless the clients' stalls (sent - (previous outcome + "
                    "think time)) add up to more than max_stall_share of their cycle times "
                    "(send to the same client's next send), i.e. the GE itself cost the clients "
                    "more than that share of their throughput")


LOCAL_WINDOW = 51          # expected RITs in the rolling median of a time-varying schedule
VARYING_RATIO = 3.0        # medians over tenths of a device's RITs this far apart: time-varying
MIN_PER_TENTH = 50         # RITs per tenth for that comparison (fewer: judged steady)


def time_varying(rit_dev: np.ndarray, exp: np.ndarray) -> bool:
    """Does some device's schedule change its rate over the run (rit_dev sorted)?"""
    ids, starts, counts = np.unique(rit_dev, return_index=True, return_counts=True)
    for s0, n in zip(starts[counts >= 10 * MIN_PER_TENTH], counts[counts >= 10 * MIN_PER_TENTH]):
        meds = np.array([np.median(c) for c in np.array_split(exp[s0:s0 + n], 10)])
        if meds.min() > 0 and meds.max() / meds.min() > VARYING_RATIO:
            return True
    return False


def local_scales(dev: np.ndarray, rit_dev: np.ndarray, exp: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(per row, per RIT) the rolling median of the device's expected RITs around it; a device's
    first row takes its first RIT's."""
    rit_scale = pd.Series(exp).groupby(rit_dev).transform(
        lambda x: x.rolling(LOCAL_WINDOW, center=True, min_periods=1).median()).to_numpy()
    row = np.full(len(dev), np.nan)
    same = dev[1:] == dev[:-1]
    row[1:][same] = rit_scale
    row = pd.Series(row).groupby(dev).transform(lambda x: x.bfill()).to_numpy()
    return row, rit_scale


def _rit_arrays(df: pd.DataFrame, p: GeIntegrityParams) -> dict[str, np.ndarray]:
    """Sent rows of one GE in trace order: lag, per-row tolerance, per-device RIT pairs (ms).
    Sent = when the GE handed the request over: an HTTP request that waited for a busy
    connection (``queued``) was on time when it began to wait; the wait is the server's."""
    sent = df["sent"].to_numpy(np.float64)
    if "queued" in df.columns:
        q = df["queued"].to_numpy(np.float64)
        sent = np.where(np.isnan(q), sent, q)
    m = ~np.isnan(sent)
    dev = df["device"].to_numpy(np.int64)[m]
    idx = df["index"].to_numpy(np.int64)[m]
    sched = df["sched"].to_numpy()[m]
    snt = sent[m]
    order = np.lexsort((idx, dev))
    dev, sched, snt = dev[order], sched[order], snt[order]
    same = dev[1:] == dev[:-1]
    rit_dev = dev[1:][same]
    exp = np.diff(sched)[same] / 1e6
    sub = np.diff(snt)[same] / 1e6
    # one scale per device: its median positive expected RIT (NaN: none, e.g. a single request);
    # rows and RIT pairs are sorted by device, so each device's RITs are one slice
    dev_ids = np.unique(dev)
    pos = exp > 0   # each device's median positive expected RIT, one grouped sort for all
    scales = grouped_stats(np.searchsorted(dev_ids, rit_dev[pos]), exp[pos], len(dev_ids),
                           [0.5])["quantiles"][:, 0] if len(dev_ids) else np.zeros(0)
    row_scale = scales[np.searchsorted(dev_ids, dev)]
    rit_scale = scales[np.searchsorted(dev_ids, rit_dev)]
    if len(exp) and time_varying(rit_dev, exp):   # a rate profile: judged on the local rate
        row_scale, rit_scale = local_scales(dev, rit_dev, exp)
    # a device with one request has no RIT of its own: its scale is the GE's typical device's
    # (the median of the others' scales), not the 20 µs floor -- a once-a-minute device sent
    # 100 µs after its instant is on time (issue 29: 3 129 of 3 130 "late" sends at 100 000
    # devices were single-request devices judged on the floor); none at all: the floor
    if np.isnan(row_scale).any() and not np.isnan(scales).all():
        row_scale = np.where(np.isnan(row_scale), np.nanmedian(scales), row_scale)
    tol = np.fmax(p.rel_tolerance * row_scale, p.min_tolerance_ms)   # fmax: NaN -> the floor
    # RITs are divided by max(scale, floor / rel): a KS tolerance of rel_tolerance in these
    # units is then the same per-device tolerance as the lateness test's (5 % of the median RIT,
    # at least min_tolerance_ms), also for µs-scale RITs; no scale (NaN): not compared
    unit = np.fmax(rit_scale, p.min_tolerance_ms / p.rel_tolerance)
    ok = ~np.isnan(rit_scale)
    return {
        "device": dev, "lag_ms": (snt - sched) / 1e6, "tol_ms": tol,
        "rit_dev": rit_dev, "exp_rit_ms": exp, "sub_rit_ms": sub,
        "exp_norm": np.where(ok, exp / unit, np.nan),
        "sub_norm": np.where(ok, sub / unit, np.nan),
    }


def ks_critical(n: int, m: int, alpha: float) -> float:
    """Two-sample KS critical value c(alpha)·sqrt((n+m)/(n·m)) (asymptotic)."""
    if n == 0 or m == 0:
        return math.inf
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


def exceeds_share_p(k: int, n: int, share: float) -> float:
    """One-sided binomial p-value of seeing >= k off-schedule sends of n if the true share is
    ``share``: small means the GE really was off more often than allowed."""
    if n == 0 or k == 0:
        return 1.0
    return float(binom.sf(k - 1, n, share))


def _rit(x: np.ndarray) -> RitStats:
    if len(x) == 0:
        return RitStats()
    q5, q50 = np.quantile(x, [0.05, 0.5])
    return RitStats(count=len(x), mean_ms=float(x.mean()), p5_ms=float(q5), p50_ms=float(q50))


def _block(a: dict[str, np.ndarray], p: GeIntegrityParams) -> GeDeviceIntegrity:
    lag, tol = a["lag_ms"], a["tol_ms"]
    exp, sub = a["exp_rit_ms"], a["sub_rit_ms"]
    n = len(lag)
    en, sn = a["exp_norm"], a["sub_norm"]
    en, sn = en[~np.isnan(en)], sn[~np.isnan(sn)]
    b = GeDeviceIntegrity(
        sent=n, expected_rit=_rit(exp), submitted_rit=_rit(sub),
        ks=fnum(ks_distance(exp, sub)) if len(exp) else None,
        ks_tol=fnum(ks_distance(en, sn, tol=p.rel_tolerance)) if len(en) else None,
        ks_limit=fnum(max(p.max_ks, ks_critical(len(en), len(sn), p.alpha))) if len(en) else None,
        lag_ms=LagStats())
    if n:
        qs = np.quantile(lag, [0.5, 0.9, 0.99, 0.999])
        b.lag_ms = LagStats(mean=float(lag.mean()), p50=float(qs[0]), p90=float(qs[1]),
                            p99=float(qs[2]), p999=float(qs[3]), max=float(lag.max()),
                            min=float(lag.min()))
        late, early = int(np.count_nonzero(lag > tol)), int(np.count_nonzero(lag < -tol))
        b.late_share, b.early_share = late / n, early / n
        b.late_p_value = exceeds_share_p(late, n, p.max_late_share)
        b.early_p_value = exceeds_share_p(early, n, p.max_late_share)
        b.late_abs_share = float(np.count_nonzero(lag > p.late_threshold_ms) / n)
        b.tolerance_ms = float(np.median(tol))
    b.kept_up, b.problems = judge(b, p)
    return b


def judge(b: GeDeviceIntegrity, p: GeIntegrityParams) -> tuple[bool | None, list[str]]:
    """Apply the kept-up rule to one block; returns (kept_up, list of violated conditions)."""
    if b.sent < 2 or b.late_share is None:
        return None, ["fewer than 2 requests sent"]
    problems = []
    tol = f"{b.tolerance_ms:.3g} ms" if b.tolerance_ms is not None else "the tolerance"
    for share, p_value, word in ((b.late_share, b.late_p_value, "later"),
                                 (b.early_share, b.early_p_value, "earlier")):
        if p_value < p.alpha:
            problems.append(f"{share:.2%} of {b.sent} sends {word} than {tol} "
                            f"(more than {p.max_late_share:.0%} at p = {p_value:.2g})")
    if b.ks_tol is not None and b.ks_limit is not None and b.ks_tol > b.ks_limit:
        problems.append(f"RIT distributions differ: KS (±{p.rel_tolerance:.0%} of the device's "
                        f"median RIT) {b.ks_tol:.3f} > {b.ks_limit:.3f}")
    return not problems, problems


def _split_by_device(a: dict[str, np.ndarray]) -> dict[int, dict[str, np.ndarray]]:
    """The pooled arrays (sorted by device) cut into one dict per device."""
    dev_ids = np.unique(a["device"])
    row_cuts = np.searchsorted(a["device"], dev_ids[1:])
    rit_cuts = np.searchsorted(a["rit_dev"], dev_ids[1:])
    row_keys, rit_keys = ("device", "lag_ms", "tol_ms"), ("rit_dev", "exp_rit_ms", "sub_rit_ms",
                                                           "exp_norm", "sub_norm")
    rows = {k: np.split(a[k], row_cuts) for k in row_keys}
    rits = {k: np.split(a[k], rit_cuts) for k in rit_keys}
    return {int(d): {**{k: rows[k][i] for k in row_keys}, **{k: rits[k][i] for k in rit_keys}}
            for i, d in enumerate(dev_ids)}


def ge_integrity(req: pd.DataFrame, ge_id: str, dev_names: dict[int, str],
                 p: GeIntegrityParams, summary: Optional[GeSummary] = None, detail: bool = True
                 ) -> tuple[GeIntegrity, pd.DataFrame, pd.DataFrame]:
    """Integrity block of one GE + its RIT CDF and lag CDF series. ``summary``: the GE's
    summary.json (its ``interrupted`` and ``wait``); None for requests without a GE file;
    ``detail`` False: no per-device blocks (the pooled rule still judges every send)."""
    if summary is not None and summary.closed_loop is not None:
        return closed_integrity(req, ge_id, p, summary)
    a = _rit_arrays(req, p)
    per_dev = {}
    if len(a["device"]) and detail:
        for d, arrays in _split_by_device(a).items():
            per_dev[dev_names.get(d, f"dev-{d}")] = _block(arrays, p)
    block = GeIntegrity(
        **dict(_block(a, p)), requests=len(req),
        interrupted=summary.interrupted if summary is not None else False,
        wait=summary.wait if summary is not None else None,
        devices_not_kept_up=sorted(k for k, v in per_dev.items() if v.kept_up is False),
        per_device=per_dev)

    prob, exp_q = cdf_points(a["exp_rit_ms"], p.cdf_points)
    _, sub_q = cdf_points(a["sub_rit_ms"], p.cdf_points)
    rit_cdf = pd.DataFrame({"ge": ge_id, "cdf": prob, "expected_rit_ms": exp_q,
                            "submitted_rit_ms": sub_q})
    _, lag_q = cdf_points(a["lag_ms"], p.cdf_points)
    lag_cdf = pd.DataFrame({"ge": ge_id, "cdf": prob, "lag_ms": lag_q})
    return block, rit_cdf, lag_cdf


def closed_integrity(req: pd.DataFrame, ge_id: str, p: GeIntegrityParams, summary: GeSummary
                     ) -> tuple[GeIntegrity, pd.DataFrame, pd.DataFrame]:
    """The closed-loop rule (module docstring): stalls against the clients' cycle times."""
    sent = req["sent"].to_numpy(np.float64)
    m = ~np.isnan(sent)
    client = req["client"].to_numpy(np.float64)[m]
    stall = (sent[m] - req["sched"].to_numpy(np.float64)[m]) / 1e6
    order = np.lexsort((req["index"].to_numpy(np.int64)[m], client))
    c, snt, st = client[order], sent[m][order], stall[order]
    same = c[1:] == c[:-1]
    cycle = np.diff(snt)[same] / 1e6
    later_stall = st[1:][same]
    n = len(stall)
    lag = LagStats()
    if n:
        qs = np.quantile(stall, [0.5, 0.9, 0.99, 0.999])
        lag = LagStats(mean=float(stall.mean()), p50=float(qs[0]), p90=float(qs[1]),
                       p99=float(qs[2]), p999=float(qs[3]), max=float(stall.max()),
                       min=float(stall.min()))
    share = float(later_stall.sum() / cycle.sum()) if len(cycle) and cycle.sum() > 0 else None
    cl = ClosedLoopIntegrity(stall_ms=lag, cycle_mean_ms=fnum(float(cycle.mean())) if len(cycle)
                             else None, stall_share=fnum(share) if share is not None else None,
                             max_stall_share=p.max_stall_share)
    kept, problems = None, ["fewer than 2 requests of one client sent"]
    if share is not None:
        kept = share <= p.max_stall_share
        problems = [] if kept else [
            f"the GE stalled its clients {share:.1%} of their cycle time (more than "
            f"{p.max_stall_share:.0%}): median stall {lag.p50:.3g} ms, mean cycle "
            f"{cl.cycle_mean_ms:.3g} ms"]
    block = GeIntegrity(sent=n, expected_rit=RitStats(), submitted_rit=RitStats(), lag_ms=lag,
                        kept_up=kept, problems=problems, closed_loop=cl, requests=len(req),
                        interrupted=summary.interrupted, wait=summary.wait)
    prob, lag_q = cdf_points(stall, p.cdf_points)
    rit_cdf = pd.DataFrame({"ge": ge_id, "cdf": prob, "expected_rit_ms": np.nan,
                            "submitted_rit_ms": np.nan})
    return block, rit_cdf, pd.DataFrame({"ge": ge_id, "cdf": prob, "lag_ms": lag_q})
