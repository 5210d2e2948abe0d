"""The pure rules that say whether the contention detector (CD) told the truth in a validation
scenario (docs/VALIDATION.md explains them; tests/unit/test_validate.py checks them on fakes).

- contention *present*: run.json ``contention`` lists the injected hog episodes (``start_s``,
  ``end_s`` relative to the test start). Clean scenarios have none.
- the CD's answer: summary.json ``contention`` (status, flagged windows, onset).
- the devices' R_d per window: ``series/rd_over_time.csv`` rows ``device == all``; a device window
  *rises* when its median response time, (1 + p50 R_d), exceeds the reference by more than
  ``DEV_RISE`` (10 %, the same size as the CD rule's floor of 0.10 in R_d). The reference is the
  median of (1 + p50 R_d) over the windows that overlap no episode.
- an episode is *flagged* when a flagged CD window overlaps it; a flagged window that overlaps no
  episode is a *false window*.
- onset matched: |CD onset − devices' onset| ≤ one window (time series) or one step (series);
  when neither rises nor flags, that is a match too (reported as "none/none").
- series (``vary``): the devices' R_d of each point is compared with the first (lightest) point;
  the devices' onset step is the first that rises by more than ``DEV_RISE``; the CD's onset step
  is the first point whose contention status is ``detected``.
Inputs are the plain fact dicts of :func:`wotbench.validation.facts.load_run`.
"""
from __future__ import annotations

import statistics
from typing import Any, Optional

DEV_RISE = 0.10               # devices' response-time rise that counts as "R_d rose"


def _overlaps(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 < b1 and b0 < a1


def device_rise(dev_windows: list[dict], episodes: list[dict], rise: float = DEV_RISE
                ) -> dict[str, Any]:
    """Per device window: ratio of its median response time to the reference, and whether it rose.

    Reference: median of (1 + p50 R_d) over windows overlapping no episode (all windows when every
    window overlaps one: then nothing can rise)."""
    wins = [w for w in dev_windows if w.get("p50_rd") is not None]
    outside = [1.0 + w["p50_rd"] for w in wins
               if not any(_overlaps(w["start_s"], w["end_s"], e["start_s"], e["end_s"])
                          for e in episodes)]
    if not wins:
        return {"reference_rt_ratio": None, "windows": [], "onset_s": None}
    base = outside if outside else [1.0 + w["p50_rd"] for w in wins]
    ref = statistics.median(base)
    out = []
    for w in wins:
        ratio = (1.0 + w["p50_rd"]) / ref if ref > 0 else None
        out.append({"start_s": w["start_s"], "end_s": w["end_s"], "p50_rd": w["p50_rd"],
                    "ratio": ratio, "rose": bool(ratio is not None and ratio > 1.0 + rise)})
    onset = next((w["start_s"] for w in out if w["rose"]), None)
    return {"reference_rt_ratio": ref, "windows": out, "onset_s": onset}


def _window_len(run: dict) -> float:
    lens = [w["end_s"] - w["start_s"] for w in run.get("dev_windows", []) if w.get("end_s") is not None]
    cw = (run.get("contention") or {}).get("window_s")
    cands = [x for x in [cw] + lens if x]
    return float(max(cands)) if cands else 10.0


def evaluate_run(run: dict, expect: str) -> dict[str, Any]:
    """One scenario row. ``expect``: clean | episodes | agree."""
    cont = run["contention"]
    status = cont.get("status")
    eps = run.get("episodes") or []
    flagged = [(w["start_s"], w["end_s"]) for w in cont.get("flagged_windows") or []]
    dev = device_rise(run.get("dev_windows") or [], eps)
    win = _window_len(run)
    per_ep = []
    for e in eps:
        det = any(_overlaps(s, t, e["start_s"], e["end_s"]) for s, t in flagged)
        rose = any(w["rose"] and _overlaps(w["start_s"], w["end_s"], e["start_s"], e["end_s"])
                   for w in dev["windows"])
        per_ep.append({"name": e.get("name"), "kind": e.get("kind"), "start_s": e["start_s"],
                       "end_s": e["end_s"], "cd_flagged": det, "devices_rose": rose})
    false_windows = [(s, t) for s, t in flagged
                     if not any(_overlaps(s, t, e["start_s"], e["end_s"]) for e in eps)]
    cd_onset = cont.get("onset_s") if status == "detected" else None
    dev_onset = dev["onset_s"]
    if cd_onset is None and dev_onset is None:
        onset_matched: Optional[bool] = True
    elif cd_onset is None or dev_onset is None:
        onset_matched = False
    else:
        onset_matched = abs(cd_onset - dev_onset) <= win + 1e-9
    checks: dict[str, Optional[bool]] = {}
    if status in (None, "not_checked", "inconclusive"):
        checks["cd_answered"] = False
    if expect == "clean":
        checks["no_false_alarm"] = status == "none"
    elif expect == "episodes":
        checks["every_episode_flagged"] = bool(per_ep) and all(p["cd_flagged"] for p in per_ep)
        checks["no_false_window"] = not false_windows
        checks["onset_matched"] = onset_matched
    elif expect == "agree":
        checks["cd_agrees_with_devices"] = all(p["cd_flagged"] == p["devices_rose"] for p in per_ep)
        checks["no_false_window"] = not false_windows
        checks["onset_matched"] = onset_matched
    else:
        raise ValueError(f"unknown expect {expect!r}")
    return {
        "expect": expect,
        "contention_present": bool(eps),
        "episodes": per_ep,
        "cd_status": status,
        "cd_reason": cont.get("reason"),
        "cd_flagged_windows": [list(x) for x in flagged],
        "cd_false_windows": [list(x) for x in false_windows],
        "cd_onset_s": cd_onset,
        "episode_onset_s": min((e["start_s"] for e in eps), default=None),
        "devices_onset_s": dev_onset,
        "devices_windows": dev["windows"],
        "window_s": win,
        "onset_matched": onset_matched,
        "rd_devices_p50": run.get("rd_devices_p50"),
        "rd_cd_cal_p50": run.get("rd_cd_cal_p50"),
        "rd_cd_test_p50": run.get("rd_cd_test_p50"),
        "verdict": run.get("verdict"),
        "checks": checks,
        "passed": all(v is True for v in checks.values()),
    }


def evaluate_series(points: list[tuple[Any, dict]], rise: float = DEV_RISE) -> dict[str, Any]:
    """A ``vary`` series: points = [(value, run)], any order (sorted by value here)."""
    pts = sorted(points, key=lambda p: p[0])
    ref = None
    rows = []
    for value, run in pts:
        rd = run.get("rd_devices_p50")
        if ref is None and rd is not None:
            ref = 1.0 + rd
        ratio = (1.0 + rd) / ref if rd is not None and ref else None
        status = (run.get("contention") or {}).get("status")
        rows.append({"value": value, "rd_devices_p50": rd, "rt_ratio_devices": ratio,
                     "devices_rose": bool(ratio is not None and ratio > 1.0 + rise),
                     "rd_cd_cal_p50": run.get("rd_cd_cal_p50"),
                     "rd_cd_test_p50": run.get("rd_cd_test_p50"),
                     "cd_status": status, "cd_flagged": status == "detected",
                     "cd_windows_flagged": (run.get("contention") or {}).get("windows_flagged"),
                     "cd_windows_tested": (run.get("contention") or {}).get("windows_tested"),
                     "verdict": run.get("verdict"), "run_dir": run.get("run_dir"),
                     "load": run.get("load")})
    dev_i = next((i for i, r in enumerate(rows) if r["devices_rose"]), None)
    cd_i = next((i for i, r in enumerate(rows) if r["cd_flagged"]), None)
    if dev_i is None and cd_i is None:
        matched: Optional[bool] = True
    elif dev_i is None or cd_i is None:
        matched = False
    else:
        matched = abs(dev_i - cd_i) <= 1
    answered = all(r["cd_status"] in ("none", "detected") for r in rows)
    checks = {"onset_matched": matched, "cd_answered": answered}
    return {"expect": "scale", "points": rows,
            "devices_onset": rows[dev_i]["value"] if dev_i is not None else None,
            "cd_onset": rows[cd_i]["value"] if cd_i is not None else None,
            "onset_steps_apart": (cd_i - dev_i) if dev_i is not None and cd_i is not None else None,
            "onset_matched": matched, "checks": checks,
            "passed": all(v is True for v in checks.values())}
