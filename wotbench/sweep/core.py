"""Series of tests: derived configs, one run dir per point, a resumable ``sweep.json``.

Layout of a sweep dir (``reports/sweep-<name>-<UTC>/``; capacity searches use
``reports/capacity-<name>-<UTC>/`` and the same layout)::

    sweep.json            points, status, run dir per point (schema: wotbench/sweep/README.md)
    base.yaml             the base config as given (copy)
    configs/<id>.yaml     the derived, validated config of each point
    runs/<id>/<name>-<UTC>/   the run dir the runner wrote for the point
    report.html           the series report

(``wotbench.rundir.layout.SweepDir``, ``Sweep.files``: every path of it.) A point is complete when its run dir has ``summary.json``; ``resume`` re-runs only the others.
"""
from __future__ import annotations

import copy
import json
import os
import re
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from pydantic import BaseModel, ValidationError

from wotbench.distributed.answer import host_fault, hosts_text
from wotbench.config.schema import Config
from wotbench.configfile.yaml_loader import ConfigFile, config_from_dict, read_config_file
from wotbench.errors import ConfigError, EnvironmentProblem, WotbenchError
from wotbench.rundir import RunDir, Summary, atomic
from wotbench.rundir.layout import SweepDir
from wotbench.run_result import RunResult
from wotbench.monitor.quiet import QuietGate
from wotbench.stamps import dir_stamp, iso_stamp
from wotbench.schema_errors import problems as schema_problems
from wotbench.sweep.header import READABLE, SCHEMA, SweepHeader
from wotbench.sweep.paths import ALL, expand_pseudo, format_key, key_hint, parse_key, set_path
from wotbench.sweep.repeats import ORDER, check_repeats, repeat_config, repeat_id, round_order

RunFn = Callable[..., RunResult]    # run(config_path, out_root, backend, on_run_dir=) -> RunResult
# The runner turns SIGINT/SIGTERM into a clean stop and returns 128 + the signal: the user
# stopped the series, not just this point.
INTERRUPTED_EXIT_CODES = (130, 143)


class SweepInterrupted(WotbenchError):
    """A point's run was stopped by SIGINT/SIGTERM; exits with the run's code (130/143)."""


def default_run_fn() -> RunFn:
    """The one dispatch (:mod:`wotbench.dispatch`): a point on ``backend: swarm`` is a merged
    run across hosts, any other a single-host run."""
    from wotbench.dispatch import run_config
    return run_config


utc_now = iso_stamp


@dataclass
class Point:
    id: str
    index: int
    overrides: dict[str, Any]
    config: str                           # relative to the sweep dir
    status: str = "pending"               # pending | running | done | failed | interrupted | skipped
    exit_code: Optional[int] = None
    run_dir: Optional[str] = None         # relative to the sweep dir
    verdict: Optional[str] = None         # summary.json verdict.status
    reasons: list[str] = field(default_factory=list)
    started_utc: Optional[str] = None
    finished_utc: Optional[str] = None
    error: Optional[str] = None
    origin: Optional[str] = None          # the --vary arguments / matrix entry it came from
    load: Optional[dict] = None           # 1-min load average before/after (with a quiet gate)
    setting: Optional[str] = None         # the grid point it repeats (its repeat 0's id)
    repeat: int = 0                       # 0 .. repeats - 1 (wotbench/sweep/repeats.py)
    # backend: swarm: the host (node) whose cell made the verdict untrustworthy, and why
    # (wotbench.distributed.answer.HostFault as a dict); None on one host or when all were faithful
    host: Optional[dict] = None

    def __post_init__(self) -> None:
        self.setting = self.setting or self.id


def _attribute(problem: str, keys: dict[str, str], fallback: str) -> str:
    """Prefix a config problem with the --vary argument (or matrix entry) whose key it concerns
    (a ``[*]`` key concerns every index), plus where such keys live when it is a known slip."""
    loc = problem.split(":", 1)[0].strip()
    for key, origin in keys.items():
        k = re.escape(key).replace(r"\[\*\]", r"\[\d+\]")
        if re.fullmatch(k + r"([.\[].*)?", loc) or key.startswith(loc + ".") or key.startswith(loc + "["):
            return f"{origin}: {problem}{key_hint(key)}"
    return f"{fallback}: {problem}"


def _seed_defaults(raw: dict, parts: list) -> dict:
    """A copy of ``raw`` where a mapping on the path of ``parts`` that the config leaves to its
    default (``devices[0].service_time``: exponential, 5 ms) holds that default, so setting one
    of its keys (``devices[0].service_time.mean=20``) changes only that key."""
    out = copy.deepcopy(raw)
    nodes, model = [out], Config
    for i, part in enumerate(parts[:-1]):
        nxt_nodes = []
        for node in nodes:
            if isinstance(part, int) or part == ALL:
                if isinstance(node, list):
                    nxt_nodes += node if part == ALL else node[part:part + 1]
                continue
            if not isinstance(node, dict) or model is None or part not in model.model_fields:
                continue
            f = model.model_fields[part]
            if node.get(part) is None and f.default_factory is not None:
                default = f.default_factory()
                if isinstance(default, BaseModel):
                    node[part] = default.model_dump(mode="json", exclude_none=True)
            nxt_nodes.append(node.get(part))
        nodes = [n for n in nxt_nodes if n is not None]
        if not (isinstance(part, int) or part == ALL):
            model = _submodel(model, part)
    return out


def _submodel(model: Optional[type[BaseModel]], field: str) -> Optional[type[BaseModel]]:
    """The model (or list item model) of ``model.field``, else None."""
    if model is None or field not in model.model_fields:
        return None
    tp = model.model_fields[field].annotation
    for _ in range(3):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        if not args:
            return None
        tp = args[0]
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def derive_config(base_raw: dict, overrides: dict[str, Any], *, base_dir: Path, name: str,
                  origins: Optional[dict[str, str]] = None, label: str = "point") -> dict:
    """The validated config mapping of a point (only the keys set, paths absolute).

    Raises :class:`ConfigError` whose problems name the ``--vary`` argument concerned."""
    origins = origins or {k: f"{label} {k}={v!r}" for k, v in overrides.items()}
    raw = dict(base_raw)
    for key, value in overrides.items():
        try:
            path, value = expand_pseudo(key, value)
            raw = set_path(_seed_defaults(raw, parse_key(path)), path, value)
        except ValueError as e:
            raise ConfigError([f"{origins.get(key, key)}: {e}"]) from None
    raw["name"] = name
    try:
        cfg = config_from_dict(raw, base_dir, source=None)
    except ConfigError as e:
        raise ConfigError([_attribute(p, origins, label) for p in e.problems]) from None
    return cfg.model_dump(mode="json", exclude_unset=True)


def _point_name(base: str, pid: str) -> str:
    base = str(base or "sweep")
    return f"{base[:60 - len(pid) - 1]}-{pid}"


class Sweep:
    """A sweep dir and its ``sweep.json``."""

    def __init__(self, directory: Path, data: dict, base_raw: dict):
        self.dir = Path(directory)
        self.files = SweepDir(self.dir)
        data = dict(data)
        self.points = [Point(**p) for p in data.pop("points", [])]
        try:
            self.header = SweepHeader.model_validate(data)
        except ValidationError as e:
            raise ConfigError([f"{self.files.sweep_json}: {p}"
                               for p in schema_problems(e, SweepHeader)]) from None
        self.base_raw = base_raw              # the base config as written (base.yaml)

    # ------------------------------------------------------------------ creation / loading
    @classmethod
    def create(cls, base_config: str | Path | ConfigFile, points: Iterable[dict[str, Any]], *,
               out_root: str | Path = "reports", kind: str = "sweep", backend: Optional[str] = None,
               origins: Optional[list[dict[str, str]]] = None, extra: Optional[dict] = None,
               directory: Optional[Path] = None, repeats: int = 1) -> "Sweep":
        """Validate every point first (nothing is written when one is bad), then write the dir;
        ``repeats``: runs per point, in interleaved rounds (:mod:`wotbench.sweep.repeats`);
        ``base_config``: a path, or the file its caller already read (read once per sweep)."""
        repeats = check_repeats(repeats)
        base = (base_config if isinstance(base_config, ConfigFile)
                else read_config_file(base_config))   # the base itself must be valid
        base_config, base_text, base_raw = base.path, base.text, base.raw
        name = str(base_raw.get("name", "sweep"))
        points = [dict(p) for p in points]
        directory = Path(directory) if directory else Path(out_root) / f"{kind}-{name}-{dir_stamp()}"
        sweep = cls(directory, {
            "schema": SCHEMA, "kind": kind, "name": name, "created_utc": utc_now(),
            "updated_utc": utc_now(), "base_config": str(base_config.resolve()),
            "base_dir": str(base_config.resolve().parent), "backend": backend, "repeats": 1,
            "order": ORDER, **(extra or {}),
        }, base_raw)
        derived, problems = [], []
        for i, ov in enumerate(points):
            pid = sweep._new_id(i, len(points))
            try:
                derived.append(sweep._derive(pid, ov, (origins or [None] * len(points))[i]))
            except ConfigError as e:
                problems += e.problems
        if problems:
            raise ConfigError(list(dict.fromkeys(problems)), str(base_config))
        sweep._write_base(base_text)
        for i, (ov, cfg) in enumerate(zip(points, derived)):
            sweep._add(sweep._new_id(i, len(points)), ov, cfg, (origins or [None] * len(points))[i])
        sweep.add_repeats(repeats)
        return sweep

    @classmethod
    def open(cls, directory: str | Path) -> "Sweep":
        directory = Path(directory)
        f = SweepDir(directory).sweep_json
        if not f.is_file():
            raise ConfigError([f"{f}: not found (expected a sweep dir written by 'wotbench sweep')"])
        try:
            data = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise ConfigError([f"{f}: not valid JSON ({e})"]) from None
        if data.get("schema") not in READABLE:
            raise ConfigError([f"{f}: schema {data.get('schema')!r}, expected one of {READABLE}"])
        data["schema"] = SCHEMA
        return cls(directory, data, yaml.safe_load(SweepDir(directory).base_yaml.read_text()))

    # ------------------------------------------------------------------ points
    def _new_id(self, index: int, total: int = 0) -> str:
        width = max(2 if self.header.kind == "sweep" else 3, len(str(max(total, 1) - 1)))
        return f"p{index:0{width}d}"

    def _derive(self, pid: str, overrides: dict, origin: Optional[dict[str, str]]) -> dict:
        """The point's config: the base, the sweep's fixed keys (``set``: ``--set``, and a
        capacity search's ``--slo``), then the point's own overrides."""
        fixed = {format_key(parse_key(k)): v for k, v in self.header.set.items()}
        overrides = {format_key(parse_key(k)): v for k, v in overrides.items()}
        origins = {**{k: "--slo" if k == "slo" else f"--set {k}={v!r}" for k, v in fixed.items()},
                   **(origin or {k: f"point {pid} {k}={v!r}" for k, v in overrides.items()})}
        return derive_config(self.base_raw, {**fixed, **overrides},
                             base_dir=Path(self.header.base_dir),
                             name=_point_name(self.header.name, pid), origins=origins,
                             label=f"point {pid}")

    def _write_base(self, text: str) -> None:
        self.files.configs_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_text(self.files.base_yaml, text)

    def _add(self, pid: str, overrides: dict, cfg: dict, origin: Optional[dict[str, str]]) -> Point:
        rel = SweepDir.point_config(pid)
        atomic.write_text(self.dir / rel, yaml.safe_dump(cfg, sort_keys=False))
        p = Point(id=pid, index=len(self.points), overrides=dict(overrides), config=rel,
                  origin="; ".join(dict.fromkeys(origin.values())) if origin else None)
        self.points.append(p)
        return p

    @property
    def repeats(self) -> int:
        return int(self.header.repeats or 1)

    def add_repeats(self, total: int) -> list[Point]:
        """Make it ``total`` runs per setting: the missing rounds, each in its order, with the
        setting's config and seed + r. A resume may add rounds, never remove them."""
        total = check_repeats(total)
        have = self.repeats
        if total < have:
            raise ConfigError([f"--repeats: this sweep already has {have} repeats per setting; "
                               f"a resume can add repeats, not remove them (got {total})"])
        settings = {p.id: p for p in self.points if p.repeat == 0}
        added = []
        for r in range(have, total):
            for sid in round_order(list(settings), r):
                base = settings[sid]
                cfg = yaml.safe_load((self.dir / base.config).read_text())
                pid = repeat_id(sid, r)
                p = self._add(pid, base.overrides,
                              repeat_config(cfg, r, _point_name(self.header.name, pid)), None)
                p.setting, p.repeat, p.origin = sid, r, base.origin
                added.append(p)
        self.header.repeats = total
        self.save()
        return added

    def find(self, overrides: dict[str, Any]) -> Optional[Point]:
        want = {format_key(parse_key(k)): v for k, v in overrides.items()}
        return next((p for p in self.points if p.overrides == want), None)

    def add_point(self, overrides: dict[str, Any]) -> Point:
        """Add a point (capacity search) or return the existing one with the same overrides."""
        found = self.find(overrides)
        if found:
            return found
        pid = self._new_id(len(self.points))
        p = self._add(pid, {format_key(parse_key(k)): v for k, v in overrides.items()},
                      self._derive(pid, overrides, None), None)
        self.save()
        return p

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> dict:
        return {**self.header.to_json(), "points": [asdict(p) for p in self.points]}

    def save(self) -> None:
        self.header.updated_utc = utc_now()
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.files.sweep_json, self.to_json(), default=str)

    def run_dir(self, p: Point) -> Optional[RunDir]:
        return RunDir(self.dir / p.run_dir) if p.run_dir else None

    def summary(self, p: Point) -> Optional[Summary]:
        """The point's summary.json, or None (not run yet, or not a summary of this version)."""
        rd = self.run_dir(p)
        try:
            return rd.read_summary() if rd else None
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ running
    def refresh(self, p: Point) -> bool:
        """Mark ``p`` done when its run dir has summary.json (also after a crash: the run
        directory is recorded the moment the run makes it); True if done."""
        known = self.run_dir(p)
        if known is not None and known.summary_json.is_file():
            return self._record(p, known.path, self.summary(p))
        return False

    def _seen(self, p: Point, run_dir: Path) -> None:
        """The run of ``p`` made its directory: recorded at once (before the test starts)."""
        p.run_dir = os.path.relpath(run_dir, self.dir)
        self.save()

    def _record(self, p: Point, rd: Path, summ: Optional[Summary]) -> bool:
        """``p`` is done: its run directory, verdict and (swarm) the host at fault."""
        p.run_dir = os.path.relpath(rd, self.dir)
        p.status = "done"
        p.verdict = summ.verdict.status if summ else None
        p.reasons = list(summ.verdict.reasons) if summ else []
        fault = host_fault(rd)
        p.host = fault.model_dump() if fault else None
        return True

    def run_point(self, p: Point, run_fn: RunFn, backend: Optional[str] = None,
                  gate: Optional[QuietGate] = None, log=print) -> Point:
        """Run ``p`` unless it is complete; with a ``gate``, only on a quiet host (else the
        point is ``skipped``: a later resume runs it)."""
        if self.refresh(p):
            return p
        if gate is not None:
            why, p.load = gate.before(log)
            if why:
                p.status, p.error, p.finished_utc = "skipped", why, utc_now()
                self.save()
                return p
        out_root = self.files.point_runs(p.id)
        out_root.mkdir(parents=True, exist_ok=True)
        p.status, p.started_utc, p.finished_utc, p.error = "running", utc_now(), None, None
        self.save()
        result: Optional[RunResult] = None
        try:
            result = run_fn(str(self.dir / p.config), str(out_root),
                            backend or self.header.backend,
                            on_run_dir=lambda d: self._seen(p, d))
            p.exit_code = result.exit_code
        except KeyboardInterrupt:
            p.status, p.error, p.finished_utc = "interrupted", "interrupted by the user", utc_now()
            self._unseen(p)
            raise
        except EnvironmentProblem as e:   # the host cannot run tests: the next point would fail too
            p.status, p.error, p.finished_utc = "failed", str(e), utc_now()
            self._unseen(p)
            raise
        except WotbenchError as e:
            p.status, p.error, p.exit_code = "failed", str(e), e.exit_code
        except Exception as e:            # a crash of one point must not lose the series
            p.status, p.error = "failed", f"{type(e).__name__}: {e}"
        p.finished_utc = utc_now()
        if gate is not None:
            gate.after(p.load)
        done = (self._record(p, result.run_dir, result.summary)
                if result is not None and result.run_dir is not None
                and result.summary is not None else self.refresh(p))
        if not done and p.status == "running":
            if p.exit_code in INTERRUPTED_EXIT_CODES:
                p.status, p.error = "interrupted", f"the run was interrupted (exit {p.exit_code})"
                self._unseen(p)
                raise SweepInterrupted(f"{p.id} interrupted; continue with --resume {self.dir}",
                                       p.exit_code)
            p.status = "failed"
            p.error = f"the run exited with {p.exit_code} and wrote no summary.json"
        if not done:
            self._unseen(p)
        self.save()
        return p

    def _unseen(self, p: Point) -> None:
        """``p``'s run ended without a summary: the point names no run directory (as before it
        ran); only a sweep killed during the run leaves the one its run made in sweep.json."""
        p.run_dir = None
        self.save()

    def pending(self) -> list[Point]:
        return [p for p in self.points if not self.refresh(p)]

    def run_all(self, run_fn: Optional[RunFn] = None, *, backend: Optional[str] = None,
                console: Any = None, progress: bool = True,
                gate: Optional[QuietGate] = None) -> list[Point]:
        """Run every incomplete point in order, with a progress bar; returns the points."""
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)
        run_fn = run_fn or default_run_fn()
        console = console or Console(stderr=True)
        todo = self.pending()
        self.save()
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("{task.fields[point]}"), console=console,
                      disable=not progress, transient=False) as bar:
            task = bar.add_task(f"{self.header.kind} {self.header.name}", total=len(self.points),
                                completed=len(self.points) - len(todo), point="")
            for p in todo:
                bar.update(task, point=f"{p.id} {_describe(p.overrides)}")
                self.run_point(p, run_fn, backend, gate, log=console.print)
                bar.advance(task)
                if p.status in ("failed", "skipped"):
                    console.print(f"[red]{p.id} {p.status}:[/] {p.error}")
                elif p.host:   # swarm: name the node whose cell stopped being faithful
                    console.print(f"[yellow]{p.id} {p.verdict}:[/] {hosts_text([p.host])}")
            bar.update(task, point="")
        return self.points


def _describe(overrides: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in overrides.items())
