"""The ``contention:`` config block: deliberate host contention episodes (schema only; the
runner launches them as hogs, :mod:`wotbench.runner.during.hogs`).

A test can inject deliberate host contention to check that the contention detector (CD) sees it
(validation) or to study its effect. The config block is a list of episodes, each relative to
the test start (the instant after calibration, ``run.json`` ``test.start_mono_ns``)::

    contention:
      - {kind: cpu, cores: [1], start_s: 10, duration_s: 10, threads: 1}
      - {kind: membw, cores: [1], start_s: 30, duration_s: 5}

- ``kind``: ``cpu`` (spin), ``membw`` (stream over a buffer larger than the LLC) or ``cache``
  (random access within about the LLC size).
- ``cores``: the cores the hog is pinned to; every one must be a usable core of the plan.
- ``start_s`` ≥ 0, ``duration_s`` > 0 (≤ 3600); the episode must end by ``duration_s`` of the test.
- ``threads``: hog threads in total, spread round-robin over ``cores``; default one per core.
- ``bytes``: buffer per thread (membw/cache), default from the host's LLC size (see
  ``wotbench.runner.during.hogs.default_buffer_bytes``).

The runner turns the episodes into hogs (``wotbench.runner.during.hogs.episodes_for_run``), launches
them before the test starts (they sleep until their own start instant) and records them in
run.json ``contention``.

The hog binary (``contention-injector/build/hog``) and its image are described in
``contention-injector/hog.c``; it needs no privileges and stops on its own after ``duration_s``.
"""
from __future__ import annotations

from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from wotbench.errors import ConfigError
from wotbench.schema_errors import problems as schema_problems

MAX_EPISODE_S = 3600.0
MIB = 1024 * 1024
KINDS = ("cpu", "membw", "cache")


class ContentionEpisode(BaseModel):
    """One hog episode of the ``contention:`` config list (times relative to the test start)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["cpu", "membw", "cache"] = Field(
        description="`cpu` (spin), `membw` (stream over a buffer larger than the LLC) or `cache` "
                    "(random access within about the LLC size)")
    cores: list[int] = Field(min_length=1, description="the cores the hog is pinned to; every "
                                                       "one must be a usable core of the plan")
    start_s: float = Field(ge=0, description="start, relative to the test start")
    duration_s: float = Field(gt=0, le=MAX_EPISODE_S,
                              description="the episode must end by the test's `duration_s`")
    threads: int | None = Field(default=None, ge=1, le=256,
                                description="hog threads in total, spread round-robin over "
                                            "`cores`; null: one per core")
    bytes: int | None = Field(default=None, ge=4096, le=4096 * MIB,
                              description="buffer per thread (membw/cache); null: from the host's "
                                          "LLC size")

    @field_validator("cores")
    @classmethod
    def _cores_ok(cls, v: list[int]) -> list[int]:
        if any(c < 0 for c in v):
            raise ValueError("core ids must be >= 0")
        if len(set(v)) != len(v):
            raise ValueError(f"core ids must be distinct, got {v}")
        return v

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def total_threads(self) -> int:
        return self.threads if self.threads is not None else len(self.cores)


def parse_contention(raw: Any, *, key: str = "contention") -> list[ContentionEpisode]:
    """Validate the raw ``contention:`` value (None or a list of mappings).

    Raises :class:`ConfigError` with one ``"contention[i].field: message"`` per problem.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError([f"{key}: must be a list of episodes "
                           "({kind, cores, start_s, duration_s[, threads]}), got {type(raw).__name__}"])
    episodes, problems = [], []
    for i, item in enumerate(raw):
        if isinstance(item, ContentionEpisode):
            episodes.append(item)
            continue
        try:
            episodes.append(ContentionEpisode.model_validate(item))
        except ValidationError as e:
            problems += schema_problems(e, ContentionEpisode, (key, i))
    if problems:
        raise ConfigError(problems)
    return episodes


def check_episodes(episodes: list[ContentionEpisode], *, test_duration_s: float,
                   cores: Iterable[int], key: str = "contention") -> list[str]:
    """Problems (``"contention[i].field: message"``) of episodes against a test and a core list.

    ``cores``: the cores the hogs may use (the plan's ``usable_cores``).
    """
    allowed = sorted(set(int(c) for c in cores))
    problems = []
    for i, ep in enumerate(episodes):
        if ep.end_s > test_duration_s + 1e-9:
            problems.append(f"{key}[{i}]: episode {ep.start_s:g}-{ep.end_s:g} s ends after the test "
                            f"(duration_s {test_duration_s:g}); shorten duration_s or start earlier")
        bad = [c for c in ep.cores if c not in allowed]
        if bad:
            problems.append(f"{key}[{i}].cores: {bad} not among the usable cores {allowed}")
    return problems


def validate_contention(raw: Any, *, test_duration_s: float, cores: Iterable[int] | None = None,
                        key: str = "contention") -> list[ContentionEpisode]:
    """:func:`parse_contention` + :func:`check_episodes`; raises :class:`ConfigError`.

    ``cores=None`` skips the core check (the plan is not known yet when the config is loaded).
    """
    episodes = parse_contention(raw, key=key)
    problems = check_episodes(episodes, test_duration_s=test_duration_s,
                              cores=cores if cores is not None else
                              {c for ep in episodes for c in ep.cores}, key=key)
    if problems:
        raise ConfigError(problems)
    return episodes
