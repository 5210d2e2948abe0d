"""Capacity search: the largest setting (number of devices, or per-device rate) that the host
emulates without distorting the results.

    wotbench capacity CONFIG [--key devices[0].count] [--start 5] [--max 200]
                             [--step 5 | --bisect] [--repeats 1] [--resume DIR]
                             [--slo 'p95<=50ms' ...] [--set KEY=VALUE ...]

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

With SLOs (``--slo 'p95<=50ms'``, repeatable, or the config's ``slo:``) the search looks for
the largest setting that meets every objective while the host stays faithful, and answers in one
sentence about the system, about the testbed, or "inconclusive" (:mod:`wotbench.capacity.slo_search`).
``--set KEY=VALUE`` (repeatable) fixes a key for every run: the what-if (``--set
devices[*].network.loss.percent=2``: the same question with 2 % loss on every link).

Everything goes into a sweep dir ``reports/capacity-<name>-<UTC>/`` (``sweep.json``, one run dir
per point), plus ``capacity.json`` and ``report.html``. The run function is injected.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from wotbench.capacity.result import CapacityParams, CapacityResult
from wotbench.capacity.search import CapacitySearch, overrides_for
from wotbench.capacity.slo_search import SloSearch, slo_exit_code, slo_metric_text
from wotbench.configfile.yaml_loader import ConfigFile, read_config_file
from wotbench.errors import ConfigError
from wotbench.report.present import cell
from wotbench.monitor.quiet import QuietGate
from wotbench.rundir import atomic
from wotbench.schema_errors import problems as schema_problems
from wotbench.config.slo_spec import Slo, merge_exprs
from wotbench.sweep.core import RunFn, Sweep, default_run_fn, derive_config
from wotbench.sweep.paths import format_key, parse_key
from wotbench.sweep.report import write_report


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


def _check_key(base: ConfigFile, key: str, start: Any, fixed: dict) -> None:
    """Derive the start point once (nothing written) so a bad --key, --set or --slo fails
    before any run."""
    ov = overrides_for(key, start)
    if key in fixed or any(k in fixed for k in ov):
        raise ConfigError([f"--key {key}: also given with --set; search it or fix it, not both"])
    origins = {**{k: "--slo" if k == "slo" else f"--set {k}={v!r}" for k, v in fixed.items()},
               **{k: f"--key {key}" for k in ov}}
    derive_config(base.raw, {**fixed, **ov}, base_dir=base.path.resolve().parent,
                  name="capacity-check", origins=origins)


def _slo_of(config: ConfigFile, exprs: list[str]) -> Optional[dict]:
    """The SLOs of the search: the config's ``slo:`` with every ``--slo`` set over it (None
    without either); validated, each problem naming the flag."""
    base = config.raw.get("slo")
    if not exprs:
        return base
    try:
        merged = merge_exprs(base if isinstance(base, dict) else None, exprs)
    except ValueError as e:
        raise ConfigError([f"--slo {e}"]) from None
    try:
        Slo.model_validate(merged)
    except ValidationError as e:
        raise ConfigError([f"--slo {' '.join(exprs)}: {p}" for p in schema_problems(e, Slo, ("slo",))]) from None
    return merged


def run_capacity(config: Optional[str | Path | ConfigFile] = None, *, key: str = "devices[0].count", start: Any = 5,
                 maximum: Any = 200, step: Any = None, bisect: Optional[bool] = None, repeats: int = 1,
                 resolution: Any = None, resume: Optional[str | Path] = None,
                 out_root: str | Path = "reports", backend: Optional[str] = None,
                 run_fn: Optional[RunFn] = None, console: Any = None, report: bool = True,
                 gate: Optional[QuietGate] = None, fixed: Optional[dict] = None,
                 slo: Optional[list[str]] = None) -> CapacityResult:
    """``wotbench capacity``; returns capacity.json's content (also written to the dir).
    ``gate``: wait for a quiet host before every run. ``fixed``: keys every run gets
    (``--set``, the what-if); ``slo``: ``--slo`` expressions. With SLOs (these, or the config's
    ``slo:``) the search looks for the largest setting that meets them on a faithful host
    (:mod:`wotbench.capacity.slo_search`)."""
    if resume is not None:
        sweep = Sweep.open(resume)
        if sweep.header.kind != "capacity":
            raise ConfigError([f"--resume {resume}: not a capacity search dir (kind {sweep.header.kind!r})"])
        params = CapacityParams.model_validate(sweep.header.capacity_params)
    else:
        if config is None:
            raise ConfigError(["capacity: give a CONFIG (or --resume DIR)"])
        key = format_key(parse_key(key)) if key else key
        _check_params(key, start, maximum, step, repeats, resolution)
        if bisect is None:
            bisect = step is None
        integer = all(isinstance(v, int) for v in (start, maximum, step or 1))
        fixed = dict(fixed or {})
        base = (config if isinstance(config, ConfigFile)   # the YAML read once for the search
                else read_config_file(config))
        slo_spec = _slo_of(base, list(slo or []))
        if slo:
            fixed["slo"] = slo_spec
        params = CapacityParams(
            key=key, start=start, max=maximum, step=step, bisect=bool(bisect), repeats=int(repeats),
            resolution=resolution if resolution is not None else (1 if integer else (step or start) / 8),
            set={k: v for k, v in fixed.items() if k != "slo"}, slo=slo_spec)
        _check_key(base, key, start, fixed)
        sweep = Sweep.create(base, [], out_root=out_root, kind="capacity", backend=backend,
                             extra={"capacity_params": params.model_dump(), "set": fixed,
                                    "vary": [{"key": key, "values": "search"}]})
    engine = SloSearch if params.slo else CapacitySearch
    search = engine(sweep, params, run_fn or default_run_fn(), console, backend, gate)
    result = search.run()
    result.sweep_dir = str(sweep.dir)
    atomic.write_text(sweep.files.capacity_json, result.to_json())
    if report:
        write_report(sweep, capacity=result)
    if console is not None:
        print_capacity(result, console)
    if search.interrupted is not None:
        raise search.interrupted
    return result


def capacity_exit_code(result: CapacityResult) -> int:
    """0 an answer was found (or the maximum was clean), 3 nothing clean, 1 a run failed.
    An SLO search: 0 an answer about the system, 3 the host stopped being faithful first,
    5 inconclusive, 1 a run failed (:func:`wotbench.capacity.slo_search.slo_exit_code`)."""
    if result.outcome is not None:
        return slo_exit_code(result)
    return {"found": 0, "max_clean": 0, "none_clean": 3}.get(result.status, 1)


def print_capacity(result: CapacityResult, console: Any) -> None:
    from rich.table import Table
    t = Table(title=f"Capacity search over {result.key}", title_justify="left")
    slo = result.outcome is not None
    for col in ("#", "phase", result.key, "runs", "result", "R_d devices", "R_d CD", "verdicts"):
        t.add_column(col, justify="right" if col in ("#", "R_d devices", "R_d CD") else "left")
    if slo:
        t.add_column("deciding SLO metric (median, range)")
    fmt = lambda v: cell(v, 3)  # noqa: E731
    for i, s in enumerate(result.steps, 1):
        res = {True: "[red]flagged[/]", False: "[green]clean[/]", None: "[red]failed[/]"}[s.flagged]
        extra = []
        if slo:
            j = s.slo
            res = res if j is None else {"meets": "[green]meets[/]", "misses": "[red]misses[/]",
                                         "unfaithful": "[yellow]unfaithful[/]"}[j.cls]
            extra = [slo_metric_text(j)]
        t.add_row(str(i), s.phase, str(s.value), ", ".join(s.points), res, fmt(s.rd_devices),
                  fmt(s.rd_cd), ", ".join(str(v) for v in s.verdicts), *extra)
    console.print(t)
    if result.outcome is not None:
        o = result.outcome
        style = {"system": "green", "host": "yellow"}.get(o.kind, "red")
        console.print(f"[bold {style}]{o.sentence}[/]", highlight=False)
        for e in o.evidence:
            console.print(f"  evidence: {e}", highlight=False)
        if o.confidence:
            console.print(f"  confidence: {o.confidence}", highlight=False)
        console.print(f"  ({result.runs} runs; {result.sweep_dir})", highlight=False)
        return
    style = "green" if result.status in ("found", "max_clean") else "red"
    console.print(f"[{style}]{result.conclusion}[/]  ({result.runs} runs; {result.sweep_dir})")
