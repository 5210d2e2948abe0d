"""Detection and false-alarm rates of the contention verdict, per window, per scenario over its
repeats and over the whole matrix (docs/VALIDATION.md "The study"; tests/unit/test_study_rates.py).

Windows are the test windows of the verdict's grid (``evidence.windows``; else the CD rule's).
Against the ground-truth episodes (run.json ``contention`` and the study's own antagonist) a
window is

- an *episode window* when one episode covers at least ``EPISODE_SHARE`` (30 %) of it;
- an *edge window* when an episode (or its outer bound: a second run's deploy and teardown)
  overlaps it by less: it counts neither way;
- a *clear window* otherwise.

``expect: agree`` is for antagonists the emulation may be immune to (a memory-bandwidth or cache
hog: a busy service burns CPU *time*, so it does not slow down; a hog on the GE's core: the GE
stamps responses in the kernel and wakes ahead of a hog): there the devices' own response time
is the ground truth. An episode window counts as an episode window only when the devices'
median response time in it rose by more than 10 % over the windows outside every episode
(:func:`wotbench.validation.rules.device_rise`); an episode window in which it did not rise is
a clear window, so a flag there is a false alarm.

detection rate = flagged episode windows / episode windows; false window = a flagged clear window;
false-alarm rate = false windows / clear windows; onset delay = start of the first flagged
window of an episode − the episode's start (pass: at most one window); naming rate = flagged
episode windows whose evidence names the antagonist / flagged episode windows whose antagonist
is a process (pid + comm of a host process or container hog, the owner run id of a second run,
``owner_kind: injected`` for the run's own hogs). ``shown_by`` counts say which rules flagged the
episode windows; ``cd_*`` repeat the counts for the CD rule alone.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from wotbench.validation.rules import device_rise


EPISODE_SHARE = 0.30
TARGETS = {"detection": 0.95, "false_windows_clean": 0, "onset_within_windows": 1.0,
           "naming": 0.90}
_EPS = 1e-9


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def grid_windows(run: dict) -> list[tuple[float, float]]:
    """The verdict's window grid of a run (evidence windows, else the CD rule's, else a grid of
    ``window_s`` over the test)."""
    ws = [(w["start_s"], w["end_s"]) for w in run.get("evidence_windows") or []]
    if not ws:
        ws = [(w["start_s"], w["end_s"]) for w in run.get("cd_windows") or []
              if w.get("start_s") is not None and w.get("end_s") is not None]
    if not ws and run.get("duration_s"):
        win = float((run.get("contention") or {}).get("window_s") or 10.0)
        dur, t = float(run["duration_s"]), 0.0
        for _ in range(10_000):
            if t >= dur - _EPS:
                break
            ws.append((t, min(t + win, dur)))
            t += win
    return sorted(ws)


def classify(window: tuple[float, float], episodes: list[dict],
             share: float = EPISODE_SHARE) -> tuple[str, Optional[int], float]:
    """(``episode`` | ``edge`` | ``clear``, the index of the episode covering the most of it,
    that share)."""
    a, b = window
    length = b - a
    if length <= 0:
        return "clear", None, 0.0
    best, best_i, touched = 0.0, None, False
    for i, e in enumerate(episodes):
        ov = overlap(a, b, e["start_s"], e["end_s"]) / length
        if ov > best:
            best, best_i = ov, i
        outer = e.get("outer")
        if ov > 0 or (outer and overlap(a, b, outer[0], outer[1]) > 0):
            touched = True
    if best_i is not None and best >= share - _EPS:
        return "episode", best_i, best
    return ("edge" if touched else "clear"), best_i, best


def names(name_by: dict, antagonists: list[dict], texts: list[str]) -> bool:
    """Whether the window's evidence names the antagonist ``name_by`` describes."""
    text = " ".join(texts)
    pid, comm = name_by.get("pid"), name_by.get("comm")
    kind, owner = name_by.get("owner_kind"), name_by.get("owner")
    if pid is not None and comm:
        if any(a.get("pid") == pid and a.get("comm") == comm for a in antagonists):
            return True
        if f"`{comm}` (pid {pid}," in text:
            return True
    cmd = name_by.get("cmdline")
    if cmd and any(a.get("cmdline") == cmd and f"(pid {a.get('pid')}," in text
                   for a in antagonists):
        return True        # one of the launcher's workers, named by its pid in the verdict
    if kind == "injected":
        return (any(a.get("owner_kind") == "injected" for a in antagonists)
                or "the injected hog" in text)
    if kind in ("wotbench", "container") and owner:
        return (any(a.get("owner_kind") == kind and a.get("owner") == owner for a in antagonists)
                or owner in text)
    return False


def _rose(run: dict, eps: list[dict]) -> dict[float, bool]:
    """Window start -> whether the devices' response time rose in it (``agree``)."""
    dev = device_rise(run.get("dev_windows") or [], eps)
    return {round(w["start_s"], 6): bool(w["rose"]) for w in dev["windows"]}


def grade_run(run: dict, share: float = EPISODE_SHARE, expect: str = "episodes"
              ) -> dict[str, Any]:
    """Window classes and counts of one run (facts of :func:`wotbench.validation.facts.load_run`);
    ``expect: agree`` grades episode windows against the devices' response time."""
    eps = run.get("episodes") or []
    rose = _rose(run, eps) if expect == "agree" else {}
    cont = run.get("contention") or {}
    flagged = {round(w["start_s"], 6): w for w in cont.get("flagged_windows") or []}
    ev = {round(w["start_s"], 6): w for w in run.get("evidence_windows") or []}
    c: Counter = Counter()
    shown: Counter = Counter()
    false_shown: Counter = Counter()
    first: dict[int, float] = {}
    rows = []
    length = 0.0
    for a, b in grid_windows(run):
        length = max(length, b - a)
        cls, i, frac = classify((a, b), eps, share)
        if expect == "agree" and cls == "episode" and not rose.get(round(a, 6), False):
            cls = "clear"        # the devices did not feel it: a flag here is a false alarm
        fw = flagged.get(round(a, 6))
        by = list(fw.get("shown_by") or ["cd"]) if fw else []
        row = {"start_s": a, "end_s": b, "class": cls, "episode": i, "share": round(frac, 3),
               "flagged": fw is not None, "shown_by": by}
        c[f"{cls}_windows"] += 1
        if fw is not None:
            c[f"flagged_{cls}_windows"] += 1
            if "cd" in by:
                c[f"cd_flagged_{cls}_windows"] += 1
            if cls == "episode":
                shown.update(by)
                first.setdefault(i, a)
                ep = eps[i]
                if ep.get("process") and ep.get("name_by"):
                    c["namable_windows"] += 1
                    w = ev.get(round(a, 6)) or {}
                    texts = list(fw.get("evidence") or []) + [f.get("text", "")
                                                               for f in w.get("flags") or []]
                    ok = names(ep["name_by"], w.get("antagonists") or [], texts)
                    row["named"] = ok
                    c["named_windows"] += ok
            elif cls == "clear":
                false_shown.update(by)
        rows.append(row)
    onsets = []
    felt = {r["episode"] for r in rows if r["class"] == "episode"}
    for i, e in enumerate(eps):
        if expect == "agree" and i not in felt:
            continue        # the devices never felt it: there is no onset to find
        t = first.get(i)
        delay = None if t is None else t - e["start_s"]
        onsets.append({"episode": e.get("name"), "kind": e.get("kind"), "start_s": e["start_s"],
                       "end_s": e["end_s"], "first_flag_s": t,
                       "delay_s": None if delay is None else round(delay, 3),
                       "within_one_window": delay is not None and delay <= length + _EPS})
    return {"windows": rows, "counts": dict(c), "shown_by": dict(shown),
            "false_shown_by": dict(false_shown), "onsets": onsets, "window_s": length,
            "status": cont.get("status"), "cd_status": run.get("cd_status")}


def grade_series_repeat(points: list[tuple[Any, dict]]) -> list[tuple[Any, dict, str]]:
    """An overload series (one repeat): (value, run, class) with class ``episode`` for the points
    whose devices' response time rose (> 10 % over the lightest), ``clear`` for the lightest,
    ``edge`` for the others (no injected truth: counted neither way)."""
    pts = sorted(points, key=lambda p: p[0])
    ref = None
    out = []
    for k, (value, run) in enumerate(pts):
        rd = run.get("rd_devices_p50")
        if ref is None and rd is not None:
            ref = 1.0 + rd
        rose = rd is not None and ref is not None and (1.0 + rd) / ref > 1.10
        out.append((value, run, "episode" if rose else ("clear" if k == 0 else "edge")))
    return out


def grade_point_as(run: dict, cls: str) -> dict[str, Any]:
    """Every window of a series point in class ``cls`` (overload: the whole test)."""
    cont = run.get("contention") or {}
    flagged = {round(w["start_s"], 6): w for w in cont.get("flagged_windows") or []}
    c: Counter = Counter()
    shown: Counter = Counter()
    for a, b in grid_windows(run):
        fw = flagged.get(round(a, 6))
        c[f"{cls}_windows"] += 1
        if fw is not None:
            by = list(fw.get("shown_by") or ["cd"])
            c[f"flagged_{cls}_windows"] += 1
            c[f"cd_flagged_{cls}_windows"] += "cd" in by
            if cls == "episode":
                shown.update(by)
    return {"counts": dict(c), "shown_by": dict(shown), "onsets": [],
            "status": cont.get("status"), "cd_status": run.get("cd_status")}


def _rate(num: int, den: int) -> Optional[float]:
    return num / den if den else None


def summarize(grades: list[dict], expect: str,
              extra_onsets: Optional[list[dict]] = None) -> dict[str, Any]:
    """A scenario's rates over its repeats (``grades`` of :func:`grade_run`), with pass/fail
    against :data:`TARGETS`; ``extra_onsets``: an overload series' onset checks (in steps)."""
    c: Counter = Counter()
    shown: Counter = Counter()
    false_shown: Counter = Counter()
    onsets = []
    for g in grades:
        c.update(g["counts"])
        shown.update(g.get("shown_by") or {})
        false_shown.update(g.get("false_shown_by") or {})
        onsets += g.get("onsets") or []
    onsets += extra_onsets or []
    out = {
        "runs": len(grades), "counts": dict(c), "shown_by": dict(shown),
        "false_shown_by": dict(false_shown),
        "detection": _rate(c["flagged_episode_windows"], c["episode_windows"]),
        "cd_detection": _rate(c["cd_flagged_episode_windows"], c["episode_windows"]),
        "false_windows": c["flagged_clear_windows"],
        "cd_false_windows": c["cd_flagged_clear_windows"],
        "false_alarm": _rate(c["flagged_clear_windows"], c["clear_windows"]),
        "cd_false_alarm": _rate(c["cd_flagged_clear_windows"], c["clear_windows"]),
        "naming": _rate(c["named_windows"], c["namable_windows"]),
        "onsets": onsets,
        "onset_delays_s": [o["delay_s"] for o in onsets],
        "onset_pass": _rate(sum(o["within_one_window"] for o in onsets), len(onsets)),
        "status": Counter(g.get("status") for g in grades),
        "cd_status": Counter(g.get("cd_status") for g in grades),
    }
    checks: dict[str, bool] = {}
    if not grades:
        checks["graded"] = False
    if expect == "clean":
        checks["no_false_window"] = out["false_windows"] == 0
    else:
        if c["episode_windows"]:
            checks["detection"] = (out["detection"] or 0.0) >= TARGETS["detection"] - _EPS
        elif expect not in ("scale", "agree"):   # the devices may not feel it: nothing to find
            checks["has_episode_windows"] = False
        checks["no_false_window"] = out["false_windows"] == 0
        if onsets:
            checks["onset_within_one_window"] = all(o["within_one_window"] for o in onsets)
        if c["namable_windows"]:
            checks["naming"] = (out["naming"] or 0.0) >= TARGETS["naming"] - _EPS
    out["status"], out["cd_status"] = dict(out["status"]), dict(out["cd_status"])
    out["checks"] = checks
    out["passed"] = bool(checks) and all(checks.values())
    return out


def totals(scenarios: list[dict]) -> dict[str, Any]:
    """The matrix: every graded scenario's counts added up, against :data:`TARGETS`.
    ``scenarios``: study entries with ``expect`` and ``rates`` (:func:`summarize`)."""
    c: Counter = Counter()
    clean_false = clean_runs = onset_n = onset_ok = 0
    for s in scenarios:
        r = s.get("rates")
        if not r:
            continue
        c.update(r["counts"])
        if s["expect"] == "clean":
            clean_false += r["false_windows"]
            clean_runs += r["runs"]
        onset_n += len(r["onsets"])
        onset_ok += sum(o["within_one_window"] for o in r["onsets"])
    out = {
        "episode_windows": c["episode_windows"],
        "flagged_episode_windows": c["flagged_episode_windows"],
        "detection": _rate(c["flagged_episode_windows"], c["episode_windows"]),
        "cd_detection": _rate(c["cd_flagged_episode_windows"], c["episode_windows"]),
        "clean_runs": clean_runs, "false_windows_clean": clean_false,
        "false_windows_all": c["flagged_clear_windows"], "clear_windows": c["clear_windows"],
        "false_alarm": _rate(c["flagged_clear_windows"], c["clear_windows"]),
        "cd_false_windows_all": c["cd_flagged_clear_windows"],
        "onset_episodes": onset_n, "onset_pass": _rate(onset_ok, onset_n),
        "naming": _rate(c["named_windows"], c["namable_windows"]),
        "namable_windows": c["namable_windows"],
        "targets": TARGETS,
    }
    out["meets"] = {
        "detection": out["detection"] is not None and out["detection"] >= TARGETS["detection"] - _EPS,
        "false_windows_clean": clean_runs > 0 and clean_false == 0,
        "onset_within_windows": out["onset_pass"] is not None and out["onset_pass"] >= 1.0 - _EPS,
        "naming": out["naming"] is None or out["naming"] >= TARGETS["naming"] - _EPS,
    }
    return out


__all__ = ["EPISODE_SHARE", "TARGETS", "classify", "grade_point_as", "grade_run",
           "grade_series_repeat", "names", "overlap", "summarize", "grid_windows", "totals"]
