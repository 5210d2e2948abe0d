"""Contention verdict (paper §6.2): does the CD node respond slower under load than alone? And,
with :func:`combine`, does the kernel's direct evidence (:mod:`cd_module.evidence`) show
the devices, the CD node or the GEs losing CPU to something in any window?

Input: the CD node's samples — R_d per CD request (see rd.py), phase ``calibration`` (sent inside
run.json's calibration window, CD alone) or ``test`` (sent during the test). A CD request that
was sent but got no ``ok`` answer (timeout, reset, error) counts as R_d = +inf: a lost probe is
the slowest possible answer, never 0 ms. Unsent probes are ignored.

Rule, per window of the test (``window_s`` seconds from the test start, default 10 s, or
``window_samples`` consecutive CD samples):
    b_med, b_mad = median and MAD of the calibration R_d
    threshold    = max(k · 1.4826 · b_mad, floor)                      (k = 4, floor = 0.10)
    flagged      = (median_w − b_med > threshold)
                   AND one-sided Mann–Whitney U p (window > calibration) < alpha / m
m = number of windows tested (Bonferroni: family-wise alpha = 0.05 per run). Windows with fewer than
``min_window_samples`` (5) samples are not tested. Medians and ranks make single 1–2 ms steal
spikes of the host irrelevant. ``status``:
    detected      — at least one window flagged
    none          — windows tested, none flagged
    inconclusive  — fewer than ``min_baseline_samples`` (8) calibration samples or no window
                    with enough samples (nothing is guessed)
    not_checked   — no CD data at all (CD disabled or its log missing)

The rule compares the test with the calibration, so it cannot see contention that was already
there before the load started (another workload on the device cores). A second, absolute check
covers that: the baseline is *elevated* when, during calibration, the CD's median excess
response time R − S exceeds max(baseline_k · S, baseline_floor_ms) — the CD alone took more than
twice its service time (default), far beyond network and stack overhead (≈ 0.1–0.5 ms here).
An elevated baseline makes the status ``detected`` even when no window departs from it.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from wotbench.rundir import ContentionParams
from wotbench.rundir.summary import AbsoluteBaseline, Baseline, ContentionBlock, FlaggedWindow
from cd_module import hostshare
from cd_module.evidence import describe
from wotbench.rundir.evidence import EvidenceBlock, WindowEvidence

from wotbench.rundir.values import fnum, json_clean

MAD_SCALE = 1.4826


WINDOW_COLUMNS = ["window", "start_s", "end_s", "samples", "lost", "median_rd", "shift",
                  "ratio", "p_value", "tested", "flagged"]


def _windows(test: pd.DataFrame, duration_s: float, p: ContentionParams
             ) -> list[tuple[float, float, np.ndarray]]:
    t = test["t_s"].to_numpy()
    v = test["rd_eff"].to_numpy()
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    out = []
    if p.window_samples:
        n = int(p.window_samples)
        for i in range(0, len(t), n):
            out.append((float(t[i]), float(t[min(i + n, len(t)) - 1]), v[i:i + n]))
        return out
    w = float(p.window_s)
    end = max(duration_s, float(t.max()) if len(t) else 0.0)
    nwin = max(1, int(np.ceil(end / w - 1e-9)))
    idx = np.floor(t / w).astype(np.int64)
    for i in range(nwin):
        out.append((i * w, (i + 1) * w, v[idx == i]))
    return out


def _baseline_excess(cd: pd.DataFrame, p: ContentionParams) -> Optional[AbsoluteBaseline]:
    """Median R − S of the answered calibration probes vs the absolute limit (None: no data)."""
    if "rt_ms" not in cd.columns:
        return None
    ok = cd[(cd["phase"] == "calibration") & (cd["outcome"] == "ok")]
    rt, rd = ok["rt_ms"].to_numpy(np.float64), ok["rd"].to_numpy(np.float64)
    good = np.isfinite(rt) & np.isfinite(rd) & (rd > -1)
    if good.sum() < p.min_baseline_samples:
        return None
    s_ms = float(np.median(rt[good] / (1.0 + rd[good])))
    excess = float(np.median(rt[good] - rt[good] / (1.0 + rd[good])))
    limit = max(p.baseline_k * s_ms, p.baseline_floor_ms)
    return AbsoluteBaseline(service_ms=fnum(s_ms), median_excess_ms=fnum(excess),
                            limit_ms=fnum(limit), elevated=bool(excess > limit))


def assess(cd: pd.DataFrame | None, duration_s: float, p: ContentionParams
           ) -> tuple[ContentionBlock, pd.DataFrame]:
    """The CD rule alone: its contention block (no direct evidence yet: :func:`combine` adds
    it) and the per-window series. ``cd`` columns: t_s, phase, rd, outcome."""
    return _rule(cd, duration_s, p)


def _block(p: ContentionParams, status: str, reason: str, baseline: Optional[Baseline] = None,
           windows_tested: int = 0, windows_flagged: int = 0, onset_s: Optional[float] = None,
           max_shift: Optional[float] = None, median_shift: Optional[float] = None,
           max_ratio: Optional[float] = None,
           flagged_windows: Optional[list[FlaggedWindow]] = None) -> ContentionBlock:
    """The CD rule's block (every field it decides set, as summary.json has always had them)."""
    return ContentionBlock(status=status, reason=reason,
                           params=ContentionParams.model_validate(p.model_dump()),
                           baseline=baseline,
                           windows_tested=windows_tested, windows_flagged=windows_flagged,
                           onset_s=onset_s, max_shift=max_shift, median_shift=median_shift,
                           max_ratio=max_ratio, flagged_windows=flagged_windows or [])


def _rule(cd: pd.DataFrame | None, duration_s: float, p: ContentionParams
          ) -> tuple[ContentionBlock, pd.DataFrame]:
    if cd is None or len(cd) == 0:
        return (_block(p, "not_checked", "no contention-detector samples"),
                pd.DataFrame(columns=WINDOW_COLUMNS))
    cd = cd[cd["outcome"] != "unsent"].copy()
    lost = cd["outcome"] != "ok"
    cd["rd_eff"] = np.where(lost, np.inf, cd["rd"].to_numpy())
    cd = cd[~np.isnan(cd["rd_eff"].to_numpy())]
    base = cd.loc[cd["phase"] == "calibration", "rd_eff"].to_numpy()
    test = cd[cd["phase"] == "test"]

    b_med = float(np.median(base)) if len(base) else float("nan")
    b_mad = float(np.median(np.abs(base - b_med))) if len(base) else float("nan")
    thr = max(p.k * MAD_SCALE * b_mad, p.floor) if len(base) else float("nan")
    absolute = _baseline_excess(cd, p)
    baseline = Baseline(samples=int(len(base)), lost=int(np.isinf(base).sum()),
                        median_rd=fnum(b_med), mad_rd=fnum(b_mad), threshold_shift=fnum(thr),
                        absolute=absolute)
    wins = _windows(test, duration_s, p)
    testable = [len(v) >= p.min_window_samples for _, _, v in wins]
    m = sum(testable)
    enough_base = len(base) >= p.min_baseline_samples
    rows = []
    for i, ((s, e, v), can) in enumerate(zip(wins, testable)):
        med = float(np.median(v)) if len(v) else float("nan")
        shift = med - b_med
        ratio = (1.0 + med) / (1.0 + b_med) if len(v) and (1.0 + b_med) > 0 else float("nan")
        pval = float("nan")
        flagged = None
        if can and enough_base:
            pval = float(mannwhitneyu(v, base, alternative="greater").pvalue)
            flagged = bool(shift > thr and pval < p.alpha / m)
        rows.append({"window": i, "start_s": s, "end_s": e, "samples": int(len(v)),
                     "lost": int(np.isinf(v).sum()), "median_rd": med, "shift": shift,
                     "ratio": ratio, "p_value": pval, "tested": bool(can and enough_base),
                     "flagged": flagged})
    series = pd.DataFrame(rows, columns=WINDOW_COLUMNS)
    if not enough_base:
        return (_block(p, "inconclusive", f"only {len(base)} calibration samples "
                                          f"(< {p.min_baseline_samples}); no verdict", baseline),
                series)
    if m == 0:
        return (_block(p, "inconclusive",
                       f"no test window has {p.min_window_samples} or more CD samples", baseline),
                series)
    fl = series[series["flagged"] == True]  # noqa: E712  (None = untested)
    found: dict[str, Any] = {}
    if len(fl):
        status = "detected"
        found = dict(onset_s=float(fl["start_s"].iloc[0]), max_shift=fnum(fl["shift"].max()),
                     median_shift=fnum(fl["shift"].median()), max_ratio=fnum(fl["ratio"].max()),
                     flagged_windows=[FlaggedWindow(start_s=float(r.start_s),
                                                    end_s=float(r.end_s), shift=fnum(r.shift),
                                                    ratio=fnum(r.ratio),
                                                    p_value=fnum(r.p_value))
                                      for r in fl.itertuples()])
        reason = (f"{len(fl)} of {m} windows: CD R_d median rose by up to "
                  f"{fl['shift'].max():.3g} (×{fl['ratio'].max():.3g} response time) "
                  f"from {fl['start_s'].iloc[0]:g} s")
    else:
        status = "none"
        reason = f"no window of {m} departs from the calibration baseline"
    if absolute and absolute.elevated:
        note = (f"the CD node was already slowed during calibration, before the load started "
                f"(median response {absolute.service_ms + absolute.median_excess_ms:.3g} ms "
                f"for a {absolute.service_ms:.3g} ms service; limit +{absolute.limit_ms:.3g} ms): "
                f"something else contends for the device cores, and the windows are compared "
                f"with an inflated baseline")
        status = "detected"
        reason = note if not len(fl) else f"{reason}; {note}"
    return (_block(p, status, reason, baseline, windows_tested=int(m),
                   windows_flagged=int(len(fl)), **found), series)


def combine(cd_rule: ContentionBlock, evidence: EvidenceBlock) -> ContentionBlock:
    """One contention block from the CD rule's (``assess``) and the direct evidence: a window is
    flagged when the kernel's evidence shows distortion, or when the CD rule fires where the
    kernel did not measure; each flagged window says what showed it and how much.

    Where the kernel measured a window and saw neither the CD node nor the devices lose CPU
    time, a CD rule flag there is a note, not a flag: the CD rule tests every window at a 5 %
    family-wise false-alarm rate by design, while the run-queue wait is measured, not sampled
    (docs/VALIDATION.md "The rule")."""
    cd_block = cd_rule.model_dump()
    out = dict(cd_block)
    out["cd_status"] = cd_block["status"]
    out["evidence_missing"] = evidence.missing
    measured = evidence.sources.thread_runqueue_wait is None
    by_start = {w.start_s: w for w in evidence.windows}
    notes: list[str] = []
    windows: dict[float, dict[str, Any]] = {}
    for w in evidence.flagged_windows:
        entry = windows.setdefault(w.start_s, {"start_s": w.start_s, "end_s": w.end_s,
                                               "shift": None, "ratio": None, "p_value": None,
                                               "shown_by": [], "evidence": []})
        for f in w.flags:
            if f.rule not in entry["shown_by"]:
                entry["shown_by"].append(f.rule)
            entry["evidence"].append(f.text)
    for fw in cd_block["flagged_windows"]:   # the CD rule's finding after the kernel's
        ratio = f" (x{fw['ratio']:.3g} response time)" if fw.get("ratio") is not None else ""
        shift = f"{fw['shift']:.3g}" if fw.get("shift") is not None else "an unknown amount"
        text = f"CD node R_d median rose by {shift}{ratio}"   # ratio None: too few probes
        w = by_start.get(fw["start_s"])
        if fw["start_s"] not in windows and measured and w is not None and _cd_measured(w):
            notes.append(f"{fw['start_s']:g}-{fw['end_s']:g} s: the {text}, but the kernel saw "
                         f"neither the CD node nor the devices lose more CPU time there than "
                         f"the tolerance ({_cd_wait(w, evidence.params.wait_of_service)}): "
                         f"not counted as host distortion")
            continue
        entry = windows.setdefault(fw["start_s"], {"shown_by": [], "evidence": []})
        entry.update({k: fw[k] for k in ("start_s", "end_s", "shift", "ratio", "p_value")})
        entry["shown_by"].append("cd")
        entry["evidence"].append(text)
    flagged = [windows[k] for k in sorted(windows)]
    out["flagged_windows"] = flagged
    out["windows_flagged"] = len(flagged)
    out["windows_tested"] = max(cd_block["windows_tested"], len(evidence.windows))
    elevated = cd_block["status"] == "detected" and not cd_block["flagged_windows"]
    if elevated and measured and evidence.calibration is not None \
            and _cd_measured(evidence.calibration) and not _cd_waited(evidence):
        limit = evidence.params.wait_of_service
        notes.append("the CD node's calibration baseline was elevated, but the kernel saw it "
                     f"lose no CPU time then ({_cd_wait(evidence.calibration, limit)}): "
                     "not counted")
        elevated = False
    if flagged:
        out["status"] = "detected"
        out["onset_s"] = flagged[0]["start_s"]
        first = flagged[0]
        spans = ", ".join(f"{w['start_s']:g}-{w['end_s']:g} s" for w in flagged)
        out["reason"] = (f"{len(flagged)} of {out['windows_tested']} windows flagged ({spans}); "
                         f"in {first['start_s']:g}-{first['end_s']:g} s: "
                         + "; ".join(first["evidence"]))
    elif elevated:
        pass    # the CD rule's "detected" (an elevated baseline) and its reason stand
    elif evidence.windows and measured:
        # "none" needs the main source: without the threads' run-queue wait the CD rule's
        # status stands (never "no contention" on evidence the run did not have)
        out.update(status="none", onset_s=None, max_shift=None, median_shift=None,
                   max_ratio=None)
        why = (f"no window of {len(evidence.windows)} has the devices' added latency beyond "
               f"the tolerance, nor another run on their cores")
        out["reason"] = why + (f"; CD rule: {cd_block['reason']}" if cd_block["reason"] else "")
    hs = evidence.host_share
    if hs is not None:
        out.update(grade=hs.grade, tolerance=hs.tolerance, added_ms=hs.added_ms,
                   added_share=hs.added_share, worst_added_ms=hs.worst_added_ms,
                   worst_share=hs.worst_share)
        amount = amount_text(evidence)
        if amount and out.get("reason"):
            out["reason"] = f"{out['reason']}; {amount}" if flagged else f"{amount}; {out['reason']}"
    out["notes"] = notes + _unconfirmed(evidence) + _unflagged_antagonists(evidence)
    if evidence.missing:
        out["reason"] = (out["reason"] or "") + "; " + missing_text(evidence.missing)
    return ContentionBlock.model_validate(json_clean(out))


def missing_text(missing: dict[str, str]) -> str:
    """"evidence this run does not have ...: source, source: why; ..." (sources grouped by why)."""
    by_why: dict[str, list[str]] = {}
    for source, why in missing.items():
        by_why.setdefault(why, []).append(source.replace("_", " "))
    return ("evidence this run does not have (its rules abstained): "
            + "; ".join(f"{', '.join(s)}: {why}" for why, s in by_why.items()))


def _cd_place(w: WindowEvidence):
    return next((p for p in w.places if p.place == "cd-node"), None)


def _cd_measured(w: WindowEvidence) -> bool:
    """The kernel measured the CD node's CPU wait in this window."""
    cd = _cd_place(w)
    return cd is not None and cd.wait_of_service is not None


def _cd_waited(evidence: EvidenceBlock) -> bool:
    cd = _cd_place(evidence.calibration)
    return cd is not None and (cd.wait_of_service or 0) >= evidence.params.wait_of_service


def _cd_wait(w: WindowEvidence, limit: float) -> str:
    """What the kernel measured for the CD node: the host's added latency when the run has it
    (the amount, never "none" where one was measured), else its CPU wait against ``limit``."""
    cd = _cd_place(w)
    if cd is not None and cd.added_ms is not None:
        share = f", {100 * cd.added_share:.1f} % of its R" if cd.added_share is not None else ""
        return (f"the host added {cd.added_ms:.2f} ms per CD probe{share}, at most "
                f"{cd.added_high_ms:.2f} ms; CPU wait {cd.wait_of_service or 0:.2f} of its "
                f"service time")
    return (f"CD node CPU wait {cd.wait_of_service:.2f} of its service time, limit {limit:g}"
            if cd and cd.wait_of_service is not None else "no CPU wait data")


NOTE_MIN_SHARE = 0.2   # an outside process using this much of a run core is named in the verdict


def amount_text(evidence: EvidenceBlock) -> Optional[str]:
    """"over the test the host added 0.41 ms per request to the devices (6 % of their response
    time); worst window 10-20 s, devices on core 1: 1.95 ms (27 %, severe); tolerance 5 % of R,
    exceeded in 2 of 4 windows" (None without the host share)."""
    hs = evidence.host_share
    if hs is None or hs.added_ms is None:
        return None
    text = (f"over the test the host added {hs.added_ms:.2f} ms per request to the devices"
            + (f" ({100 * hs.added_share:.1f} % of their response time)"
               if hs.added_share is not None else ""))
    if hs.worst_window is not None:
        w = evidence.windows[hs.worst_window]
        text += (f"; the most in {w.start_s:g}-{w.end_s:g} s, devices on {hs.worst_place}: "
                 f"{hs.worst_added_ms:.2f} ms ({100 * hs.worst_share:.1f} % of R, {hs.grade})")
    return text + (f"; tolerance {hs.tolerance}, exceeded in {hs.windows_beyond} of "
                   f"{hs.windows_judged} windows")


def _unconfirmed(evidence: EvidenceBlock) -> list[str]:
    """Unflagged windows whose point estimate is beyond the tolerance but whose lower bound is
    not (the run's own noise, hostshare.Noise, leaves it uncertain): the amount is said, with
    its bounds, never passed over."""
    notes = []
    for w in evidence.windows:
        if w.flagged:
            continue
        for pw in w.places:
            if pw.beyond_tolerance is False and pw.added_ms is not None and pw.r_ms and \
                    pw.added_high_ms is not None and pw.added_ms > hostshare.tolerance_ms(
                        evidence.params.verdict, pw.r_ms):
                notes.append(
                    f"{w.start_s:g}-{w.end_s:g} s, {pw.place}: the host added {pw.added_ms:.2f} "
                    f"ms per request ({100 * (pw.added_share or 0):.1f} % of R, {pw.grade}), "
                    f"beyond the tolerance, but its "
                    f"{100 * evidence.params.verdict.confidence:g} % bounds "
                    f"{pw.added_low_ms:.2f}-{pw.added_high_ms:.2f} ms do not confirm it ("
                    f"{_uncertain_because(evidence, pw.place)}): not flagged")
    return notes


def _uncertain_because(evidence: EvidenceBlock, place: str) -> str:
    """Why a bound left an amount unconfirmed, by where the place's bounds' uncertainty came
    from (its ``noise_from``: the run's own noise, the window's own sample, or both)."""
    hs = evidence.host_share
    src = hs.per_place[place].noise_from if hs is not None and place in hs.per_place else ""
    own, window = "the run's own noise" in src, hostshare.WINDOW_NOISE in src
    if window and not own:
        return "the window's own sample is too uncertain: no quiet windows measured the run's noise"
    if own and not window:
        return "it is within the run's own noise"
    return "it is within its bounds' uncertainty"


def _unflagged_antagonists(evidence: EvidenceBlock) -> list[str]:
    """Outside processes that used a run core heavily in windows nothing flagged, with what the
    run's measures say they added there (never "no effect" when an amount was measured)."""
    notes = []
    tol = evidence.host_share.tolerance if evidence.host_share else None
    for w in evidence.windows:
        if w.flagged:
            continue
        for a in w.antagonists:
            if a.share >= NOTE_MIN_SHARE and a.owner_kind != "runtime":
                notes.append(
                    f"core {a.core}: {describe(a)} used {a.share:.2f} of the core in "
                    f"{w.start_s:g}-{w.end_s:g} s; " + _effect_there(w, a.core, tol))
    return notes


def _effect_there(w: WindowEvidence, core: int, tol: Optional[str]) -> str:
    """What the places on ``core`` measured in window ``w``: the amount, within the tolerance."""
    parts = []
    for pw in w.places:
        if pw.added_ms is None or core not in pw.cores:
            continue
        share = f", {100 * pw.added_share:.1f} % of R, {pw.grade}" if pw.added_share is not None \
            else ""
        bound = f"; {pw.added_high_ms:.2f} ms at most" if pw.added_high_ms is not None else ""
        what = {"cpu_wait": "run-queue wait", "send_lag": "send lag"}.get(pw.added_by or "",
                                                                        pw.added_by or "")
        parts.append(f"{pw.place} {pw.added_ms:.2f} ms per request{share} ({what}{bound})")
    if not parts:
        return ("no place of the run on that core has a measure for this window; its effect on "
                "the run is unknown")
    within = f", within the tolerance of {tol}" if tol else ""
    return "the host added there: " + "; ".join(parts) + within
