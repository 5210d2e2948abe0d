"""Repeats of a sweep's settings (``wotbench sweep --repeats N``): ids, order and configs.

A *setting* is one point of the ``--vary`` / ``--matrix`` grid; each of its repeats is a point
of the sweep dir of its own (own config, own run dir), so a resume picks up single repeats.
Repeat 0 is the setting's own point (``p03``), repeat r ≥ 1 is ``p03-r<r>``: a sweep made
without ``--repeats`` is a sweep with one repeat, and ``--resume DIR --repeats 5`` adds rounds.

Order: interleaved rounds. Round r runs every setting once before round r + 1 starts, so a
drift of the host over the hours a sweep takes (thermal state, a neighbour's job, page cache)
lands on every setting alike instead of on the settings that happened to run last; and the
rounds alternate direction (forward, backward, ...), so a drift linear in time cancels
exactly in the mean of every two rounds instead of tilting the curve. After round 0 the whole
curve exists once, which a sequential order (all repeats of p00, then of p01, ...) only
gives at the very end.

Seeds: repeat r runs with the setting's seed + r (as ``wotbench capacity --repeats`` does), so
the repeats are independent draws of the workload as well as of the host: the interval then
covers "the p95 at this setting", not "the p95 of one particular trace" (a recorded
``trace:`` file is replayed as it is; there the repeats differ by the host alone).
"""
from __future__ import annotations

from typing import Any

from wotbench.config.schema import Config
from wotbench.errors import ConfigError

MAX_REPEATS = 100
ORDER = "interleaved"      # sweep.json "order": rounds, alternating direction


def check_repeats(value: Any, option: str = "--repeats") -> int:
    """The number of repeats, or a :class:`ConfigError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPEATS:
        raise ConfigError([f"{option}: must be a whole number from 1 to {MAX_REPEATS} "
                           f"(runs per setting), got {value!r}"])
    return value


def repeat_id(setting: str, r: int) -> str:
    return setting if r == 0 else f"{setting}-r{r}"


def round_order(settings: list[str], r: int) -> list[str]:
    """The settings in the order round ``r`` runs them: forward in even rounds, backward in odd."""
    return list(settings) if r % 2 == 0 else list(reversed(settings))


def repeat_config(cfg: dict, r: int, name: str) -> dict:
    """The config of repeat ``r`` from its setting's (repeat 0) derived config: seed + r."""
    seed = cfg.get("seed", Config.model_fields["seed"].default)
    return {**cfg, "name": name, "seed": int(seed) + r}
