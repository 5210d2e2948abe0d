"""The graded study's scoring (docs/VALIDATION.md "The graded study"): is the verdict right
about *how much* the host added, window by window, at several antagonist intensities?

Ground truth is measured, not assumed: every antagonist run has a **clean twin**, the same
config and seed (so the same trace, the same requests with the same service times) run without
the antagonist (manifest key ``twin: <clean scenario>``). A window's **measured inflation** is
the mean, over the window's answered requests, of R(antagonist run) − R(twin) paired request by
request (GE, request index), which removes the service-time variance that makes two windows' mean
R differ by ~7 % by chance. A window is *inflated beyond the tolerance* when that inflation
exceeds the tolerance of the run's verdict (``tolerance_ms``, or its share of the twin's mean R).

The measured inflation is itself a mean of a few hundred paired differences, and two runs of the
same trace differ by their own scheduling: its standard error (sd of the differences / √n) was
0.08–0.19 ms in the busy windows of the 2026-11-27 study, against tolerances of 0.26–0.34 ms. A
window whose truth lies within its own 95 % interval of the tolerance cannot say on which side
it is, so scoring the verdict against it would score against a coin. The targets are therefore
judged on the windows whose truth is clear (``truth``: beyond / within, the interval
inflation ± 1.96 se entirely on one side of the tolerance); the others are counted as "cannot
tell", and the rates on the point truth (``inflated``, every window) are kept beside them.
A window the twin's own verdict flagged is not scored (a contended twin is no ground truth).

Per intensity (the antagonist's duty, workers, nice, pinning, user/kernel time) the confusion
matrix counts the windows: flagged (beyond the tolerance in the verdict) vs inflated beyond it.
Targets (issue 31): >= 95 % of the inflated windows flagged, <= 5 % of the others flagged, 0
flagged windows in clean runs (>= 20 of different shapes), the added latency within ±25 % of the
measured inflation (windows inflated beyond the tolerance), the antagonist named in >= 95 % of the
flagged windows of its episode. A target without data says "not measured", never "met".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np
import pandas as pd

from wotbench.rundir import RunDir
from wotbench.rundir.layout import GE_REQUESTS
from wotbench.validation.antagonist import AntagonistRecord, read_record

TARGETS = {"detected": 0.95, "false_rate": 0.05, "clean_false_windows": 0, "added_within": 0.25,
           "added_share_within": 0.95, "named": 0.95, "clean_runs": 20}


@dataclass
class WindowScore:
    """One test window of one antagonist run against its clean twin."""
    scenario: str
    intensity: str
    seed: Optional[int]
    window: int
    start_s: float
    end_s: float
    in_episode: bool              # the antagonist ran in (part of) this window
    requests: int                 # paired answered requests
    twin_r_ms: Optional[float]    # the twin's mean R over them
    inflation_ms: Optional[float]  # mean paired R(run) - R(twin)
    tolerance_ms: Optional[float]
    inflated: Optional[bool]      # inflation beyond the tolerance (None: not scored)
    flagged: bool                 # the verdict: beyond the tolerance in this window
    added_ms: Optional[float]     # the verdict's amount (the devices' places, request-weighted)
    named: Optional[bool]         # flagged in the episode: the antagonist named (None: n/a)
    # For reading the amount's error (issue 31, cause 3), not for any target: the twin's own
    # amount in the same window (the truth is run minus twin, and the twin's R holds the host's
    # small share of the clean run too), and the share of the window the episode covered.
    twin_added_ms: Optional[float] = None
    episode_share: float = 0.0
    # why the window is not scored: no paired request, or the twin's own verdict flagged it
    # (a contended twin is no ground truth: its R is inflated too)
    not_scored: Optional[str] = None
    # the truth's own standard error (sd of the paired differences / √n) and, from it, on which
    # side of the tolerance the window clearly is: "beyond", "within" or "cannot tell"
    inflation_se_ms: Optional[float] = None
    truth: Optional[str] = None


TRUTH_Z = 1.96   # a two-sided 95 % interval of the measured inflation


def truth_side(inflation_ms: float, se_ms: float, tolerance_ms: float) -> str:
    """On which side of the tolerance the measured inflation is, given its standard error."""
    if inflation_ms - TRUTH_Z * se_ms > tolerance_ms:
        return "beyond"
    if inflation_ms + TRUTH_Z * se_ms < tolerance_ms:
        return "within"
    return "cannot tell"


def intensity_label(antagonist: Optional[dict]) -> str:
    """"duty 0.45 x2 pinned nice 0 user" from a scenario's antagonist mapping."""
    if not antagonist:
        return "none"
    a = antagonist
    if a.get("kind") != "duty-loop":
        return str(a.get("kind"))
    return (f"duty {float(a.get('duty', 1.0)):g} x{int(a.get('workers', 1))} "
            f"{'pinned' if a.get('pinned', True) else 'free'} nice {int(a.get('nice', 0))} "
            f"{'kernel' if a.get('kernel') else 'user'}")


# --------------------------------------------------------------------------- inputs

def paired_requests(run: Path, twin: Path) -> pd.DataFrame:
    """The answered main-GE requests of both runs paired by (GE, index): sent (s from the
    test start, the run's), device, r_ms, twin_r_ms. R ends at the kernel receive stamp when
    there is one (as the analysis's)."""
    def load(d: Path) -> pd.DataFrame:
        frames = []
        for f in sorted(RunDir(d).ges_dir.glob(f"*/{GE_REQUESTS}")):
            df = pd.read_csv(f, usecols=lambda c: c in {"index", "device", "sent_ns", "received_ns",
                                                         "received_kernel_ns", "outcome"})
            df = df[df["outcome"].astype(str) == "ok"]
            recv = df["received_kernel_ns"] if "received_kernel_ns" in df.columns else \
                df["received_ns"]
            recv = recv.where(recv.notna() & (recv > 0), df["received_ns"])
            frames.append(pd.DataFrame({"ge": f.parent.name, "index": df["index"],
                                        "device": df["device"], "sent_s": df["sent_ns"] / 1e9,
                                        "r_ms": (recv - df["sent_ns"]) / 1e6}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            columns=["ge", "index", "device", "sent_s", "r_ms"])
    a, b = load(run), load(twin)
    m = a.merge(b[["ge", "index", "r_ms"]].rename(columns={"r_ms": "twin_r_ms"}),
                on=["ge", "index"], how="inner")
    return m[np.isfinite(m["r_ms"]) & np.isfinite(m["twin_r_ms"])]


def _matches(a: dict, rec: AntagonistRecord) -> bool:
    """An antagonist row of the summary is the study's antagonist (or one of its workers)."""
    if rec.pid is not None and a.get("pid") == rec.pid:
        return True
    cmd = rec.cmdline
    if cmd and a.get("cmdline") and (a["cmdline"] == cmd or a["cmdline"] in cmd or
                                     cmd.endswith(a["cmdline"].split(" ", 1)[-1])):
        return True
    return bool(rec.comm and a.get("comm") == rec.comm and
                a.get("owner_kind") == rec.owner_kind and
                (a.get("owner") or "") == (rec.owner or ""))


def window_scores(run_dir: Path, twin_dir: Path, scenario: str, intensity: str,
                  seed: Optional[int] = None) -> list[WindowScore]:
    """The windows of one antagonist run scored against its twin (both analysed)."""
    rd = RunDir(run_dir)
    s = rd.read_summary()
    run = rd.read_run()
    ev = s.evidence
    if ev is None or ev.host_share is None:
        raise ValueError(f"{rd.summary_json}: no evidence.host_share (analyse it with this "
                         "version: wotbench analyze)")
    rec_path = rd.study_antagonist_json
    rec = read_record(rec_path) if rec_path.is_file() else None
    episode = rec.episode_s(run.test.start_mono_ns if run.test else None) \
        if rec is not None else None
    pairs = paired_requests(rd.path, Path(twin_dir))
    v = ev.params.verdict
    devices = set(ev.host_share.per_device) | {p for p in ev.host_share.per_place
                                               if p.startswith("core") or p == "devices"}
    flagged_text = {fw.start_s: " ".join(fw.evidence) for fw in s.contention.flagged_windows}
    twin_ev = RunDir(twin_dir).read_summary().evidence
    twin_added = {w.start_s: _devices_added(w.places, devices) for w in
                  (twin_ev.windows if twin_ev else [])}
    twin_flagged = {w.start_s for w in (twin_ev.windows if twin_ev else [])
                    if any(pw.beyond_tolerance for pw in w.places)}
    out = []
    for w in ev.windows:
        sel = pairs[(pairs["sent_s"] >= w.start_s) & (pairs["sent_s"] < w.end_s)]
        n = len(sel)
        twin_r = float(sel["twin_r_ms"].mean()) if n else None
        diff = sel["r_ms"] - sel["twin_r_ms"]
        infl = float(diff.mean()) if n else None
        se = float(diff.std(ddof=1) / np.sqrt(n)) if n >= 2 else None
        tol = v.tolerance_ms if v.tolerance_ms is not None else \
            (v.tolerance_share * twin_r if twin_r is not None else None)
        beyond = any(pw.beyond_tolerance for pw in w.places if pw.place in devices)
        added = _devices_added(w.places, devices)
        in_ep = episode is not None and episode[0] < w.end_s and episode[1] > w.start_s
        covered = episode_share(episode, w.start_s, w.end_s)
        named = None
        if beyond and in_ep:
            text = flagged_text.get(w.start_s, "")
            named = any(_matches(a.model_dump(), rec) and f"pid {a.pid}" in text
                        for a in w.antagonists)
        why = ("no paired request" if infl is None or tol is None else
               "the twin's own verdict flagged this window" if w.start_s in twin_flagged
               else None)
        out.append(WindowScore(
            scenario=scenario, intensity=intensity, seed=seed, window=w.window,
            start_s=w.start_s, end_s=w.end_s, in_episode=in_ep, requests=n, twin_r_ms=twin_r,
            inflation_ms=infl, tolerance_ms=tol,
            inflated=None if why else bool(infl > tol),
            flagged=beyond, added_ms=added, named=named, not_scored=why,
            twin_added_ms=twin_added.get(w.start_s), episode_share=round(covered, 3),
            inflation_se_ms=se,
            # one paired request has no spread to bound it: its side cannot be told
            truth=None if why else "cannot tell" if se is None else truth_side(infl, se, tol)))
    return out


def episode_share(episode: Optional[tuple[float, float]], start_s: float, end_s: float) -> float:
    """The share of the window [start_s, end_s) the antagonist's episode covered."""
    if episode is None or end_s <= start_s:
        return 0.0
    return max(0.0, min(episode[1], end_s) - max(episode[0], start_s)) / (end_s - start_s)


def _devices_added(places, devices: set[str]) -> Optional[float]:
    """The amount over the devices' places of a window, weighted by their requests."""
    mine = [pw for pw in places if pw.place in devices and pw.added_ms is not None]
    req = sum(pw.requests for pw in mine)
    return sum(pw.requests * pw.added_ms for pw in mine) / req if req else None


# --------------------------------------------------------------------------- scoring

def _rate(num: int, den: int) -> Optional[float]:
    return num / den if den else None


def confusion(scores: Iterable[WindowScore]) -> dict[str, Any]:
    """Flagged vs inflated beyond the tolerance, over the windows with paired requests; the
    amount's error where inflated; the naming rate of flagged episode windows."""
    scores = list(scores)
    sc = [s for s in scores if s.inflated is not None]
    tp = sum(s.flagged and s.inflated for s in sc)
    fn = sum((not s.flagged) and s.inflated for s in sc)
    fp = sum(s.flagged and not s.inflated for s in sc)
    tn = sum((not s.flagged) and not s.inflated for s in sc)
    errs = [(s.added_ms - s.inflation_ms) / s.inflation_ms for s in sc
            if s.inflated and s.added_ms is not None and s.inflation_ms]
    # a reading aid, not the target: the run's amount less the twin's own, against run - twin
    net = [(s.added_ms - s.twin_added_ms - s.inflation_ms) / s.inflation_ms for s in sc
           if s.inflated and s.added_ms is not None and s.twin_added_ms is not None
           and s.inflation_ms]
    named = [s.named for s in scores if s.named is not None]
    clear = [s for s in sc if s.truth in ("beyond", "within")]
    beyond = [s for s in clear if s.truth == "beyond"]
    c_tp = sum(s.flagged for s in beyond)
    c_fp = sum(s.flagged for s in clear if s.truth == "within")
    c_errs = [(s.added_ms - s.inflation_ms) / s.inflation_ms for s in beyond
              if s.added_ms is not None and s.inflation_ms]
    return {"clear": {"beyond": len(beyond), "within": len(clear) - len(beyond),
                      "cannot_tell": sum(s.truth == "cannot tell" for s in sc),
                      "cannot_tell_flagged": sum(s.flagged for s in sc
                                                 if s.truth == "cannot tell"),
                      "tp": c_tp, "fn": len(beyond) - c_tp, "fp": c_fp,
                      "tn": len(clear) - len(beyond) - c_fp,
                      "detected": _rate(c_tp, len(beyond)),
                      "false_rate": _rate(c_fp, len(clear) - len(beyond)),
                      "added_within_25": _rate(sum(abs(e) <= TARGETS["added_within"]
                                                   for e in c_errs), len(c_errs))},
            "windows": len(sc), "not_scored": len(scores) - len(sc),
            "tp": tp, "fn": fn, "fp": fp, "tn": tn,
            "detected": _rate(tp, tp + fn), "false_rate": _rate(fp, fp + tn),
            "added_rel_err_median": float(np.median(errs)) if errs else None,
            "added_within_25": _rate(sum(abs(e) <= TARGETS["added_within"] for e in errs),
                                     len(errs)),
            "net_of_twin_within_25": _rate(sum(abs(e) <= TARGETS["added_within"] for e in net),
                                           len(net)),
            "named": _rate(sum(named), len(named)), "named_of": len(named)}


def score(windows: list[WindowScore], clean: list[dict]) -> dict[str, Any]:
    """Per intensity and over all: the confusion matrix and rates; ``clean``: one entry per
    clean run {scenario, run_dir, windows, flagged} (flagged windows of the verdict)."""
    by: dict[str, list[WindowScore]] = {}
    for s in windows:
        by.setdefault(s.intensity, []).append(s)
    per = {k: confusion(v) for k, v in sorted(by.items())}
    total = confusion(windows)
    clean_false = sum(c["flagged"] for c in clean)
    shapes = sorted({c["scenario"] for c in clean})
    # the targets on the windows whose truth is clear (module docstring); the point truth's
    # rates stay in "total" and in the rendered table beside them
    measured = {
        "detected": total["clear"]["detected"], "false_rate": total["clear"]["false_rate"],
        "clean_false_windows": clean_false if clean else None,
        "added_within": total["clear"]["added_within_25"], "named": total["named"],
        "clean_runs": len(clean)}
    met = {
        "detected": None if measured["detected"] is None else measured["detected"] >= TARGETS["detected"],
        "false_rate": None if measured["false_rate"] is None else
        measured["false_rate"] <= TARGETS["false_rate"],
        "clean_false_windows": None if not clean else clean_false == 0,
        "added_within": None if measured["added_within"] is None else
        measured["added_within"] >= TARGETS["added_share_within"],
        "named": None if measured["named"] is None else measured["named"] >= TARGETS["named"],
        "clean_runs": len(clean) >= TARGETS["clean_runs"]}
    return {"per_intensity": per, "total": total, "clean": {"runs": len(clean),
            "shapes": shapes, "false_windows": clean_false,
            "windows": sum(c["windows"] for c in clean)},
            "measured": measured, "met": met, "windows": [asdict(s) for s in windows]}


def _pct(x: Optional[float]) -> str:
    return "—" if x is None else f"{100 * x:.0f} %"


def render(result: dict[str, Any]) -> str:
    """The graded study's tables (markdown): per intensity, then the targets."""
    lines = ["| intensity | windows (not scored) | flagged & inflated | missed | false | clear "
             "| detected | false rate | added within ±25 % | median error | named "
             "| net of the twin's own within ±25 % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, c in result["per_intensity"].items():
        err = "—" if c["added_rel_err_median"] is None else f"{100 * c['added_rel_err_median']:+.0f} %"
        lines.append(f"| {k} | {c['windows']} ({c['not_scored']}) | {c['tp']} | {c['fn']} | {c['fp']} | {c['tn']} | "
                     f"{_pct(c['detected'])} | {_pct(c['false_rate'])} | "
                     f"{_pct(c['added_within_25'])} | {err} | {_pct(c['named'])} "
                     f"({c['named_of']}) | {_pct(c['net_of_twin_within_25'])} |")
    m, met = result["measured"], result["met"]
    word = {True: "yes", False: "no", None: "not measured"}
    cl = result["clean"]
    t, c = result["total"], result["total"]["clear"]
    lines += ["", f"Truth per window (inflation ± {TRUTH_Z} se against the tolerance): "
              f"{c['beyond']} clearly beyond, {c['within']} clearly within, {c['cannot_tell']} "
              f"cannot tell ({c['cannot_tell_flagged']} of them flagged). On the point truth "
              f"(every scored window): {_pct(t['detected'])} of the inflated windows flagged, "
              f"{_pct(t['false_rate'])} of the others, amount within ±25 % in "
              f"{_pct(t['added_within_25'])}.",
              "", "| target (windows whose truth is clear) | measured | target | met |",
              "|---|---|---|---|",
              f"| inflated windows flagged | {_pct(m['detected'])} ({c['tp']} of {c['beyond']}) "
              f"| ≥ 95 % | {word[met['detected']]} |",
              f"| other windows flagged | {_pct(m['false_rate'])} ({c['fp']} of {c['within']}) "
              f"| ≤ 5 % | {word[met['false_rate']]} |",
              f"| false windows in clean runs | {cl['false_windows']} of {cl['windows']} in "
              f"{cl['runs']} runs ({len(cl['shapes'])} shapes) | 0 | "
              f"{word[met['clean_false_windows']]} |",
              f"| clean runs | {cl['runs']} | ≥ 20 | {word[met['clean_runs']]} |",
              f"| added latency within ±25 % of the inflation | {_pct(m['added_within'])} of the "
              f"inflated windows | ≥ 95 % | {word[met['added_within']]} |",
              f"| antagonist named | {_pct(m['named'])} of flagged episode windows | ≥ 95 % | "
              f"{word[met['named']]} |"]
    return "\n".join(lines) + "\n"


def evaluate_study(pairs: list[tuple[dict, Any]]) -> Optional[dict[str, Any]]:
    """The graded result of a study's (scenario, sweep) pairs, or None when no scenario has a
    ``twin``: every antagonist run scored against its twin's run of the same seed; every clean
    scenario's runs counted for false windows. Runs without a summary are listed as missing."""
    if not any(sc.get("twin") for sc, _ in pairs):
        return None
    runs: dict[str, dict[Any, Path]] = {}
    for sc, sweep in pairs:
        for p in sweep.points:
            rd = sweep.run_dir(p)
            if rd is not None and rd.summary_json.is_file():
                runs.setdefault(sc["name"], {})[p.overrides.get("seed")] = rd.path
    windows: list[WindowScore] = []
    clean: list[dict] = []
    missing: list[str] = []
    for sc, _ in pairs:
        mine = runs.get(sc["name"], {})
        if sc.get("twin"):
            twins = runs.get(sc["twin"], {})
            label = intensity_label(sc.get("antagonist"))
            for seed, path in sorted(mine.items(), key=lambda kv: str(kv[0])):
                if seed not in twins:
                    missing.append(f"{sc['name']} seed {seed}: no twin run ({sc['twin']})")
                    continue
                try:
                    windows += window_scores(path, twins[seed], sc["name"], label, seed)
                except (OSError, ValueError, KeyError) as e:
                    missing.append(f"{sc['name']} seed {seed}: {type(e).__name__}: {e}")
        elif sc.get("expect") == "clean":
            for seed, path in mine.items():
                s = RunDir(path).read_summary()
                ev = s.evidence
                if ev is None or ev.host_share is None:
                    missing.append(f"{sc['name']} seed {seed}: no host share (re-analyse)")
                    continue
                clean.append({"scenario": sc["name"], "run_dir": str(path),
                              "windows": len(ev.windows),
                              "flagged": sum(1 for w in ev.windows if any(
                                  pw.beyond_tolerance for pw in w.places))})
    out = score(windows, clean)
    out["missing"] = missing
    return out
