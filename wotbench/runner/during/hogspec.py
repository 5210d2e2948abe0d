"""The hogs a run launches for its ``contention:`` episodes (:mod:`wotbench.config.hog_episodes`): one
:class:`HogSpec` per episode, with the hog's argv and resource limits. Pure data; the backend
launches them (``RunBackend.launch_hog``), :mod:`wotbench.runner.during.hogs` runs the episode life cycle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from wotbench.config.hog_episodes import MIB, ContentionEpisode, validate_contention
from wotbench.rundir import EpisodeRecord
from wotbench.labels import ROLE_LABEL, RUN_LABEL

HOG_IN_IMAGE = "/hog"


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
    memory_limit_bytes: int = 0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def cpuset(self) -> str:
        return ",".join(str(c) for c in self.cores)

    def record(self) -> EpisodeRecord:
        """run.json ``contention[]``: the injected window, for the report and the validation."""
        return EpisodeRecord(name=self.name, kind=self.kind, cores=self.cores,
                             threads=self.threads, buffer_bytes=self.buffer_bytes,
                             start_s=self.start_s, end_s=self.start_s + self.duration_s,
                             start_mono_ns=self.start_mono_ns, end_mono_ns=self.end_mono_ns)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def episodes_for_run(config: Any, plan: Any, test_start_mono_ns: int, *,
                     llc_bytes: int | None = None, run_label: str | None = None) -> list[HogSpec]:
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
            argv=argv,
            memory_limit_bytes=buf * ep.total_threads + 32 * MIB,
            labels={RUN_LABEL: name, ROLE_LABEL: "hog", "wotbench.episode": str(i)},
        ))
    return specs
