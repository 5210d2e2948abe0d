"""Contention the study starts itself, outside WoTbench's run (docs/VALIDATION.md "The study").

A scenario's ``antagonist: {kind, core, start_s, duration_s[, config]}`` wraps the sweep's run
function (:func:`with_antagonist`): a watcher thread waits for the run's test start (the main GE's
``progress.bin`` shows ``sent > 0``), sleeps until ``start_s`` after it and starts

- ``busy-loop``: ``timeout -s KILL D taskset -c CORE sh -c 'while :; do :; done'`` on the host,
  not in Docker. ``timeout`` is the study's child and the ``sh`` its child, so the run's monitor
  sees the ``sh`` as a host process (it treats the harness's own children as the run's);
- ``container-hog``: ``docker run --rm --name study-antagonist-<id> --cpuset-cpus CORE`` of the
  project's hog image (``--mode cpu --seconds D --start-at T``), without WoTbench labels,
  unprivileged, read-only, no network, memory and pids limited; always removed;
- ``second-run``: a second ``wotbench run CONFIG --out-root <study>/second-runs/...`` (bounded by
  ``timeout -s INT D``); its ground truth is read from its run.json afterwards.

The watcher records what it did on CLOCK_MONOTONIC (the clock the run's run.json uses) in
``<run dir>/study-antagonist.json`` (``<out_root>/study-antagonist.json`` when no run dir
appeared): the actual start and end, the process to be named (pid, comm, owner), or why the
antagonist never started. On every path (the run returned, raised, was interrupted) the
antagonist is ended and, for the container, removed. Every wait is bounded.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from pydantic import ConfigDict, Field, model_serializer

from wotbench.deploy.plan import Plan
from wotbench.errors import WotbenchError
from wotbench.labels import PROCESS_ENV, RUN_LABEL
from wotbench.run_result import RunDirSeen, RunResult
from wotbench.rundir import RunDir, atomic
from wotbench.rundir._model import Record
from wotbench.rundir._model import read_record as read_json_record
from wotbench.rundir.layout import SECOND_RUN_LOG, STUDY_ANTAGONIST_JSON
from wotbench.rundir.record import Phases, TestWindow

KINDS = ("busy-loop", "duty-loop", "container-hog", "second-run")
CORE_WORDS = ("device", "ge", "all")
LAUNCHERS = {"timeout", "taskset", "nice", "sh", "env"}   # duty-loop: exec'd through these
RECORD_NAME = STUDY_ANTAGONIST_JSON        # the name the tests and readers know it by
SCHEMA = "wotbench-study-antagonist/1"
CONTAINER_PREFIX = "study-antagonist-"
MAX_DURATION_S = 600.0
BUSY_LOOP = "while :; do :; done"
HOG_MEMORY = "32m"
HOG_PIDS = "8"


# --------------------------------------------------------------------------- the spec

@dataclass(frozen=True)
class AntagonistSpec:
    kind: str
    core: Union[str, int, None]          # "device" | "ge" | a core number; None: second-run
    start_s: float                       # after the run's test start
    duration_s: float                    # busy-loop/container-hog: how long; second-run: bound
    config: Optional[str] = None         # second-run: its config, relative to the manifest
    # duty-loop only: the intensity (docs/VALIDATION.md "The graded study")
    duty: float = 1.0                    # busy share of every period
    workers: int = 1                     # worker processes (one per core of `core: all`)
    nice: int = 0
    pinned: bool = True                  # each worker pinned to one core, or free on the set
    kernel: bool = False                 # system time (/dev/zero reads) instead of user time

    def check(self, test_duration_s: float, manifest_dir: Path) -> Optional[str]:
        """Why the antagonist does not fit the scenario's config, or None."""
        if self.kind == "second-run":
            cfg = manifest_dir / str(self.config)
            if not cfg.is_file():
                return f"config {self.config}: {cfg} not found"
            return None if self.start_s < test_duration_s else (
                f"start_s {self.start_s:g} is not inside the {test_duration_s:g} s test")
        if self.start_s + self.duration_s > test_duration_s:
            return (f"start_s + duration_s = {self.start_s + self.duration_s:g} s ends after the "
                    f"{test_duration_s:g} s test")
        return None


def _number(raw: dict, key: str, *, positive: bool) -> float:
    v = raw.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f".{key}: expected a number of seconds, got {v!r}")
    if (v <= 0 if positive else v < 0) or v > MAX_DURATION_S:
        raise ValueError(f".{key}: must be {'>' if positive else '>='} 0 and <= "
                         f"{MAX_DURATION_S:g}, got {v!r}")
    return float(v)


def parse_antagonist(raw: Any) -> AntagonistSpec:
    """The spec of a manifest's ``antagonist:`` mapping; ValueError whose message starts with
    the key concerned (``.kind: ...``) when it is bad."""
    if not isinstance(raw, dict):
        raise ValueError(f": expected a mapping {{kind, core, start_s, duration_s}}, got {raw!r}")
    known = {"kind", "core", "start_s", "duration_s", "config"} | set(DUTY_KEYS)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f": unknown key(s) {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(sorted(known))})")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ValueError(f".kind: must be {', '.join(KINDS)}, got {kind!r}")
    core = raw.get("core")
    if kind == "second-run":
        if core is not None:
            raise ValueError(".core: a second run places its own components; leave core out")
        if not isinstance(raw.get("config"), str) or not raw["config"]:
            raise ValueError(".config: a second-run needs the config it runs (relative to the "
                             "manifest)")
    else:
        if raw.get("config") is not None:
            raise ValueError(f".config: only a second-run has a config, not a {kind}")
        if not (core in CORE_WORDS or (isinstance(core, int) and not isinstance(core, bool)
                                       and core >= 0)):
            raise ValueError(f".core: must be device, ge, all or a core number >= 0, got {core!r}")
    duty = _duty_keys(raw, kind)
    return AntagonistSpec(kind=kind, core=core, start_s=_number(raw, "start_s", positive=False),
                          duration_s=_number(raw, "duration_s", positive=True),
                          config=raw.get("config"), **duty)


DUTY_KEYS = {"duty": (float, 0.01, 1.0), "workers": (int, 1, 16), "nice": (int, -20, 19),
             "pinned": (bool, None, None), "kernel": (bool, None, None)}


def _duty_keys(raw: dict, kind: str) -> dict[str, Any]:
    """The duty-loop's intensity keys, checked (ValueError naming the key)."""
    out: dict[str, Any] = {}
    for key, (typ, lo, hi) in DUTY_KEYS.items():
        if key not in raw:
            continue
        if kind != "duty-loop":
            raise ValueError(f".{key}: only a duty-loop has {key}, not a {kind}")
        v = raw[key]
        if typ is bool:
            if not isinstance(v, bool):
                raise ValueError(f".{key}: expected true or false, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or \
                (typ is int and not float(v).is_integer()) or not lo <= v <= hi:
            raise ValueError(f".{key}: expected {'an integer' if typ is int else 'a number'} "
                             f"in {lo:g}..{hi:g}, got {v!r}")
        out[key] = typ(v)
    return out


def resolve_cores(core: Union[str, int, None], plan: Plan) -> list[int]:
    """``all``: every usable core of the plan; else the one core of :func:`resolve_core`."""
    if core == "all":
        cores = list(plan.usable_cores)
        if not cores:
            raise ValueError("plan.json has no usable_cores")
        return cores
    return [resolve_core(core, plan)]


def resolve_core(core: Union[str, int, None], plan: Plan) -> int:
    """The core number of ``device`` (the run's first device core), ``ge`` (the first main GE's
    core) or a number (which must be one of the plan's usable cores); ValueError saying why not."""
    if core == "device":
        if not plan.device_cores:
            raise ValueError("plan.json has no device_cores")
        return plan.device_cores[0]
    if core == "ge":
        ges = plan.ge_cores
        if not ges:
            raise ValueError("plan.json has no ge_cores")
        return ges[sorted(ges)[0]]
    usable = plan.usable_cores
    if core not in usable:
        raise ValueError(f"core {core} is not one of the run's usable cores {usable}")
    return int(core)


# --------------------------------------------------------------------------- the record

class AskedRecord(Record):
    """``asked``: the scenario's :class:`AntagonistSpec` as the watcher was given it."""
    kind: str
    core: Union[int, str, None] = None
    start_s: float
    duration_s: float
    config: Optional[str] = None
    duty: float = 1.0                    # the duty-loop's keys: their defaults before them
    workers: int = 1
    nice: int = 0
    pinned: bool = True
    kernel: bool = False


class SecondRunRecord(Record):
    """``second_run``: the second run started (``out_root``, ``argv``), how its process ended
    (``exit_code``: it ended before the stop) and what its run.json says (``run_dir`` ..
    ``error``: once read). Written key by key as the watcher learns them: only those it set."""
    out_root: str
    argv: list[str]
    exit_code: Optional[int] = None
    run_dir: Optional[str] = None
    run_id: Optional[str] = None
    t0_mono_ns: Optional[int] = None
    test: Optional[TestWindow] = None
    phases: Optional[Phases] = None
    interrupted: Optional[bool] = None
    error: Optional[str] = None

    @model_serializer(mode="wrap")
    def _only_set(self, handler):
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class AntagonistRecord(Record):
    """``study-antagonist.json``: what the study started, when (CLOCK_MONOTONIC ns) and what
    the run's evidence should name. Written by :class:`Watcher`, read by :func:`read_record`."""
    kind: str
    asked: AskedRecord                        # the scenario's AntagonistSpec
    schema_: str = Field(SCHEMA, alias="schema")
    started: bool = False
    why_not: Optional[str] = None             # never started: why
    core: Optional[int] = None
    cores: list[int] = []                     # duty-loop: every core it ran on
    cmdline: Optional[str] = None             # duty-loop: what the scan should name it by
    test_start_seen_mono_ns: Optional[int] = None
    start_mono_ns: Optional[int] = None
    end_mono_ns: Optional[int] = None
    ended_by: Optional[str] = None            # "itself" | "stopped" (the run ended first)
    pid: Optional[int] = None                 # the process to be named
    comm: Optional[str] = None
    owner_kind: Optional[str] = None          # what the run's process scan should call it
    owner: Optional[str] = None
    container: Optional[str] = None
    second_run: Optional[SecondRunRecord] = None
    removed: Optional[bool] = None            # container-hog: gone after the run
    notes: list[str] = []

    model_config = ConfigDict(populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def episode_s(self, test_start_ns: Optional[int]) -> Optional[tuple[float, float]]:
        """When it ran, in s after the run's test start (an end not recorded: its start);
        None when it never started or the run has no test start."""
        if not self.started or test_start_ns is None or self.start_mono_ns is None:
            return None
        end = self.end_mono_ns or self.start_mono_ns
        return ((self.start_mono_ns - test_start_ns) / 1e9, (end - test_start_ns) / 1e9)


def read_record(path: Path) -> AntagonistRecord:
    """``study-antagonist.json`` through its model; ValueError naming the file and every bad key."""
    return read_json_record(path, AntagonistRecord)


class NotStarted(Exception):
    """The antagonist cannot start (no test start seen, no plan, a bad core): why."""


# --------------------------------------------------------------------------- helpers

def _clean_env() -> dict[str, str]:
    """The study's environment without the variable that marks a run's own processes."""
    return {k: v for k, v in os.environ.items() if k != PROCESS_ENV}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _comm(pid: int) -> Optional[str]:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _wait_until(ns: int, stop: threading.Event) -> bool:
    """Sleep until CLOCK_MONOTONIC ``ns``; False when ``stop`` was set first."""
    while True:
        left = (ns - time.monotonic_ns()) / 1e9
        if left <= 0:
            return True
        if stop.wait(min(left, 0.2)):
            return False


def _docker(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# --------------------------------------------------------------------------- launchers

class Launcher:
    """One antagonist's life: ``prepare`` before the run, ``start`` at the instant, ``wait``
    until it ends or ``stop`` is set, ``stop`` ends it (idempotent)."""
    lead_ns = 0                       # started this long before the instant (it waits itself)

    def __init__(self, spec: AntagonistSpec, rec: AntagonistRecord, work: Path):
        self.spec, self.rec, self.work = spec, rec, work
        self.proc: Optional[subprocess.Popen] = None

    def prepare(self, log: Callable[[str], None]) -> None:
        pass

    def start(self, at_ns: int, core: Optional[int]) -> None:
        raise NotImplementedError

    def wait(self, stop: threading.Event) -> None:
        while self.proc is not None and self.proc.poll() is None and not stop.wait(0.05):
            pass
        if self.proc is not None and self.proc.poll() is not None and self.rec.ended_by is None:
            self.rec.ended_by = "itself"
            self.rec.end_mono_ns = self.rec.end_mono_ns or time.monotonic_ns()

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            self.rec.ended_by = self.rec.ended_by or "stopped"
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                self.rec.notes.append(f"pid {p.pid} did not exit after SIGKILL")
            if self.rec.started and self.rec.end_mono_ns is None:
                self.rec.end_mono_ns = time.monotonic_ns()


class BusyLoop(Launcher):
    def start(self, at_ns: int, core: Optional[int]) -> None:
        argv = ["timeout", "-s", "KILL", f"{self.spec.duration_s:g}", "taskset", "-c", str(core),
                "sh", "-c", BUSY_LOOP]
        self.rec.start_mono_ns = time.monotonic_ns()
        self.proc = subprocess.Popen(argv, env=_clean_env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.rec.started = True
        self.rec.owner_kind, self.rec.owner = "host", ""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and self.proc.poll() is None:   # timeout -> taskset -> sh
            kids = _children(self.proc.pid)
            if kids and _comm(kids[0]) == "sh":
                self.rec.pid, self.rec.comm = kids[0], "sh"
                return
            time.sleep(0.01)
        self.rec.notes.append("the sh of the busy loop was not found under its timeout "
                              f"(pid {self.proc.pid}) within 3 s")


class DutyLoop(Launcher):
    """``timeout -s KILL D+2 taskset -c CORES nice -n N python -m wotbench.validation.dutyhog``:
    started through launchers on purpose (the scan must name the python it runs, not
    ``taskset``), outside the harness's session."""
    cores: list[int] = []

    def argv(self) -> list[str]:
        s = self.spec
        cores = self.cores or [0]
        hog = [sys.executable, "-m", "wotbench.validation.dutyhog", "--duty", f"{s.duty:g}",
               "--seconds", f"{s.duration_s:g}", "--workers", str(s.workers)]
        if s.pinned:
            hog += ["--cores", ",".join(map(str, cores))]
        if s.kernel:
            hog.append("--kernel")
        return ["timeout", "-s", "KILL", f"{s.duration_s + 2:g}", "taskset", "-c",
                ",".join(map(str, cores)), "nice", "-n", str(s.nice), *hog]

    def start(self, at_ns: int, core: Optional[int]) -> None:
        self.out = (self.work / "duty-loop.out").open("w")
        self.rec.start_mono_ns = time.monotonic_ns()
        self.proc = subprocess.Popen(self.argv(), env=_clean_env(), stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.rec.started = True
        self.rec.cores = list(self.cores)
        self.rec.owner_kind, self.rec.owner = "host", ""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and self.proc.poll() is None:   # after the execs
            kids = _children(self.proc.pid)
            comm = _comm(kids[0]) if kids else None
            if comm and comm not in LAUNCHERS:
                self.rec.pid, self.rec.comm = kids[0], comm
                try:
                    raw = Path(f"/proc/{kids[0]}/cmdline").read_bytes()
                    self.rec.cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    pass
                return
            time.sleep(0.01)
        self.rec.notes.append("the duty loop's program was not found under its timeout "
                              f"(pid {self.proc.pid}) within 3 s")

    def stop(self) -> None:
        super().stop()
        if getattr(self, "out", None) is not None and not self.out.closed:
            self.out.close()


class ContainerHog(Launcher):
    lead_ns = 2_000_000_000           # docker run is started 2 s early; the hog waits (--start-at)

    def __init__(self, spec, rec, work):
        super().__init__(spec, rec, work)
        self.image: Optional[str] = None
        self.name = CONTAINER_PREFIX + f"{os.getpid()}-{time.monotonic_ns() % 10**9}"

    def prepare(self, log: Callable[[str], None]) -> None:
        import docker
        from wotbench.runner.backends.docker.images import ensure_image
        from wotbench.runner.prepare.binaries import HOG, ensure_binary
        self.image = ensure_image(docker.from_env(timeout=60), "hog", ensure_binary(HOG, log), log)

    def start(self, at_ns: int, core: Optional[int]) -> None:
        if self.image is None:
            raise NotStarted("the hog image was not prepared")
        self.rec.container = self.name
        argv = ["docker", "run", "--rm", "--name", self.name, "--cpuset-cpus", str(core),
                "--user", "65534:65534", "--read-only", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--network", "none",
                "--memory", HOG_MEMORY, "--pids-limit", HOG_PIDS, self.image,
                "--mode", "cpu", "--seconds", f"{self.spec.duration_s:g}", "--start-at", str(at_ns),
                "--cpu", str(core), "--threads", "1", "--label", self.name]
        self.out = (self.work / f"{self.name}.out").open("w")
        self.proc = subprocess.Popen(argv, env=_clean_env(), stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.rec.started = True
        self.rec.owner_kind, self.rec.owner, self.rec.comm = "container", self.name, "hog"
        deadline = time.monotonic() + 15
        seen = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            r = _docker(["inspect", "-f", "{{.State.Pid}}", self.name], timeout=10)
            pid = int(r.stdout.strip() or 0) if r.returncode == 0 and r.stdout.strip().isdigit() else 0
            if pid > 0:
                self.rec.pid, seen = pid, time.monotonic_ns()
                break
            time.sleep(0.1)
        if seen is None:
            self.rec.notes.append(f"container {self.name}: no pid within 15 s")
        # the hog waits for --start-at; a container that came up late started it at once
        self.rec.start_mono_ns = max(at_ns, seen or time.monotonic_ns())
        if self.rec.start_mono_ns > at_ns + 50_000_000:
            self.rec.notes.append(f"the container came up {(self.rec.start_mono_ns - at_ns) / 1e9:.2f} s "
                                  "after the intended start")

    def wait(self, stop: threading.Event) -> None:
        super().wait(stop)
        if self.rec.ended_by == "itself":
            try:   # the hog's own account: {"started": true, "ran_s": ...}
                last = (self.work / f"{self.name}.out").read_text().strip().splitlines()[-1]
                ran = json.loads(last)
                if ran.get("started") and self.rec.start_mono_ns:
                    self.rec.end_mono_ns = self.rec.start_mono_ns + int(float(ran["ran_s"]) * 1e9)
            except (OSError, ValueError, IndexError, KeyError, TypeError):
                self.rec.notes.append("the hog's closing line was not read; end = when "
                                      "docker run returned")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.rec.ended_by = self.rec.ended_by or "stopped"
            if self.rec.end_mono_ns is None:
                self.rec.end_mono_ns = time.monotonic_ns()
        self.remove()
        super().stop()
        if getattr(self, "out", None) is not None:
            self.out.close()

    def remove(self) -> None:
        """``docker rm -f`` the container (it may be gone already: --rm)."""
        if self.rec.container is None:
            return
        try:
            _docker(["rm", "-f", self.name], timeout=30)
            r = _docker(["ps", "-a", "-q", "--filter", f"name=^/{self.name}$"], timeout=30)
            self.rec.removed = r.returncode == 0 and not r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            self.rec.removed = False
            self.rec.notes.append(f"docker rm -f {self.name} failed: {e}")


def wotbench_argv() -> list[str]:
    exe = Path(sys.executable).parent / "wotbench"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "wotbench.cli"]


class SecondRun(Launcher):
    STOP_WAIT_S = 60.0

    def __init__(self, spec, rec, work, config: Path, out_root: Path):
        super().__init__(spec, rec, work)
        self.config, self.out_root = config, out_root
        self._read = False

    def start(self, at_ns: int, core: Optional[int]) -> None:
        self.out_root.mkdir(parents=True, exist_ok=True)
        argv = ["timeout", "-s", "INT", "-k", "30", f"{self.spec.duration_s:g}",
                *wotbench_argv(), "run", str(self.config), "--out-root", str(self.out_root)]
        self.log = (self.out_root / SECOND_RUN_LOG).open("w")
        self.rec.start_mono_ns = time.monotonic_ns()
        self.proc = subprocess.Popen(argv, env=_clean_env(), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.rec.started = True
        self.rec.owner_kind = "wotbench"
        self.rec.second_run = SecondRunRecord(out_root=str(self.out_root), argv=argv)

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            self.rec.ended_by = self.rec.ended_by or "stopped"
            try:      # timeout passes SIGINT on: the run stops cleanly and writes run.json
                os.kill(p.pid, signal.SIGINT)
                p.wait(self.STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.rec.notes.append("the second run did not stop within "
                                      f"{self.STOP_WAIT_S:g} s of SIGINT; killed")
        super().stop()
        if p is None or self._read:
            return
        self._read = True
        if p.poll() is not None:
            self.rec.second_run.exit_code = p.returncode
            self.rec.end_mono_ns = self.rec.end_mono_ns or time.monotonic_ns()
        self._read_run()
        self.log.close()

    def _read_run(self) -> None:
        runs = [d for d in self.out_root.iterdir() if RunDir(d).run_json.is_file()] \
            if self.out_root.is_dir() else []
        if not runs:
            self.rec.notes.append(f"the second run wrote no run.json under {self.out_root}")
            return
        d = max(runs, key=lambda d: d.stat().st_mtime)
        rd = RunDir(d)
        try:
            run = rd.read_run()
        except (OSError, ValueError) as e:
            self.rec.notes.append(f"{rd.run_json}: unreadable ({e})")
            return
        self.rec.owner = run.run_id or d.name
        sr = self.rec.second_run
        sr.run_dir, sr.run_id, sr.t0_mono_ns = str(d), self.rec.owner, run.t0_mono_ns
        sr.test, sr.phases, sr.interrupted, sr.error = run.test, run.phases, run.interrupted, run.error
        self._leftovers()

    def _leftovers(self) -> None:
        """Containers of the second run still there (it was killed): removed by its label."""
        try:
            r = _docker(["ps", "-a", "-q", "--filter", f"label={RUN_LABEL}={self.rec.owner}"])
            ids = r.stdout.split()
            if ids:
                _docker(["rm", "-f", *ids], timeout=60)
                self.rec.notes.append(f"removed {len(ids)} container(s) the second run left")
        except (OSError, subprocess.TimeoutExpired) as e:
            self.rec.notes.append(f"checking the second run's containers failed: {e}")


# --------------------------------------------------------------------------- the watcher

def _read_progress_sent(path: Path) -> int:
    from wotbench.runner.during.progress import read_progress
    p = read_progress(path)
    return int(p["sent"]) if p else 0


class Watcher:
    """Waits for the run's test start and runs the antagonist (thread); the run's directory is
    the one the run announces (:meth:`seen`, the sweep's ``on_run_dir``)."""

    def __init__(self, spec: AntagonistSpec, out_root: Path, *, manifest_dir: Path,
                 second_root: Path, log: Callable[[str], None] = print,
                 wait_test_s: float = 300.0, poll_s: float = 0.05,
                 launcher: Optional[Launcher] = None):
        self.spec, self.out_root, self.log = spec, Path(out_root), log
        self.wait_test_s, self.poll_s = wait_test_s, poll_s
        self.rec = AntagonistRecord(kind=spec.kind, asked=AskedRecord(**asdict(spec)))
        self.stop_event = threading.Event()
        self.run_dir: Optional[Path] = None
        self.announced: Optional[Path] = None    # the run's directory, told by the run
        if launcher is not None:
            self.launcher = launcher
        elif spec.kind == "busy-loop":
            self.launcher = BusyLoop(spec, self.rec, self.out_root)
        elif spec.kind == "duty-loop":
            self.launcher = DutyLoop(spec, self.rec, self.out_root)
        elif spec.kind == "container-hog":
            self.launcher = ContainerHog(spec, self.rec, self.out_root)
        else:
            self.launcher = SecondRun(spec, self.rec, self.out_root,
                                      manifest_dir / str(spec.config),
                                      second_root / self.out_root.name)
        self.launcher.rec = self.rec
        self.thread = threading.Thread(target=self._run, name="study-antagonist", daemon=True)

    def start(self) -> None:
        self.launcher.prepare(self.log)
        self.thread.start()

    def seen(self, run_dir: Path) -> None:
        """The run made its directory (before its test starts)."""
        self.announced = Path(run_dir)

    # ---------------------------------------------------------------- waiting
    def _wait_run_dir(self, deadline: float) -> Path:
        while time.monotonic() < deadline:
            d = self.announced
            if d is not None and RunDir(d).plan_json.is_file():
                return d
            if self.stop_event.wait(self.poll_s):
                raise NotStarted("the run ended before its run directory appeared")
        raise NotStarted(f"no run directory with plan.json under {self.out_root} within "
                         f"{self.wait_test_s:g} s")

    def _wait_test_start(self, rd: Path, ge: str, deadline: float) -> int:
        from wotbench.rundir import RunDir
        progress = RunDir(rd).ge_progress(ge)
        while time.monotonic() < deadline:
            if _read_progress_sent(progress) > 0:
                return time.monotonic_ns()
            if self.stop_event.wait(self.poll_s):
                raise NotStarted(f"the run ended before its test started ({progress} never "
                                 "showed a request sent)")
        raise NotStarted(f"the test start was not seen within {self.wait_test_s:g} s "
                         f"({progress} never showed a request sent)")

    def _run(self) -> None:
        deadline = time.monotonic() + self.wait_test_s
        try:
            rd = self._wait_run_dir(deadline)
            self.run_dir = rd
            try:
                plan = Plan.model_validate_json(RunDir(rd).plan_json.read_text())
            except (OSError, ValueError) as e:   # (pydantic's ValidationError is a ValueError)
                raise NotStarted(f"{RunDir(rd).plan_json}: unreadable ({e})") from None
            ges = sorted(plan.ge_cores)
            if not ges:
                raise NotStarted(f"{RunDir(rd).plan_json}: no gateway emulator (ge_cores)")
            core = None
            if self.spec.kind != "second-run":
                try:
                    cores = resolve_cores(self.spec.core, plan)
                    core = cores[0]
                    if isinstance(self.launcher, DutyLoop):
                        self.launcher.cores = cores
                    elif len(cores) > 1:
                        raise ValueError(f"a {self.spec.kind} runs on one core, not all")
                except ValueError as e:
                    raise NotStarted(f"antagonist.core {self.spec.core!r}: {e}") from None
            self.rec.core = core
            seen = self._wait_test_start(rd, ges[0], deadline)
            self.rec.test_start_seen_mono_ns = seen
            at = seen + int(self.spec.start_s * 1e9)
            if not _wait_until(at - self.launcher.lead_ns, self.stop_event):
                raise NotStarted("the run ended before start_s")
            self.launcher.start(at, core)
            self.log(f"antagonist {self.spec.kind} started"
                     + (f" on core {core}" if core is not None else "")
                     + (f" (pid {self.rec.pid} {self.rec.comm})" if self.rec.pid else ""))
            self.launcher.wait(self.stop_event)
        except NotStarted as e:
            self.rec.why_not = str(e)
        except Exception as e:  # noqa: BLE001 - recorded; the run itself goes on
            self.rec.why_not = self.rec.why_not or f"{type(e).__name__}: {e}"
            self.rec.notes.append(f"watcher failed: {type(e).__name__}: {e}")
        finally:
            self.launcher.stop()

    # ---------------------------------------------------------------- the end
    def stop(self, grace_s: float = 0.0) -> AntagonistRecord:
        """End the antagonist (after up to ``grace_s`` for it to end itself), join the watcher
        and write the record; safe to call more than once."""
        alive = self.thread.ident is not None
        if alive and grace_s > 0 and self.rec.started:
            self.thread.join(grace_s)
        self.stop_event.set()
        if alive and self.thread.is_alive():
            self.thread.join(SecondRun.STOP_WAIT_S + 45)
        if alive and self.thread.is_alive():       # stuck: end it from here
            self.rec.notes.append("the watcher did not finish; the antagonist was ended by the study")
        self.launcher.stop()
        if not self.rec.started and self.rec.why_not is None:
            self.rec.why_not = "the run ended before the antagonist started"
        if self.run_dir is None:   # a run faster than the watcher
            self.run_dir = self.announced
        where = (self.run_dir or self.out_root) / RECORD_NAME
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(where, self.rec.to_json(), indent=1)
        except (OSError, WotbenchError) as e:
            self.log(f"cannot write {where}: {e}")
        return self.rec


def with_antagonist(run_fn: Callable[..., RunResult], spec: AntagonistSpec, *,
                    manifest_dir: Path, second_root: Path, log: Callable[[str], None] = print,
                    wait_test_s: float = 300.0,
                    grace_s: float = 60.0) -> Callable[..., RunResult]:
    """The sweep's run function with the antagonist around each run (see the module)."""
    def run(config_path: str, out_root: str, backend: Optional[str] = None,
            on_run_dir: Optional[RunDirSeen] = None) -> RunResult:
        w = Watcher(spec, Path(out_root), manifest_dir=manifest_dir, second_root=second_root,
                    log=log, wait_test_s=wait_test_s)

        def seen(run_dir: Path) -> None:   # the watcher, and whoever asked for the run
            w.seen(run_dir)
            if on_run_dir is not None:
                on_run_dir(run_dir)
        ok = False
        try:
            w.start()
            result = run_fn(config_path, out_root, backend, on_run_dir=seen)
            ok = True
            return result
        finally:
            w.stop(grace_s if ok else 0.0)
    return run
