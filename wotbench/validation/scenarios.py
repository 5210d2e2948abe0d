"""The study's scenarios (``configs/validation/scenarios.yaml``) as points of resumable sweeps:
each scenario becomes one sweep dir under the study dir (``scenarios/<name>/``) whose points are
its runs: a single point without overrides, or the values of its ``vary`` key. The sweep engine
runs them in process, and a resumed study re-runs only the points without a summary."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from wotbench.errors import ConfigError
from wotbench.sweep.core import Sweep

EXPECTS = ("clean", "episodes", "agree", "scale")
DEFAULT_MANIFEST = Path("configs/validation/scenarios.yaml")


def read_manifest(path: Path) -> list[dict]:
    """The scenarios of a manifest; ValueError naming the file (and the scenario) when bad."""
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})".replace("\n", " ")) from None
    scs = data.get("scenarios") if isinstance(data, dict) else None
    if not isinstance(scs, list) or not scs:
        raise ValueError(f"{path}: expected 'scenarios:' with a list of {{name, config, expect}}")
    for sc in scs:
        if not isinstance(sc, dict):
            raise ValueError(f"{path}: scenario {sc!r} is not a mapping {{name, config, expect}}")
        for k in ("name", "config", "expect"):
            if k not in sc:
                raise ValueError(f"{path}: scenario {sc!r} lacks {k!r}")
        if sc["expect"] not in EXPECTS:
            raise ValueError(f"{path}: scenario {sc['name']}: expect must be "
                             f"clean|episodes|agree|scale, got {sc['expect']!r}")
        if sc["expect"] == "scale" and not sc.get("vary"):
            raise ValueError(f"{path}: scenario {sc['name']}: expect scale needs vary")
        vary = sc.get("vary")
        if vary is not None and not (isinstance(vary, dict) and isinstance(vary.get("key"), str)
                                     and isinstance(vary.get("values"), list) and vary["values"]):
            raise ValueError(f"{path}: scenario {sc['name']}: vary must be {{key: KEY, values: [V1, ...]}}")
    names = [sc["name"] for sc in scs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{path}: scenario name given twice: {', '.join(map(str, twice))}")
    return scs


def select(manifest: Path, only: Optional[list[str]]) -> list[dict]:
    """The manifest's scenarios (only those named in ``only``); ConfigError when bad."""
    try:
        scenarios = read_manifest(manifest)
    except ValueError as e:
        raise ConfigError([str(e)]) from None
    if only:
        unknown = sorted(set(only) - {sc["name"] for sc in scenarios})
        if unknown:
            raise ConfigError([f"--only: no scenario named {', '.join(unknown)} in {manifest}"])
        scenarios = [sc for sc in scenarios if sc["name"] in only]
    return scenarios


def points(sc: dict) -> list[dict[str, Any]]:
    """One point without overrides, or the ``vary`` values of a series."""
    if sc.get("vary"):
        return [{sc["vary"]["key"]: v} for v in sc["vary"]["values"]]
    return [{}]


def scenario_sweep(study_dir: Path, source: Path, sc: dict) -> Sweep:
    """The scenario's sweep dir: opened when it exists, else created (every point validated
    first; a bad config raises ConfigError and writes nothing). Config paths are relative to
    the ``source`` manifest."""
    d = study_dir / "scenarios" / sc["name"]
    if (d / "sweep.json").is_file():
        return Sweep.open(d)
    return Sweep.create(source.parent / sc["config"], points(sc), kind="study", directory=d,
                        extra={"scenario": sc})
