"""The sweep verbs (``wotbench sweep``): points from ``--vary`` / ``--matrix``, create or resume
a sweep, run it, write its report, and the exit code. Below it: :mod:`.core` (the sweep dir and
its points) and :mod:`.report` (the series report)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from wotbench.configfile.yaml_loader import ConfigFile
from wotbench.errors import ConfigError
from wotbench.monitor.quiet import QuietGate
from wotbench.sweep.core import RunFn, Sweep
from wotbench.sweep.paths import format_key, parse_key, parse_set, parse_vary
from wotbench.sweep.report import write_report


# ---------------------------------------------------------------------- point generation
def cartesian(varies: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """Cartesian product of ``[(key, values), ...]`` in order (last key varies fastest)."""
    points: list[dict[str, Any]] = [{}]
    for key, values in varies:
        points = [{**p, key: v} for p in points for v in values]
    return points


def read_matrix(path: str | Path) -> list[dict[str, Any]]:
    """``points: [{devices[0].count: 5, placement.affinity: shared}, ...]`` from a YAML file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError([f"--matrix {path}: cannot read ({e})"]) from None
    pts = data.get("points") if isinstance(data, dict) else None
    if not isinstance(pts, list) or not pts or not all(isinstance(p, dict) and p for p in pts):
        raise ConfigError([f"--matrix {path}: expected 'points:' with a list of non-empty mappings "
                           "{dotted.key: value}"])
    out = []
    for i, p in enumerate(pts):
        try:
            out.append({format_key(parse_key(str(k))): v for k, v in p.items()})
        except ValueError as e:
            raise ConfigError([f"--matrix {path}: points[{i}]: {e}"]) from None
    return out


def plan_points(vary_args: list[str], matrix: Optional[str | Path] = None
                ) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[dict]]:
    """Points, per-point origins (key -> the argument that set it) and the ``vary`` record.

    With both ``--matrix`` and ``--vary``, every matrix point is crossed with the --vary product.
    """
    varies = [parse_vary(a) for a in vary_args]
    keys = [k for k, _ in varies]
    if len(set(keys)) != len(keys):
        raise ConfigError([f"--vary: key given twice: {sorted({k for k in keys if keys.count(k) > 1})}"])
    vary_origin = {k: f"--vary {a}" for (k, _), a in zip(varies, vary_args)}
    product = cartesian(varies)
    if matrix is None:
        if not varies:
            raise ConfigError(["nothing to vary: give --vary KEY=V1,V2,... or --matrix FILE.yaml"])
        return product, [dict(vary_origin) for _ in product], [{"key": k, "values": v} for k, v in varies]
    mpoints = read_matrix(matrix)
    points, origins = [], []
    for i, mp in enumerate(mpoints):
        for vp in product:
            points.append({**mp, **vp})
            origins.append({**{k: f"--matrix {matrix} points[{i}] {k}" for k in mp}, **vary_origin})
    return points, origins, [{"key": k, "values": v} for k, v in varies]


def create_sweep(config: str | Path | ConfigFile, vary_args: list[str], *, matrix: Optional[str | Path] = None,
                 out_root: str | Path = "reports", backend: Optional[str] = None,
                 set_args: Optional[list[str]] = None, repeats: int = 1) -> Sweep:
    """``set_args``: ``--set KEY=VALUE``, keys every point gets (the what-if); ``repeats``: runs
    per point (:mod:`wotbench.sweep.repeats`)."""
    points, origins, vary = plan_points(vary_args, matrix)
    fixed = parse_set(set_args or [])
    both = sorted(set(fixed) & {k for p in points for k in p})
    if both:
        raise ConfigError([f"--set {k}: also varied; give it with --vary or --set, not both" for k in both])
    return Sweep.create(config, points, out_root=out_root, backend=backend, origins=origins,
                        extra={"vary": vary, "matrix": str(Path(matrix).resolve()) if matrix else None,
                               "set": fixed}, repeats=repeats)


def run_sweep(config: Optional[str | Path | ConfigFile] = None, vary_args: Optional[list[str]] = None, *,
              matrix: Optional[str | Path] = None, resume: Optional[str | Path] = None,
              out_root: str | Path = "reports", backend: Optional[str] = None,
              run_fn: Optional[RunFn] = None, console: Any = None, progress: bool = True,
              report: bool = True, gate: Optional[QuietGate] = None,
              set_args: Optional[list[str]] = None, repeats: Optional[int] = None) -> Sweep:
    """``wotbench sweep``: create (or resume) a sweep, run its points (each on a quiet host when
    a ``gate`` is given), write report.html and the results (``results.json``, ``*.csv``).
    ``repeats``: runs per point; with ``resume``, None keeps the sweep's, more adds rounds."""
    if resume is not None:
        sweep = Sweep.open(resume)
        if repeats is not None:
            sweep.add_repeats(repeats)
    else:
        if config is None:
            raise ConfigError(["sweep: give a CONFIG (or --resume SWEEP_DIR)"])
        sweep = create_sweep(config, vary_args or [], matrix=matrix, out_root=out_root, backend=backend,
                             set_args=set_args, repeats=1 if repeats is None else repeats)
    try:
        sweep.run_all(run_fn, backend=backend, console=console, progress=progress, gate=gate)
    finally:
        if report:
            write_report(sweep)
    return sweep


def sweep_exit_code(sweep: Sweep) -> int:
    """0 all points done and trustworthy, 3 all done but some flagged, 1 a point failed (or was
    skipped: the host never became quiet)."""
    if any(p.status != "done" for p in sweep.points):
        return 1
    return 0 if all(p.verdict == "trustworthy" for p in sweep.points) else 3
