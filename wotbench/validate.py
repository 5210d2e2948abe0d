"""Validation driver (`make validate`): run the scenarios of ``configs/validation/scenarios.yaml``
and tabulate whether the contention detector (CD) told the truth.

    python -m wotbench.validate [--manifest configs/validation/scenarios.yaml] [--only NAME ...]
                                [--out reports] [--max-load 0.6] [--quiet-timeout 600]
                                [--no-wait] [--dry-run]
    python -m wotbench.validate --evaluate VALIDATE_DIR [--reanalyze]   # table only, no runs
    python -m wotbench.validate --calibration-sweep RUN_DIR ...         # baseline-length evidence

Output: ``reports/validate-<UTC>/`` with ``runs/<scenario>/<run dir>``, ``configs/`` (derived
configs of series points), ``results.json`` and ``table.md`` (also printed).

Ground truth and rules (all constants below; docs/VALIDATION.md explains them):
- contention *present*: run.json ``contention`` lists the injected hog episodes (``start_s``,
  ``end_s`` relative to the test start). Clean scenarios have none.
- the CD's answer: summary.json ``contention`` (status, flagged windows, onset) and
  ``series/contention_windows.csv``.
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
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .analysis.stats import fnum as _f
from .sweep.core import _stamp as _utc
from .sweep.paths import get_path

DEV_RISE = 0.10               # devices' response-time rise that counts as "R_d rose"
QUIET_PATTERNS = ("wotbench", "pytest", "gcc", "cc1", "make -C", "docker build")

# --------------------------------------------------------------------------------------------
# reading a run dir


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def load_run(run_dir: Path) -> dict[str, Any]:
    """The facts the tables need from one run dir (run.json, summary.json, series/)."""
    run_dir = Path(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    cont = summary.get("contention") or {}
    cd_name = get_path(run, "cd.device") or "cd-node"
    rd_rows = _read_csv(run_dir / "series" / "rd_over_time.csv")
    dev_windows = [{"start_s": _f(r["window_start_s"]), "end_s": _f(r["window_end_s"]),
                    "p50_rd": _f(r["p50_rd"]), "count": int(float(r["count"] or 0))}
                   for r in rd_rows if r.get("device") == "all"]
    cd_windows = [{"start_s": _f(r["start_s"]), "end_s": _f(r["end_s"]),
                   "median_rd": _f(r["median_rd"]), "shift": _f(r["shift"]),
                   "p_value": _f(r["p_value"]), "flagged": r.get("flagged") == "True"}
                  for r in _read_csv(run_dir / "series" / "contention_windows.csv")]
    return {
        "run_dir": str(run_dir),
        "episodes": [{"name": e.get("name"), "kind": e.get("kind"), "cores": e.get("cores"),
                      "start_s": float(e["start_s"]), "end_s": float(e["end_s"])}
                     for e in (run.get("contention") or [])],
        "contention": {"status": cont.get("status"), "reason": cont.get("reason"),
                       "onset_s": cont.get("onset_s"),
                       "window_s": get_path(cont, "params.window_s"),
                       "windows_tested": cont.get("windows_tested"),
                       "windows_flagged": cont.get("windows_flagged"),
                       "baseline": cont.get("baseline"),
                       "flagged_windows": [{"start_s": w["start_s"], "end_s": w["end_s"]}
                                           for w in cont.get("flagged_windows") or []]},
        "cd_windows": cd_windows,
        "dev_windows": dev_windows,
        "rd_devices_p50": get_path(summary, "rd.overall.rd.p50"),
        "rd_cd_cal_p50": get_path(summary, "rd.cd.calibration.p50"),
        "rd_cd_test_p50": get_path(summary, "rd.cd.test.p50"),
        "cd": {"name": cd_name, "service_time_us": get_path(run, "cd.service_time_us"),
               "mode": get_path(run, "cd.mode"), "interval_s": get_path(run, "cd.interval_s"),
               "calibration_s": get_path(run, "cd.calibration_s")},
        "verdict": get_path(summary, "verdict.status"),
        "reasons": get_path(summary, "verdict.reasons") or [],
        "ge_kept_up": get_path(summary, "ge_integrity.kept_up"),
        "devices": get_path(summary, "overall.devices"),
        "failures": run.get("failures") or [],
    }

# --------------------------------------------------------------------------------------------
# table logic (pure; tested with fake runs in tests/python/test_validate.py)


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
    cw = get_path(run, "contention.window_s")
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
        status = get_path(run, "contention.status")
        rows.append({"value": value, "rd_devices_p50": rd, "rt_ratio_devices": ratio,
                     "devices_rose": bool(ratio is not None and ratio > 1.0 + rise),
                     "rd_cd_cal_p50": run.get("rd_cd_cal_p50"),
                     "rd_cd_test_p50": run.get("rd_cd_test_p50"),
                     "cd_status": status, "cd_flagged": status == "detected",
                     "cd_windows_flagged": get_path(run, "contention.windows_flagged"),
                     "cd_windows_tested": get_path(run, "contention.windows_tested"),
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

# --------------------------------------------------------------------------------------------
# rendering


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _load_txt(load: Optional[dict]) -> str:
    if not load:
        return "–"
    return f"{_fmt(load.get('before'))}→{_fmt(load.get('after'))}"


def _windows_txt(ws: list) -> str:
    return ", ".join(f"{a:g}–{b:g}" for a, b in ws) if ws else "none"


def render_table(results: list[dict]) -> str:
    lines = ["| scenario | contention present (injected) | CD said | flagged windows (s) | "
             "devices R_d p50 | CD R_d p50 cal → test | onset: episode / devices / CD (s) | "
             "onset matched | pass | load 1-min before→after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        name = r["name"]
        if r.get("skipped"):
            why = r["skipped"].split(" (")[0]          # details stay in results.json
            lines.append(f"| {name} | – | not run: {why} | – | – | – | – | – | – | "
                         f"{_load_txt(r.get('load'))} |")
            continue
        ev = r.get("evaluation")
        if ev is None:
            lines.append(f"| {name} | – | run failed: {r.get('error')} | – | – | – | – | – | no | "
                         f"{_load_txt(r.get('load'))} |")
            continue
        if ev["expect"] == "scale":
            for p in ev["points"]:
                lines.append(
                    f"| {name} n={p['value']} | {'no (rising load)'} | {p['cd_status']} "
                    f"({_fmt(p['cd_windows_flagged'])}/{_fmt(p['cd_windows_tested'])} windows) | – | "
                    f"{_fmt(p['rd_devices_p50'])} (×{_fmt(p['rt_ratio_devices'])} RT) | "
                    f"{_fmt(p['rd_cd_cal_p50'])} → {_fmt(p['rd_cd_test_p50'])} | – | – | – | "
                    f"{_load_txt(p.get('load'))} |")
            lines.append(f"| **{name}** | – | CD onset n={_fmt(ev['cd_onset'])} | – | "
                         f"devices' onset n={_fmt(ev['devices_onset'])} | – | "
                         f"steps apart: {_fmt(ev['onset_steps_apart'])} | "
                         f"{_fmt(ev['onset_matched'])} | {'PASS' if ev['passed'] else 'FAIL'} | – |")
            continue
        eps = ev["episodes"]
        present = ", ".join(f"{e['kind']} {e['start_s']:g}–{e['end_s']:g}" for e in eps) or "no"
        fl = _windows_txt(ev["cd_flagged_windows"])
        if ev["cd_false_windows"]:
            fl += f" (false: {_windows_txt(ev['cd_false_windows'])})"
        lines.append(
            f"| {name} | {present} | {ev['cd_status']} | {fl} | {_fmt(ev['rd_devices_p50'])} | "
            f"{_fmt(ev['rd_cd_cal_p50'])} → {_fmt(ev['rd_cd_test_p50'])} | "
            f"{_fmt(ev['episode_onset_s'])} / {_fmt(ev['devices_onset_s'])} / {_fmt(ev['cd_onset_s'])} | "
            f"{_fmt(ev['onset_matched'])} | {'PASS' if ev['passed'] else 'FAIL'} | "
            f"{_load_txt(r.get('load'))} |")
    return "\n".join(lines) + "\n"

# --------------------------------------------------------------------------------------------
# running


def loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def busy_processes(ps_output: Optional[str] = None, exclude: Optional[set[int]] = None) -> list[str]:
    """Other processes that would load the host (other wotbench runs, pytest, compilers)."""
    if ps_output is None:
        ps_output = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True,
                                   check=False).stdout
    exclude = _ancestors() if exclude is None else exclude
    out = []
    for line in ps_output.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) in exclude:
            continue
        args = parts[1]
        if any(p in args for p in QUIET_PATTERNS) and "ps -eo" not in args:
            out.append(f"{parts[0]} {args[:100]}")
    return out


def wait_quiet(max_load: float, timeout_s: float, poll_s: float = 10.0,
               log: Callable[[str], None] = print) -> tuple[bool, float, list[str]]:
    t_end = time.monotonic() + timeout_s
    while True:
        la, busy = loadavg(), busy_processes()
        if la < max_load and not busy:
            return True, la, []
        if time.monotonic() >= t_end:
            return False, la, busy
        log(f"  waiting for a quiet host: load {la:.2f} (< {max_load} wanted)"
            + (f", busy: {'; '.join(busy[:3])}" if busy else ""))
        time.sleep(poll_s)


def _wotbench_bin() -> list[str]:
    exe = Path(sys.executable).with_name("wotbench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "wotbench.cli"]


def _newest_run_dir(root: Path) -> Optional[Path]:
    if not root.is_dir():
        return None
    dirs = [d for d in root.iterdir() if d.is_dir() and (d / "run.json").is_file()]
    return max(dirs, key=lambda d: (d / "run.json").stat().st_mtime) if dirs else None


def _leftovers() -> list[str]:
    r = subprocess.run(["docker", "ps", "-aq", "--filter", "label=wotbench.run"],
                       capture_output=True, text=True, check=False)
    return r.stdout.split()


def run_one(config: Path, out_root: Path, args, log=print) -> dict[str, Any]:
    """Wait for a quiet host, run one config, return {run_dir, exit_code, load, ...}."""
    res: dict[str, Any] = {"config": str(config)}
    if not args.no_wait:
        ok, la, busy = wait_quiet(args.max_load, args.quiet_timeout, log=log)
        if not ok:
            res["skipped"] = (f"host never quiet within {args.quiet_timeout:g} s "
                              f"(load {la:.2f}; {'; '.join(busy[:3]) or 'no other job seen'})")
            res["load"] = {"before": la, "after": None}
            return res
    before = loadavg()
    res["busy_before"] = busy_processes()
    log(f"  run {config.name} (load {before:.2f})")
    out_root.mkdir(parents=True, exist_ok=True)
    with (out_root / "wotbench-run.log").open("w") as lf:
        rc = subprocess.run(_wotbench_bin() + ["run", str(config), "--out-root", str(out_root)],
                            stdout=lf, stderr=subprocess.STDOUT, check=False).returncode
    res["exit_code"] = rc
    res["load"] = {"before": before, "after": loadavg()}
    res["busy_after"] = busy_processes()
    rd = _newest_run_dir(out_root)
    res["run_dir"] = str(rd) if rd else None
    left = _leftovers()
    if left:
        res["leftover_containers"] = left
    return res


def _evaluate_entry(sc: dict, entry: dict, reanalyze: bool) -> None:
    def load(rd: str) -> dict:
        if reanalyze:
            from .analysis import analyze
            analyze(Path(rd), write=True)
        return load_run(Path(rd))
    try:
        if sc.get("vary"):
            pts = []
            for p in entry.get("points", []):
                if p.get("run_dir") and (Path(p["run_dir"]) / "summary.json").is_file():
                    run = load(p["run_dir"])
                    run["load"] = p.get("load")
                    pts.append((p["value"], run))
            entry["evaluation"] = evaluate_series(pts) if pts else None
            if not pts:
                entry.setdefault("error", "no point produced summary.json")
        elif entry.get("run_dir") and (Path(entry["run_dir"]) / "summary.json").is_file():
            entry["evaluation"] = evaluate_run(load(entry["run_dir"]), sc["expect"])
        else:
            entry["evaluation"] = None
            entry.setdefault("error", f"no summary.json (exit {entry.get('exit_code')})")
    except (OSError, ValueError, KeyError) as e:
        entry["evaluation"] = None
        entry["error"] = f"{type(e).__name__}: {e}"


def read_manifest(path: Path) -> list[dict]:
    data = yaml.safe_load(path.read_text()) or {}
    scs = data.get("scenarios") or []
    for sc in scs:
        for k in ("name", "config", "expect"):
            if k not in sc:
                raise ValueError(f"{path}: scenario {sc!r} lacks {k!r}")
        if sc["expect"] not in ("clean", "episodes", "agree", "scale"):
            raise ValueError(f"{path}: scenario {sc['name']}: expect must be "
                             f"clean|episodes|agree|scale, got {sc['expect']!r}")
        if sc["expect"] == "scale" and not sc.get("vary"):
            raise ValueError(f"{path}: scenario {sc['name']}: expect scale needs vary")
    return scs


def _write(out: Path, results: list[dict], meta: dict) -> str:
    table = render_table(results)
    (out / "results.json").write_text(json.dumps({"meta": meta, "scenarios": results}, indent=1,
                                                 default=str))
    (out / "table.md").write_text(f"# Validation {meta.get('started_utc')}\n\n{table}")
    return table


def cmd_run(args) -> int:
    manifest = Path(args.manifest)
    scs = read_manifest(manifest)
    if args.only:
        scs = [s for s in scs if s["name"] in args.only]
    out = Path(args.out) / f"validate-{_utc()}"
    out.mkdir(parents=True, exist_ok=True)
    meta = {"started_utc": _utc(), "manifest": str(manifest), "host": os.uname().nodename,
            "cpus": os.cpu_count(), "max_load": args.max_load, "no_wait": args.no_wait}
    print(f"validation -> {out}")
    results = []
    for sc in scs:
        print(f"{sc['name']} ({sc['expect']})")
        cfg = manifest.parent / sc["config"]
        entry: dict[str, Any] = {"name": sc["name"], "expect": sc["expect"], "config": str(cfg)}
        if args.dry_run:
            entry["skipped"] = "dry run"
        elif sc.get("vary"):
            from .sweep.core import derive_config
            key, values = sc["vary"]["key"], sc["vary"]["values"]
            base_raw = yaml.safe_load(cfg.read_text())
            entry["points"] = []
            for v in values:
                name = f"{base_raw.get('name', 'v')}-n{v}"
                derived = derive_config(base_raw, {key: v}, base_dir=cfg.parent, name=name)
                cpath = out / "configs" / f"{name}.yaml"
                cpath.parent.mkdir(parents=True, exist_ok=True)
                cpath.write_text(yaml.safe_dump(derived, sort_keys=False))
                r = run_one(cpath, out / "runs" / sc["name"] / f"{key}={v}", args)
                r["value"] = v
                entry["points"].append(r)
                if r.get("skipped"):
                    entry["skipped"] = r["skipped"]
                    entry["load"] = r["load"]
                    break
        else:
            entry.update(run_one(cfg, out / "runs" / sc["name"], args))
        if not entry.get("skipped"):
            _evaluate_entry(sc, entry, reanalyze=False)
        results.append(entry)
        _write(out, results, meta)
    meta["finished_utc"] = _utc()
    table = _write(out, results, meta)
    print(table)
    print(f"wrote {out / 'table.md'} and {out / 'results.json'}")
    bad = [r["name"] for r in results if not r.get("skipped")
           and not (r.get("evaluation") or {}).get("passed")]
    return 0 if not bad and not any(r.get("skipped") for r in results) else 3


def cmd_evaluate(args) -> int:
    out = Path(args.evaluate)
    data = json.loads((out / "results.json").read_text())
    scs = {s["name"]: s for s in read_manifest(Path(args.manifest))}
    for entry in data["scenarios"]:
        if entry.get("skipped"):
            continue
        sc = scs.get(entry["name"], {"expect": entry["expect"], "vary": bool(entry.get("points"))})
        entry.pop("error", None)
        _evaluate_entry(sc, entry, reanalyze=args.reanalyze)
    data["meta"]["evaluated_utc"] = _utc()
    data["meta"]["reanalyzed"] = bool(args.reanalyze)
    table = _write(out, data["scenarios"], data["meta"])
    print(table)
    return 0


def calibration_sweep(run_dir: Path, lengths: list[int], params=None) -> list[dict]:
    """Re-apply the contention rule to one run with only the last n calibration probes.

    Evidence for the calibration length: does a shorter baseline change the verdict?"""
    import pandas as pd
    from .analysis.contention import ContentionParams, assess
    cd = pd.read_csv(run_dir / "series" / "cd_samples.csv")
    run = json.loads((run_dir / "run.json").read_text())
    dur = float(get_path(run, "test.duration_s") or 0)
    p = params or ContentionParams()
    out = []
    cal = cd[cd["phase"] == "calibration"]
    for n in lengths:
        keep = pd.concat([cal.tail(n), cd[cd["phase"] != "calibration"]])
        block, series = assess(keep, dur, p)
        out.append({"n_calibration": int(min(n, len(cal))), "status": block["status"],
                    "flagged": [(w["start_s"], w["end_s"]) for w in block["flagged_windows"]],
                    "threshold": get_path(block, "baseline.threshold_shift"),
                    "median": get_path(block, "baseline.median_rd"),
                    "min_p": float(series["p_value"].min()) if len(series) else None})
    return out


def simulate_rule(pool: list[float], *, n_cal: int, n_win: int, windows: int, shift: float,
                  trials: int = 2000, seed: int = 1, params=None) -> dict[str, float]:
    """Bootstrap the window rule from an empirical pool of CD R_d (CD alone, quiet host).

    Each trial draws a baseline of ``n_cal`` and ``windows`` test windows of ``n_win`` probes from
    the pool (with replacement); one window gets ``+shift`` on every probe. Returns the share of
    trials with a flag in a null window (false alarm) and with the shifted window flagged."""
    import numpy as np
    import pandas as pd
    from .analysis.contention import ContentionParams, assess
    rng = np.random.default_rng(seed)
    p = params or ContentionParams(window_s=float(n_win))   # 1 probe/s of window time units
    pool_a = np.asarray(pool, dtype=float)
    fa = det = 0
    for _ in range(trials):
        base = rng.choice(pool_a, n_cal)
        test = rng.choice(pool_a, (windows, n_win))
        test[windows // 2] += shift
        t = np.concatenate([np.arange(n_win) + w * n_win for w in range(windows)]).astype(float)
        df = pd.DataFrame({
            "t_s": np.concatenate([np.arange(-n_cal, 0, dtype=float), t]),
            "phase": ["calibration"] * n_cal + ["test"] * (windows * n_win),
            "rd": np.concatenate([base, test.ravel()]), "outcome": "ok"})
        _, series = assess(df, float(windows * n_win), p)
        fl = series["flagged"].fillna(False).astype(bool).to_numpy()
        det += bool(fl[windows // 2])
        fa += bool(np.delete(fl, windows // 2).any()) if shift else bool(fl.any())
    return {"false_alarm": fa / trials, "detected": det / trials if shift else float("nan")}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wotbench.validate", description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", default="configs/validation/scenarios.yaml")
    ap.add_argument("--only", nargs="*", help="scenario names")
    ap.add_argument("--out", default="reports")
    ap.add_argument("--max-load", type=float, default=0.6, help="1-min load average wanted before a run")
    ap.add_argument("--quiet-timeout", type=float, default=600, help="s to wait for a quiet host per run")
    ap.add_argument("--no-wait", action="store_true", help="run even when the host is busy (recorded)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--evaluate", metavar="VALIDATE_DIR", help="recompute the table of a finished validation")
    ap.add_argument("--reanalyze", action="store_true", help="with --evaluate: re-run the analysis first")
    ap.add_argument("--calibration-sweep", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--lengths", default="5,10,20,30")
    args = ap.parse_args(argv)
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    if args.calibration_sweep:
        lengths = [int(x) for x in args.lengths.split(",")]
        for rd in args.calibration_sweep:
            for row in calibration_sweep(Path(rd), lengths):
                print(Path(rd).name, json.dumps(row))
        return 0
    if args.evaluate:
        return cmd_evaluate(args)
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
