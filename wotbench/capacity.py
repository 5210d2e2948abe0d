"""Capacity search: the largest setting (number of devices, or per-device rate) that the host
emulates without distorting the results.

    wotbench capacity CONFIG [--key devices[0].count] [--start 5] [--max 200]
                             [--step 5 | --bisect] [--repeats 1] [--resume DIR]

1. Probe: run ``start``, then ``start + step`` (``--step``) or ``2 × start, 4 × start, …``
   (no ``--step``), never beyond ``--max``, until a setting is *flagged*: its summary.json verdict
   status is not ``trustworthy`` (the CD flagged contention, or the GE could not keep up, or the
   run was invalid).
2. Bisect (with ``--bisect``, or when no ``--step`` is given) between the last clean and the first
   flagged setting, down to ``resolution`` (1 for integer keys).
The answer is the largest clean setting; every run is kept as evidence.

``--key devices[N].rate`` is a pseudo key: the per-device request rate in req/s, applied as
``devices[N].rit.mean = 1000 / rate`` (ms).

Noisy verdicts: each setting is run ``--repeats`` times (repeats after the first use seed + r, so
they are independent) and is flagged when at least half of its runs are flagged (a tie counts as
flagged: the search errs on the safe side). The search assumes monotonicity (more load never
makes a flagged setting clean), so it never tests above a flagged or below a clean setting; a
clean result above a flagged one can therefore not arise, and the answer is conservative when a
single run was flagged by noise (raise --repeats to guard against that). A run that fails without
summary.json, or that ``--quiet`` skips because the host never became quiet, stops the search
(status ``failed``); ``--resume`` picks it up again.

Everything goes into a sweep dir ``reports/capacity-<name>-<UTC>/`` (``sweep.json``, one run dir
per point), plus ``capacity.json`` and ``report.html``. The run function is injected.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Optional

import yaml

from .config import load_config
from .errors import ConfigError
from .report.present import cell
from .runner.quiet import QuietGate
from .sweep.core import RunFn, Sweep, SweepInterrupted, default_run_fn, derive_config
from .sweep.paths import format_key, get_path, parse_key
from .sweep.report import write_report

SCHEMA = "wotbench-capacity/1"
_RATE = re.compile(r"^devices\[(\d+)\]\.rate$")


class _Failed(Exception):
    pass


def overrides_for(key: str, value: Any) -> dict[str, Any]:
    m = _RATE.match(key)
    if m:
        return {f"devices[{m.group(1)}].rit.mean": round(1000.0 / float(value), 6)}
    return {key: value}


def _policy(repeats: int) -> str:
    return (f"Each setting ran {repeats} time(s); flagged when at least half of its runs had a verdict "
            "other than trustworthy (ties count as flagged). Monotonic search: nothing above a flagged "
            "or below a clean setting is run.")


class CapacitySearch:
    def __init__(self, sweep: Sweep, params: dict, run_fn: RunFn, console: Any, backend: Optional[str],
                 gate: Optional[QuietGate] = None):
        self.sweep, self.p, self.run_fn, self.console, self.backend = sweep, params, run_fn, console, backend
        self.gate = gate
        self.interrupted: Optional[SweepInterrupted] = None   # a run stopped by SIGINT/SIGTERM
        self.steps: list[dict] = []
        self.base_seed = int(get_path(sweep.base_raw, "seed", 1) or 1)

    def evaluate(self, value: Any, phase: str) -> bool:
        pts = []
        for r in range(self.p["repeats"]):
            ov = overrides_for(self.p["key"], value)
            if r:
                ov["seed"] = self.base_seed + r
            p = self.sweep.add_point(ov)
            if p.status != "done" or not self.sweep.refresh(p):
                self._say(f"[bold]{phase}[/] {self.p['key']}={value} (run {r + 1}/{self.p['repeats']}, {p.id}) …")
                self.sweep.run_point(p, self.run_fn, self.backend, self.gate,
                                     log=self._say)
            pts.append(p)
            if p.status != "done":
                self.steps.append(self._step(phase, value, pts, None))
                raise _Failed(f"{p.id} ({self.p['key']}={value}) {p.status}: {p.error}")
        flagged = 2 * sum(p.verdict != "trustworthy" for p in pts) >= len(pts)
        self.steps.append(self._step(phase, value, pts, flagged))
        self._say(f"  → {self.p['key']}={value}: " + ("[red]flagged[/]" if flagged else "[green]clean[/]") +
                  f" ({', '.join(str(p.verdict) for p in pts)})")
        return flagged

    def _step(self, phase: str, value: Any, pts: list, flagged: Optional[bool]) -> dict:
        summaries = [s for s in (self.sweep.summary(p) for p in pts) if s is not None]
        return {"phase": phase, "value": value, "points": [p.id for p in pts], "flagged": flagged,
                "verdicts": [p.verdict for p in pts], "reasons": [r for p in pts for r in p.reasons],
                "run_dirs": [p.run_dir for p in pts],
                "rd_devices": _median([s.rd.overall.rd.p50 for s in summaries]),
                "rd_cd": _median([s.rd.cd.test.p50 for s in summaries if s.rd.cd])}

    def _say(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def run(self) -> dict:
        p = self.p
        start, maximum, step, res = p["start"], p["max"], p["step"], p["resolution"]
        integer = all(isinstance(v, int) for v in (start, maximum, step or 1))
        status, answer, first_flagged, error = "failed", None, None, None
        try:
            last_clean, v = None, start
            while True:
                if self.evaluate(v, "probe"):
                    first_flagged = v
                    break
                last_clean = v
                if v >= maximum:
                    break
                v = min(maximum, v + step if step else v * 2)
            if first_flagged is not None and last_clean is not None and p["bisect"]:
                lo, hi = last_clean, first_flagged
                while hi - lo > res:
                    mid = (lo + hi) // 2 if integer else (lo + hi) / 2
                    if self.evaluate(mid, "bisect"):
                        hi = mid
                    else:
                        lo = mid
                last_clean, first_flagged = lo, hi
            answer = last_clean
            status = ("found" if first_flagged is not None and answer is not None else
                      "none_clean" if answer is None else "max_clean")
        except _Failed as e:
            error = str(e)
        except SweepInterrupted as e:      # the caller writes what was found, then re-raises
            status, error, self.interrupted = "interrupted", str(e), e
        clean = [s["value"] for s in self.steps if s["flagged"] is False]
        if status in ("failed", "interrupted"):
            answer = max(clean) if clean else None
        return {"schema": SCHEMA, "key": p["key"], "params": p, "status": status, "answer": answer,
                "first_flagged": first_flagged, "runs": sum(len(s["points"]) for s in self.steps),
                "steps": self.steps, "error": error, "policy": _policy(p["repeats"]),
                "conclusion": _conclusion(status, p, answer, first_flagged, error)}


def _median(vals: list[Optional[float]]) -> Optional[float]:
    """The median R_d of a setting's runs (runs without one left out)."""
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else None


def _conclusion(status: str, p: dict, answer: Any, flagged: Any, error: Optional[str]) -> str:
    k = p["key"]
    if status == "found":
        return (f"{k} = {answer} is the largest setting with a trustworthy verdict; {k} = {flagged} was "
                f"flagged (resolution {p['resolution'] if p['bisect'] else p['step']}).")
    if status == "max_clean":
        return f"every setting up to the maximum {k} = {p['max']} was trustworthy: the limit lies above it."
    if status == "none_clean":
        return (f"already the first setting {k} = {p['start']} was flagged: lower --start, or give the "
                f"emulation more cores.")
    if status == "interrupted":
        return (f"the search was interrupted ({error}); largest clean setting so far: {answer}. "
                f"Continue it with --resume.")
    return (f"the search stopped because a run did not complete ({error}); largest clean setting so far: "
            f"{answer}. Fix the cause (or wait for a quiet host) and resume with --resume.")


def _check_params(key: str, start: Any, maximum: Any, step: Any, repeats: int, resolution: Any) -> None:
    problems = []
    try:
        parse_key(key)
    except ValueError as e:
        problems.append(f"--key {key}: {e}")
    for name, v in (("--start", start), ("--max", maximum)):
        if not isinstance(v, (int, float)) or v <= 0:
            problems.append(f"{name}: must be a number > 0, got {v!r}")
    if not problems and maximum < start:
        problems.append(f"--max {maximum} is below --start {start}")
    if step is not None and (not isinstance(step, (int, float)) or step <= 0):
        problems.append(f"--step: must be a number > 0, got {step!r}")
    if repeats < 1:
        problems.append(f"--repeats: must be >= 1, got {repeats}")
    if resolution is not None and resolution <= 0:
        problems.append(f"--resolution: must be > 0, got {resolution}")
    if problems:
        raise ConfigError(problems)


def _check_key(config: str | Path, key: str, start: Any) -> None:
    """Derive the start point once (nothing written) so a bad --key fails before any run."""
    load_config(config)
    ov = overrides_for(key, start)
    derive_config(yaml.safe_load(Path(config).read_text()), ov, base_dir=Path(config).resolve().parent,
                  name="capacity-check", origins={k: f"--key {key}" for k in ov})


def run_capacity(config: Optional[str | Path] = None, *, key: str = "devices[0].count", start: Any = 5,
                 maximum: Any = 200, step: Any = None, bisect: Optional[bool] = None, repeats: int = 1,
                 resolution: Any = None, resume: Optional[str | Path] = None,
                 out_root: str | Path = "reports", backend: Optional[str] = None,
                 run_fn: Optional[RunFn] = None, console: Any = None, report: bool = True,
                 gate: Optional[QuietGate] = None) -> dict:
    """``wotbench capacity``; returns the capacity.json content (also written to the dir).
    ``gate``: wait for a quiet host before every run."""
    if resume is not None:
        sweep = Sweep.open(resume)
        if sweep.data.get("kind") != "capacity":
            raise ConfigError([f"--resume {resume}: not a capacity search dir (kind {sweep.data.get('kind')!r})"])
        params = sweep.data["capacity_params"]
    else:
        if config is None:
            raise ConfigError(["capacity: give a CONFIG (or --resume DIR)"])
        key = format_key(parse_key(key)) if key else key
        _check_params(key, start, maximum, step, repeats, resolution)
        if bisect is None:
            bisect = step is None
        integer = all(isinstance(v, int) for v in (start, maximum, step or 1))
        params = {"key": key, "start": start, "max": maximum, "step": step, "bisect": bool(bisect),
                  "repeats": int(repeats),
                  "resolution": resolution if resolution is not None else (1 if integer else (step or start) / 8)}
        _check_key(config, key, start)
        sweep = Sweep.create(config, [], out_root=out_root, kind="capacity", backend=backend,
                             extra={"capacity_params": params, "vary": [{"key": key, "values": "search"}]})
    search = CapacitySearch(sweep, params, run_fn or default_run_fn(), console, backend, gate)
    result = search.run()
    result["sweep_dir"] = str(sweep.dir)
    (sweep.dir / "capacity.json").write_text(json.dumps(result, indent=2, default=str))
    if report:
        write_report(sweep, capacity=result)
    if console is not None:
        print_capacity(result, console)
    if search.interrupted is not None:
        raise search.interrupted
    return result


def capacity_exit_code(result: dict) -> int:
    """0 an answer was found (or the maximum was clean), 3 nothing clean, 1 a run failed."""
    return {"found": 0, "max_clean": 0, "none_clean": 3}.get(result["status"], 1)


def print_capacity(result: dict, console: Any) -> None:
    from rich.table import Table
    t = Table(title=f"Capacity search over {result['key']}", title_justify="left")
    for col in ("#", "phase", result["key"], "runs", "result", "R_d devices", "R_d CD", "verdicts"):
        t.add_column(col, justify="right" if col in ("#", "R_d devices", "R_d CD") else "left")
    fmt = lambda v: cell(v, 3)  # noqa: E731
    for i, s in enumerate(result["steps"], 1):
        res = {True: "[red]flagged[/]", False: "[green]clean[/]", None: "[red]failed[/]"}[s["flagged"]]
        t.add_row(str(i), s["phase"], str(s["value"]), ", ".join(s["points"]), res, fmt(s["rd_devices"]),
                  fmt(s["rd_cd"]), ", ".join(str(v) for v in s["verdicts"]))
    console.print(t)
    style = "green" if result["status"] in ("found", "max_clean") else "red"
    console.print(f"[{style}]{result['conclusion']}[/]  ({result['runs']} runs; {result['sweep_dir']})")
