"""The study's scenarios (``cd-module/validation/scenarios.yaml``) as points of resumable sweeps:
each scenario becomes one sweep dir under the study dir (``scenarios/<name>/``) whose points are
its runs: ``repeats`` runs (default 3) with distinct seeds, for a ``vary`` series ``repeats`` runs
per value. The sweep engine runs them in process, and a resumed study re-runs only the points
without a summary.

Scenario keys: ``name``, ``config`` (relative to the manifest), ``expect`` (clean | episodes |
agree | scale), optional ``vary: {key, values}``, ``repeats: N`` and ``antagonist: {kind, core,
start_s, duration_s[, config]}`` (:mod:`wotbench.validation.antagonist`: contention the study
starts itself, outside the run)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from wotbench.configfile.yaml_loader import ConfigFile, read_config_file
from wotbench.errors import ConfigError
from wotbench.rundir.layout import StudyDir, SweepDir
from wotbench.sweep.core import Sweep
from wotbench.validation.antagonist import parse_antagonist

EXPECTS = ("clean", "episodes", "agree", "scale")
DEFAULT_MANIFEST = Path("cd-module/validation/scenarios.yaml")
DEFAULT_REPEATS = 3
MAX_REPEATS = 50
# twin: the clean scenario of the same config whose runs (same seeds) are this one's ground
# truth in the graded study (wotbench.validation.graded)
SCENARIO_KEYS = {"name", "config", "expect", "vary", "repeats", "antagonist", "twin"}


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
        twin = sc.get("twin")
        if twin is not None:
            ref = next((t for t in scs if isinstance(t, dict) and t.get("name") == twin), None)
            if ref is None or ref.get("expect") != "clean" or ref.get("config") != sc["config"] \
                    or ref.get("antagonist") is not None:
                raise ValueError(f"{path}: scenario {sc['name']}: twin {twin!r} must be a clean "
                                 f"scenario of the same config ({sc['config']}) in this manifest")
        unknown = sorted(set(sc) - SCENARIO_KEYS)
        if unknown:
            raise ValueError(f"{path}: scenario {sc['name']}: unknown key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(SCENARIO_KEYS))})")
        reps = sc.get("repeats", DEFAULT_REPEATS)
        if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= MAX_REPEATS:
            raise ValueError(f"{path}: scenario {sc['name']}: repeats must be an integer "
                             f"1..{MAX_REPEATS}, got {reps!r}")
        if sc.get("antagonist") is not None:
            try:
                parse_antagonist(sc["antagonist"])
            except ValueError as e:
                raise ValueError(f"{path}: scenario {sc['name']}: antagonist{e}") from None
            if sc["expect"] not in ("episodes", "agree") or vary is not None:
                raise ValueError(f"{path}: scenario {sc['name']}: an antagonist needs expect: "
                                 f"episodes or agree, and no vary")
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


def repeats(sc: dict) -> int:
    return int(sc.get("repeats", DEFAULT_REPEATS))


def points(sc: dict, base_seed: int = 1) -> list[dict[str, Any]]:
    """``repeats`` points with seeds ``base_seed``, ``base_seed + 1``, ...; for a ``vary`` series
    that many per value (value-major: every repeat of the lightest value first)."""
    seeds = [base_seed + i for i in range(repeats(sc))]
    if sc.get("vary"):
        return [{sc["vary"]["key"]: v, "seed": s} for v in sc["vary"]["values"] for s in seeds]
    return [{"seed": s} for s in seeds]


def _read_config(config: Path, sc: dict) -> ConfigFile:
    """The scenario's config, read once: its seed and duration here, its points' base in the
    sweep; a problem names the scenario too."""
    try:
        return read_config_file(config)
    except ConfigError as e:
        raise ConfigError([f"the config of scenario {sc['name']}: {p}" for p in e.problems],
                          e.source) from None


def scenario_sweep(study_dir: Path, source: Path, sc: dict,
                   seed_base: Optional[int] = None) -> Sweep:
    """The scenario's sweep dir: opened when it exists, else created (every point validated
    first; a bad config raises ConfigError and writes nothing). Config paths are relative to
    the ``source`` manifest. Its runs' seeds are ``seed_base``, ``seed_base + 1``, ... when
    given (``wotbench study --seed-base``: the same seeds in every scenario, so twins still
    pair), else the config's seed and the ones after it."""
    d = StudyDir(study_dir).scenario_dir(sc["name"])
    if SweepDir(d).sweep_json.is_file():
        return Sweep.open(d)
    base = _read_config(source.parent / sc["config"], sc)
    seed, duration = base.config.seed, base.config.duration_s
    if seed_base is not None:
        seed = seed_base
    if sc.get("antagonist") is not None:
        spec = parse_antagonist(sc["antagonist"])
        problem = spec.check(duration, source.parent)
        if problem:
            raise ConfigError([f"{source}: scenario {sc['name']}: antagonist: {problem}"])
    return Sweep.create(base, points(sc, seed), kind="study", directory=d,
                        extra={"scenario": sc})
