"""The contention-detector validation study (``wotbench study``, ``make study``): run the
scenarios of ``cd-module/validation/scenarios.yaml`` on the sweep engine, in this process, and
tabulate whether the detector told the truth (rules: :mod:`.rules`).

Study directory ``reports/study-<UTC>/``::

    study.json                 what was asked (manifest, scenarios, gate) and when
    scenarios/<name>/          one sweep dir per scenario (sweep.json, configs/, runs/<id>/...):
                               a single point, or the ``vary`` values of a series
    results.json, table.md     the evaluation (rewritten after every scenario)

Resumable: ``wotbench study --resume DIR`` re-runs only the points without a summary (a killed
study, a point skipped because the host never became quiet). Before every run the quiet-host
gate (:class:`wotbench.monitor.quiet.QuietGate`) waits for a low load average and records the load
before and after it.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Optional

from wotbench.analysis import analyze
from wotbench.errors import ConfigError
from wotbench.monitor.quiet import QuietGate
from wotbench.rundir import atomic
from wotbench.rundir.layout import StudyDir
from wotbench.stamps import dir_stamp, iso_stamp
from wotbench.sweep.core import RunFn, Sweep, default_run_fn
from wotbench.validation import graded
from wotbench.validation.antagonist import (RECORD_NAME, parse_antagonist, read_record,
                                            with_antagonist)
from wotbench.validation.facts import load_run
from wotbench.validation.rates import (grade_point_as, grade_run, grade_series_repeat,
                                       summarize, totals)
from wotbench.validation.rules import evaluate_run, evaluate_series
from wotbench.validation.scenarios import DEFAULT_MANIFEST, repeats, scenario_sweep, select
from wotbench.validation.study_meta import StudyGate, StudyMeta, read_study_meta
from wotbench.validation.table import render_table


def _why_no_run(sweep: Sweep, p) -> str:
    """Why a point has no summary: its error, and why its antagonist never started."""
    why = p.error or f"no summary.json (exit {p.exit_code})"
    rec = sweep.files.point_runs(p.id) / RECORD_NAME
    if rec.is_file():
        try:
            why_not = read_record(rec).why_not
        except (OSError, ValueError):
            why_not = None
        if why_not:
            why += f"; antagonist: {why_not}"
    return why


def evaluate(sc: dict, sweep: Sweep) -> dict[str, Any]:
    """The scenario's table entry: its rates over the repeats (:mod:`.rates`), the per-run rules
    (:mod:`.rules`), or why there is none."""
    entry: dict[str, Any] = {"name": sc["name"], "expect": sc["expect"],
                             "sweep_dir": str(sweep.dir), "repeats": repeats(sc),
                             "antagonist": sc.get("antagonist"), "invalid": [], "missing": []}
    runs = []
    entry["loads"] = [p.load for p in sweep.points if p.load]
    for p in sweep.points:
        rd = sweep.run_dir(p)
        if p.status == "skipped":
            entry["skipped"], entry["load"] = p.error, p.load
            entry["missing"].append({"point": p.id, "why": p.error})
        elif rd is None or not rd.summary_json.is_file():
            why = _why_no_run(sweep, p)
            entry.setdefault("error", why)
            entry["missing"].append({"point": p.id, "why": why})
        else:
            try:
                run = load_run(rd.path)
            except (OSError, ValueError, KeyError) as e:   # a summary this version cannot read
                entry.setdefault("error", f"{rd.summary_json}: {type(e).__name__}: {e}")
                entry["missing"].append({"point": p.id, "why": entry["error"]})
                continue
            run["load"] = p.load
            if sc.get("antagonist") is not None and run.get("antagonist") is None \
                    and not run.get("invalid"):
                run["invalid"] = _why_no_run(sweep, p).replace(
                    p.error or f"no summary.json (exit {p.exit_code})",
                    f"the run has no {RECORD_NAME}")
            if run.get("invalid"):
                entry["invalid"].append({"point": p.id, "run_dir": run["run_dir"],
                                         "why": run["invalid"]})
                continue
            runs.append((p, run))
    try:
        if sc.get("vary"):
            key = sc["vary"]["key"]
            by_seed: dict[Any, list] = {}
            for p, run in runs:
                by_seed.setdefault(p.overrides.get("seed"), []).append((p.overrides[key], run))
            series, grades, onsets = [], [], []
            for seed, pts in sorted(by_seed.items(), key=lambda kv: str(kv[0])):
                ev = evaluate_series(pts)
                ev["seed"] = seed
                series.append(ev)
                grades += [grade_point_as(run, cls) for _, run, cls in grade_series_repeat(pts)]
                onsets.append({"episode": f"overload (seed {seed})", "kind": "overload",
                               "start_s": None, "end_s": None, "first_flag_s": None,
                               "delay_s": ev["onset_steps_apart"],
                               "within_one_window": bool(ev["onset_matched"])})
            entry["evaluation"] = {"expect": "scale", "series": series,
                                   "passed": all(e["passed"] for e in series)} if series else None
            rates = summarize(grades, sc["expect"], extra_onsets=onsets)
            entry["rates"] = rates if runs else None
        elif runs:
            per_run = [evaluate_run(run, sc["expect"]) for _, run in runs]
            entry["runs"] = [{"point": p.id, "run_dir": run["run_dir"], "load": run["load"],
                              "seed": p.overrides.get("seed"), "evaluation": ev}
                             for (p, run), ev in zip(runs, per_run)]
            entry["rates"] = summarize([grade_run(run, expect=sc["expect"]) for _, run in runs],
                                      sc["expect"])
            entry["evaluation"] = {"expect": sc["expect"], "runs": len(runs),
                                   "per_run_passed": [ev["passed"] for ev in per_run],
                                   "passed": entry["rates"]["passed"]}
            entry["load"], entry["run_dir"] = runs[0][1]["load"], runs[0][1]["run_dir"]
    except (OSError, ValueError, KeyError) as e:
        entry["evaluation"], entry["error"] = None, f"{type(e).__name__}: {e}"
    entry.setdefault("evaluation", None)
    entry.setdefault("rates", None)
    # a repeat that could not be graded fails the scenario: its rates cover fewer runs
    entry["passed"] = bool(entry["rates"] and entry["rates"]["passed"]
                           and not entry["invalid"] and not entry["missing"])
    return entry


def _write(study_dir: Path, results: list[dict], meta: StudyMeta) -> str:
    total = totals(results)
    table = render_table(results, total)
    sd = StudyDir(study_dir)
    atomic.write_json(sd.results_json, {"meta": meta.to_json(), "scenarios": results,
                                        "totals": total}, indent=1, default=str)
    atomic.write_text(sd.table_md, f"# Validation study {meta.started_utc}\n\n{table}")
    return table


def run_study(manifest: Path = DEFAULT_MANIFEST, *, only: Optional[list[str]] = None,
              out_root: Path = Path("reports"), resume: Optional[Path] = None,
              gate: Optional[QuietGate] = None, run_fn: Optional[RunFn] = None,
              reanalyze: bool = False, evaluate_only: bool = False,
              log: Callable[[str], None] = print, repeats_override: Optional[int] = None,
              antagonist_opts: Optional[dict] = None, seed_base: Optional[int] = None) -> int:
    """Run (or resume, or only re-evaluate) the study; 0 every scenario passed, 3 otherwise.
    ``seed_base``: every scenario's runs use the seeds seed_base, seed_base + 1, ... instead of
    their configs' (a study on new seeds; a resumed study keeps the seeds it started with)."""
    if resume is not None:
        study_dir = Path(resume)
        sd = StudyDir(study_dir)
        meta = read_study_meta(sd.study_json)
        only = only or meta.only
        scenarios = select(sd.manifest_yaml, only)
        repeats_override = repeats_override or meta.repeats_override
        if seed_base is not None and seed_base != meta.seed_base:
            began = meta.seed_base
            began = "each config's seed" if began is None else f"--seed-base {began}"
            raise ConfigError([f"--seed-base {seed_base}: {study_dir} was started with {began}; "
                               "a resumed study keeps its seeds"])
        seed_base = meta.seed_base
    else:
        scenarios = select(Path(manifest), only)       # nothing is written for a bad manifest
        study_dir = Path(out_root) / f"study-{dir_stamp()}"
        study_dir.mkdir(parents=True)
        sd = StudyDir(study_dir)
        atomic.write_text(sd.manifest_yaml, Path(manifest).read_text())
        meta = StudyMeta(started_utc=iso_stamp(), manifest=str(Path(manifest).resolve()),
                         host=os.uname().nodename, cpus=os.cpu_count(), only=only,
                         repeats_override=repeats_override, seed_base=seed_base,
                         gate=StudyGate(**vars(gate)) if gate else None)
        atomic.write_json(sd.study_json, meta.to_json(), indent=1)
    if repeats_override:
        for sc in scenarios:
            sc["repeats"] = int(repeats_override)
    # every scenario's sweep before any run, so a bad scenario config stops the study at once;
    # the manifest's config paths are relative to the manifest the study was created from
    try:
        sweeps = [scenario_sweep(study_dir, Path(meta.manifest), sc, seed_base)
                  for sc in scenarios]
    except ConfigError:
        if resume is None:
            shutil.rmtree(study_dir)                  # nothing was run: leave nothing behind
        raise
    log(f"study -> {study_dir}")
    results = []
    for sc, sweep in zip(scenarios, sweeps):
        log(f"{sc['name']} ({sc['expect']})")
        if not evaluate_only:
            fn = run_fn or default_run_fn()
            if sc.get("antagonist") is not None:
                fn = with_antagonist(fn, parse_antagonist(sc["antagonist"]),
                                     manifest_dir=Path(meta.manifest).parent,
                                     second_root=sd.second_runs(sc["name"]),
                                     log=log, **(antagonist_opts or {}))
            sweep.run_all(fn, gate=gate, progress=False)
        if reanalyze:
            for p in sweep.points:
                rd = sweep.run_dir(p)
                if rd is not None and rd.run_json.is_file():
                    analyze(rd.path)
        results.append(evaluate(sc, sweep))
        _write(study_dir, results, meta)
    graded_result = graded.evaluate_study(list(zip(scenarios, sweeps)))
    if graded_result is not None:
        atomic.write_json(sd.graded_json, graded_result, indent=1, default=str)
        atomic.write_text(sd.graded_md, "# Graded study\n\n" +
                          graded.render(graded_result) + "".join(
                              f"\n- missing: {m}" for m in graded_result["missing"]))
        log(f"wrote {sd.graded_md}")
    meta.finished_utc = iso_stamp()
    print(_write(study_dir, results, meta))
    log(f"wrote {sd.table_md} and {sd.results_json}")
    bad = [r["name"] for r in results if not r.get("skipped") and not r.get("passed")]
    return 0 if not bad and not any(r.get("skipped") for r in results) else 3
