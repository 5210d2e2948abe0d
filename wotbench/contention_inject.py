"""Contention injection: the ``contention:`` config block and the hog episodes a run launches.

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
  :func:`default_buffer_bytes`).

Runner API::

    specs = episodes_for_run(config, plan, test_start_mono_ns)   # list[HogSpec]
    for s in specs:                       # launch all before the test starts; they sleep until
        docker: client.containers.run(**s.container_kwargs())   # their start instant
        process: subprocess.Popen(s.process_argv(hog_path), stdout=PIPE)
    ... at the end: stop (SIGTERM) whatever still runs, save stdout (one JSON line) to
    contention/<s.name>.json, and record [s.record() for s in specs] as run.json "contention".

The hog binary (``contention-injector/build/hog``) and its image are described in
``contention-injector/hog.c``; it needs no privileges and stops on its own after ``duration_s``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError, format_loc
from .runner.containers import NOBODY, ROLE_LABEL, RUN_LABEL

HOG_IMAGE = "wotbench-hog:1"
HOG_IN_IMAGE = "/hog"
HOG_UID = f"{NOBODY}:{NOBODY}"
MAX_EPISODE_S = 3600.0
MIB = 1024 * 1024
KINDS = ("cpu", "membw", "cache")


class ContentionEpisode(BaseModel):
    """One hog episode of the ``contention:`` config list (times relative to the test start)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["cpu", "membw", "cache"]
    cores: list[int] = Field(min_length=1)
    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0, le=MAX_EPISODE_S)
    threads: int | None = Field(default=None, ge=1, le=256)
    bytes: int | None = Field(default=None, ge=4096, le=4096 * MIB)

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
            for err in e.errors():
                problems.append(f"{format_loc((key, i, *err['loc']))}: {err['msg']}")
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


def _llc_bytes(sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    best = None
    try:
        for idx in sysfs.glob("index*"):
            try:
                level = int((idx / "level").read_text())
                typ = (idx / "type").read_text().strip()
                size = (idx / "size").read_text().strip()
            except (OSError, ValueError):
                continue
            if typ == "Instruction":
                continue
            mult = {"K": 1024, "M": MIB, "G": 1024 * MIB}.get(size[-1:], 1)
            n = int(size.rstrip("KMG")) * mult
            if best is None or level > best[0]:
                best = (level, n)
    except OSError:
        return None
    return best[1] if best else None


def default_buffer_bytes(kind: str, llc_bytes: int | None = None) -> int:
    """Per-thread buffer: membw max(64 MiB, 2×LLC) ≤ 512 MiB; cache LLC rounded down to a power
    of two, 1..128 MiB; cpu 0. Same rule as the hog's own default, but computed here so the
    container memory limit can be set exactly."""
    if kind == "cpu":
        return 0
    llc = llc_bytes if llc_bytes is not None else (_llc_bytes() or 8 * MIB)
    if kind == "membw":
        return min(max(64 * MIB, 2 * llc), 512 * MIB)
    p = 1
    while p * 2 <= llc:
        p *= 2
    return min(max(p, MIB), 128 * MIB)


@dataclass
class HogSpec:
    """One hog to launch. ``argv[0]`` is the in-image path ``/hog``."""

    name: str                      # e.g. "hog-0-cpu": container name suffix and output file stem
    kind: str
    cores: list[int]
    threads: int
    buffer_bytes: int
    start_s: float                 # relative to the test start
    duration_s: float
    start_mono_ns: int
    end_mono_ns: int
    argv: list[str]
    image: str = HOG_IMAGE
    memory_limit_bytes: int = 0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def cpuset(self) -> str:
        return ",".join(str(c) for c in self.cores)

    def process_argv(self, hog_path: str | Path) -> list[str]:
        """argv for the process backend: the same arguments with the host binary."""
        return [str(hog_path)] + self.argv[1:]

    def container_kwargs(self, *, name_prefix: str = "wotbench") -> dict[str, Any]:
        """Keyword arguments for docker SDK ``client.containers.run`` (detached, unprivileged)."""
        return {
            "image": self.image, "command": self.argv[1:], "name": f"{name_prefix}-{self.name}",
            "detach": True, "user": HOG_UID, "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "network_mode": "none", "read_only": True,
            "cpuset_cpus": self.cpuset, "mem_limit": self.memory_limit_bytes,
            "labels": dict(self.labels), "stop_signal": "SIGTERM",
        }

    def record(self) -> dict[str, Any]:
        """What to store in run.json ``contention`` (the injected windows, for validation)."""
        return {"name": self.name, "kind": self.kind, "cores": self.cores, "threads": self.threads,
                "buffer_bytes": self.buffer_bytes, "start_s": self.start_s,
                "end_s": self.start_s + self.duration_s, "start_mono_ns": self.start_mono_ns,
                "end_mono_ns": self.end_mono_ns}


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def episodes_for_run(config: Any, plan: Any, test_start_mono_ns: int, *,
                     llc_bytes: int | None = None, image: str = HOG_IMAGE,
                     run_label: str | None = None) -> list[HogSpec]:
    """The hogs a run must launch for its ``contention:`` episodes.

    ``config``: the Config object or its ``model_dump()`` dict (needs ``contention`` and
    ``duration_s``); ``plan``: plan.json dict (or object) with ``usable_cores``;
    ``test_start_mono_ns``: ``run.json`` ``test.start_mono_ns``. Raises :class:`ConfigError` when
    an episode does not fit the test or uses a core outside the plan. Empty list: nothing to do.
    """
    raw = _get(config, "contention")
    if not raw:
        return []
    if not isinstance(raw, list):
        raw = list(raw)
    raw = [ep.model_dump() if isinstance(ep, BaseModel) and not isinstance(ep, ContentionEpisode)
           else ep for ep in raw]
    duration = float(_get(config, "duration_s", 60))
    usable = _get(plan, "usable_cores")
    if usable is None:
        usable = range(int(_get(plan, "cores_total", 0) or 0))
    episodes = validate_contention(raw, test_duration_s=duration, cores=usable)
    name = run_label or str(_get(config, "name", "run"))
    specs = []
    for i, ep in enumerate(episodes):
        buf = ep.bytes if ep.bytes is not None else default_buffer_bytes(ep.kind, llc_bytes)
        start_ns = int(test_start_mono_ns + round(ep.start_s * 1e9))
        hog_name = f"hog-{i}-{ep.kind}"
        argv = [HOG_IN_IMAGE, "--mode", ep.kind, "--seconds", f"{ep.duration_s:g}",
                "--start-at", str(start_ns), "--cpu", ",".join(map(str, ep.cores)),
                "--threads", str(ep.total_threads), "--label", hog_name]
        if buf:
            argv += ["--bytes", str(buf)]
        specs.append(HogSpec(
            name=hog_name, kind=ep.kind, cores=list(ep.cores), threads=ep.total_threads,
            buffer_bytes=buf, start_s=ep.start_s, duration_s=ep.duration_s,
            start_mono_ns=start_ns, end_mono_ns=start_ns + int(round(ep.duration_s * 1e9)),
            argv=argv, image=image,
            memory_limit_bytes=buf * ep.total_threads + 32 * MIB,
            labels={RUN_LABEL: name, ROLE_LABEL: "hog", "wotbench.episode": str(i)},
        ))
    return specs
