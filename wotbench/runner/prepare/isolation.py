"""``placement.isolate_cores``: keep the host's own work off the run's cores for the run, and
put it back afterwards (a shield in the manner of ``cset shield``, without cpusets).

What runs on a device core besides the devices is the host's: unbound kernel work queues (the
kworkers freeing cgroups, writing back pages), the Docker daemon and containerd, other users'
processes. Measured by hand (docs/FLEET.md): with those moved off the device core, one engine's
timer lateness p99 went from 0.84-2.9 ms to 47-80 µs. As root, before the devices start:

1. the unbound workqueues' cpumask (``/sys/devices/virtual/workqueue/cpumask``) is set to the
   run's OS cores;
2. every task (threads of user processes and unbound kernel threads) allowed on a shielded
   core (the run's cores other than its OS cores: GE and device cores) and elsewhere is
   narrowed to its allowed cores minus the shielded ones (``sched_setaffinity``). Left as they
   are, and counted: per-CPU kernel threads (``PF_NO_SETAFFINITY``), tasks allowed only on
   shielded cores (pinned there on purpose: another run's devices), the harness itself (it pins
   itself), tasks that refuse (a cpuset that excludes the OS cores) or exit meanwhile.

Every original mask goes to a state file (:data:`STATE_FILE`) before anything changes. At the
run's end (every path: the runner's cleanup) each task still on the mask the shield gave it gets
its own back, and so do the tasks born during the run from a moved one (new threads of dockerd,
children of a moved shell) that still carry the narrowed mask: born after the shield was applied
(their starttime against ``applied_at_ticks`` in the state file), descended from the moved one
through tasks also born after it (pid 1 and kthreadd count only as the direct parent). A task
someone else re-pinned meanwhile, or pinned to the OS cores before the run, is left as it is. A harness killed before that leaves the state file: the next run's
start and ``wotbench clean`` restore from it (:func:`restore_stale`).
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from wotbench.deploy.plan import parse_cpuset
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir import atomic
from wotbench.rundir.record import IsolationRecord

KEY = "placement.isolate_cores"
STATE_FILE = Path("/run/wotbench/isolation.json")
WQ_CPUMASK = Path("/sys/devices/virtual/workqueue/cpumask")
PF_NO_SETAFFINITY = 0x04000000    # include/linux/sched.h: per-CPU kernel threads, kworkers
MAX_ANCESTORS = 64

Log = Callable[[str], None]
SetAffinity = Callable[[int, set[int]], None]


@dataclass(frozen=True)
class HostPaths:
    """Where the shield reads and writes (a fake root in the unit tests)."""
    proc: Path = Path("/proc")
    cpumask: Path = WQ_CPUMASK
    state: Path = STATE_FILE


@dataclass(frozen=True)
class Task:
    tid: int
    tgid: int
    ppid: int
    comm: str
    flags: int
    start: int                # starttime (clock ticks since boot): tells a reused tid apart
    cpus: frozenset[int]      # Cpus_allowed_list


def mask_cpus(text: str) -> set[int]:
    """The cores of a kernel cpumask: comma-separated 32-bit hex words, most significant first
    ("3", "ff,ffffffff", "1,0": core 32), as the kernel prints and parses them."""
    cores: set[int] = set()
    for i, word in enumerate(reversed(text.strip().split(","))):
        bits = int(word or "0", 16)
        if bits >> 32:
            raise ValueError(f"cpumask word {word!r} of {text.strip()!r} is wider than 32 bits")
        cores |= {32 * i + c for c in range(32) if bits >> c & 1}
    return cores


def cpus_mask(cpus: Iterable[int]) -> str:
    """A kernel cpumask for ``cpus``: 32-bit words, comma-separated (the kernel's bitmap parser
    rejects a group of more than 8 hex digits: a host with more than 32 CPUs)."""
    bits = sum(1 << c for c in set(cpus))
    words = [(bits >> s) & 0xFFFFFFFF for s in range(0, max(bits.bit_length(), 1), 32)]
    return ",".join([format(words[-1], "x")] + [format(w, "08x") for w in reversed(words[:-1])])


def read_task(proc: Path, tgid: int, tid: int) -> Optional[Task]:
    """One task from /proc (None: gone, or not readable)."""
    d = proc / str(tgid) / "task" / str(tid)
    try:
        stat = (d / "stat").read_text()
        status = (d / "status").read_text()
    except OSError:
        return None
    comm = stat[stat.find("(") + 1:stat.rfind(")")]
    rest = stat[stat.rfind(")") + 2:].split()   # rest[0] is field 3 (state)
    cpus = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                 if line.startswith("Cpus_allowed_list:")), None)
    try:
        return Task(tid=tid, tgid=tgid, ppid=int(rest[1]), comm=comm, flags=int(rest[6]),
                    start=int(rest[19]), cpus=frozenset(parse_cpuset(cpus)) if cpus else
                    frozenset())
    except (IndexError, ValueError):
        return None


def all_tasks(proc: Path) -> Iterator[Task]:
    for p in proc.iterdir():
        if not p.name.isdigit():
            continue
        try:
            tids = [int(t.name) for t in (p / "task").iterdir() if t.name.isdigit()]
        except OSError:
            continue     # exited meanwhile
        for tid in tids:
            t = read_task(proc, int(p.name), tid)
            if t is not None:
                yield t


def why_not(paths: HostPaths = HostPaths(), euid: Optional[int] = None) -> Optional[str]:
    """Why this host cannot isolate the run's cores (None: it can)."""
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        return f"moving other users' tasks and the kernel's workqueues needs root (uid {uid})"
    if not paths.cpumask.is_file():
        return f"this kernel has no {paths.cpumask} (the unbound workqueues' cpumask)"
    if not os.access(paths.cpumask, os.W_OK):
        return f"{paths.cpumask} is not writable here (a read-only sysfs: inside a container?)"
    return None


def refusal(reason: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{KEY}: true keeps the host's tasks and unbound kernel work off the run's GE and device "
        f"cores, but {reason}. Fix: run WoTbench as root on a host with a writable "
        f"{WQ_CPUMASK}, or set {KEY}: false (the verdict then names what ran on those cores)")


def shielded_cores(usable: Iterable[int], os_cores: Iterable[int]) -> set[int]:
    """The run's cores the host's work is moved off: every usable core but the OS cores."""
    os_set = set(os_cores)
    if not os_set:
        raise ConfigError([f"{KEY}: the host's tasks need somewhere to go: set "
                           "placement.reserved_os_cores >= 1 (the OS cores they are moved to)"])
    return set(usable) - os_set


def boot_ticks() -> int:
    """Now, in the unit of /proc/<pid>/stat's starttime: clock ticks since boot (CLOCK_BOOTTIME,
    which counts suspend like the kernel's task start time)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _process_alive(proc: Path, pid: int, start: int) -> bool:
    t = read_task(proc, pid, pid)
    return t is not None and t.start == start


def _own_start(proc: Path, pid: int) -> int:
    t = read_task(proc, pid, pid)
    return t.start if t else 0


@dataclass
class Restored:
    restored: int = 0       # recorded tasks given their own mask back
    inherited: int = 0      # born during the run from a moved task, widened like it
    changed: int = 0        # re-pinned by someone else meanwhile: left
    gone: int = 0           # exited (or the tid now another task)
    failed: int = 0
    cpumask: Optional[str] = None   # the workqueue cpumask now, None: not touched

    def describe(self) -> str:
        return (f"{self.restored} task(s) back on their own cores, {self.inherited} born "
                f"during the run widened like their origin, {self.changed} re-pinned by someone "
                f"else left, {self.gone} gone, {self.failed} failed"
                + (f"; workqueue cpumask {self.cpumask}" if self.cpumask else ""))


def restore_state(state: dict, paths: HostPaths, set_affinity: SetAffinity,
                  log: Log, skip: int = 0) -> Restored:
    """Put back what ``state`` (the state file's content) changed; only where it is still what
    the shield set. ``skip``: a process left alone (the harness, which pins itself)."""
    out = Restored()
    wq = state.get("cpumask")
    if wq:
        try:
            now = paths.cpumask.read_text()
            if mask_cpus(now) == mask_cpus(wq["during"]):
                paths.cpumask.write_text(wq["before"])
                out.cpumask = wq["before"]
            else:
                log(f"{paths.cpumask} is {now.strip()}, not the {wq['during']} the isolation "
                    f"set: someone changed it meanwhile; left (it was {wq['before']})")
        except OSError as e:
            out.failed += 1
            log(f"could not restore {paths.cpumask} to {wq['before']}: {e}")
    saved = {t["tid"]: t for t in state.get("tasks", [])}
    tasks = list(all_tasks(paths.proc))
    parent = {t.tgid: t.ppid for t in tasks if t.tid == t.tgid}
    started = {t.tgid: t.start for t in tasks if t.tid == t.tgid}
    # moved processes still alive as themselves (not a reused pid): their leader's entry
    leaders = {t["tgid"]: t for t in saved.values()
               if t["tid"] == t["tgid"] and started.get(t["tgid"]) == t["start"]}
    seen: set[int] = set()
    applied = state.get("applied_at_ticks")
    if applied is None and state.get("tasks"):
        log(f"{paths.state} has no applied_at_ticks (written by an older WoTbench): only the "
            "moved tasks are restored, not those born during the run")

    def origin_of(t: Task) -> Optional[dict]:
        """The moved process a task born during the run inherited its mask from: the nearest
        moved one up its thread group and parents, all born after the shield was applied (an
        ancestor born before it and not moved ends the walk). pid 1 and kthreadd (2) count only
        as the direct parent: the whole host descends from them."""
        if applied is None or t.start < applied:
            return None          # there before the shield: its mask is its own or another's
        if t.tid != t.tgid:
            if t.tgid in leaders:
                return leaders[t.tgid]          # a thread the moved process started meanwhile
            if started.get(t.tgid, -1) < applied:
                return None
        pid = t.tgid             # a process born after the shield
        for hop in range(MAX_ANCESTORS):
            up = parent.get(pid)
            if up is None or up < 1:
                return None
            if up in leaders:
                return None if up in (1, 2) and hop > 0 else leaders[up]
            if started.get(up, -1) < applied:
                return None      # the nearest ancestor born before the shield was not moved
            pid = up
        return None

    def put_back(tid: int, cpus: list[int]) -> bool:
        try:
            set_affinity(tid, set(cpus))
            return True
        except ProcessLookupError:
            out.gone += 1
        except OSError:
            out.failed += 1
        return False

    for t in tasks:
        if t.tgid == skip:
            continue
        s = saved.get(t.tid)
        if s is not None and s["start"] == t.start:
            seen.add(t.tid)
            if set(t.cpus) != set(s["during"]):
                out.changed += 1
            elif put_back(t.tid, s["before"]):
                out.restored += 1
            continue
        origin = origin_of(t)
        if origin is not None and set(t.cpus) == set(origin["during"]) \
                and put_back(t.tid, origin["before"]):
            out.inherited += 1
    out.gone += len(set(saved) - seen)
    return out


def read_state(paths: HostPaths) -> Optional[dict]:
    try:
        return json.loads(paths.state.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EnvironmentProblem(
            f"{paths.state} (what an isolated run changed on the host) cannot be read ({e}); "
            "restore by hand (the unbound workqueues' cpumask, the host's tasks' affinity) and "
            "remove it") from None


def restore_stale(paths: HostPaths = HostPaths(), log: Log = print,
                  set_affinity: SetAffinity = os.sched_setaffinity,
                  force: bool = False) -> Optional[Restored]:
    """A killed run's isolation (its state file, its harness gone): put back and remove the
    file. A harness still alive holds it: refused (``force``: restored anyway)."""
    state = read_state(paths)
    if state is None:
        return None
    owner, start = state.get("owner_pid", 0), state.get("owner_start", 0)
    if owner != os.getpid() and _process_alive(paths.proc, owner, start) and not force:
        raise EnvironmentProblem(
            f"another WoTbench run (pid {owner}, since {state.get('written_at_utc', '?')}) holds "
            f"the host's core isolation ({paths.state}); two runs cannot shield cores at once. "
            "Wait for it to end, or `wotbench clean --force` to restore the host now")
    done = restore_state(state, paths, set_affinity, log)
    paths.state.unlink(missing_ok=True)
    log(f"restored the core isolation a killed run (pid {owner}) left "
        f"({paths.state}): {done.describe()}")
    return done


class CoreShield:
    """The shield of one run: :meth:`apply` before the devices start, :meth:`restore` in the
    cleanup (idempotent), :meth:`record` for run.json."""

    def __init__(self, log: Log = print, paths: HostPaths = HostPaths(),
                 set_affinity: SetAffinity = os.sched_setaffinity,
                 owner: Optional[int] = None, euid: Optional[int] = None,
                 clock: Callable[[], int] = boot_ticks):
        self.log, self.paths, self.set_affinity, self.clock = log, paths, set_affinity, clock
        self.owner = os.getpid() if owner is None else owner
        self.euid = euid
        self.state: Optional[dict] = None
        self.rec: Optional[IsolationRecord] = None

    def apply(self, os_cores: Iterable[int], shielded: Iterable[int],
              keep: Iterable[str] = ()) -> None:
        """``keep``: command names (the process's comm) whose processes stay where they are
        (``placement.isolate_except``)."""
        reason = why_not(self.paths, self.euid)
        if reason:
            raise refusal(reason)
        restore_stale(self.paths, self.log, self.set_affinity)
        os_set, shield = set(os_cores), set(shielded)
        applied = self.clock()   # before the scan: a task started from now on may inherit
        rec = IsolationRecord(os_cores=sorted(os_set), shielded_cores=sorted(shield))
        moves: list[tuple[Task, set[int]]] = []
        tasks = list(all_tasks(self.paths.proc))
        kept = {t.tgid for t in tasks if t.tid == t.tgid and t.comm in set(keep)}
        for t in tasks:
            if not t.cpus & shield:
                continue
            if t.tgid in kept:
                rec.excepted += 1
            elif t.tgid == self.owner:
                rec.harness += 1
            elif t.flags & PF_NO_SETAFFINITY:
                rec.per_cpu_kthreads += 1
            elif not t.cpus - shield:
                rec.pinned_there += 1
            else:
                moves.append((t, set(t.cpus - shield)))
        before = self.paths.cpumask.read_text().strip()
        self.state = {
            "owner_pid": self.owner, "owner_start": _own_start(self.paths.proc, self.owner),
            "written_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "applied_at_ticks": applied,
            "cpumask": {"before": before, "during": cpus_mask(os_set)},
            "tasks": [{"tid": t.tid, "tgid": t.tgid, "start": t.start, "comm": t.comm,
                       "before": sorted(t.cpus), "during": sorted(new)} for t, new in moves]}
        self.paths.state.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.paths.state, self.state)     # before anything changes
        self.paths.cpumask.write_text(cpus_mask(os_set))
        rec.workqueue_cpumask_before, rec.workqueue_cpumask_during = before, cpus_mask(os_set)
        commands: Counter[str] = Counter()
        moved: set[int] = set()
        for t, new in moves:
            try:
                self.set_affinity(t.tid, new)
            except ProcessLookupError:
                rec.gone += 1
                continue
            except OSError:
                rec.refused += 1
                continue
            moved.add(t.tid)
            commands[t.comm] += 1
        rec.moved = len(moved)
        rec.moved_processes = len({t.tgid for t, _ in moves if t.tid in moved})
        self.state["tasks"] = [s for s in self.state["tasks"] if s["tid"] in moved]
        atomic.write_json(self.paths.state, self.state)     # only what was moved to restore
        rec.moved_by_command = dict(commands.most_common(12))
        self.rec = rec
        self.log(f"{KEY}: cores {','.join(map(str, sorted(shield)))} shielded: workqueue cpumask "
                 f"{before} -> {rec.workqueue_cpumask_during}, {rec.moved} task(s) moved to "
                 f"core(s) {','.join(map(str, sorted(os_set)))} ({rec.refused} refused, "
                 f"{rec.per_cpu_kthreads} per-CPU kernel threads, {rec.pinned_there} tasks "
                 f"pinned there and {rec.excepted} of placement.isolate_except left); restored at the run's end ({self.paths.state})")

    def restore(self) -> None:
        if self.state is None:
            return
        done = restore_state(self.state, self.paths, self.set_affinity, self.log,
                             skip=self.owner)
        self.paths.state.unlink(missing_ok=True)
        self.state = None
        if self.rec is not None:
            self.rec.restored, self.rec.restored_inherited = done.restored, done.inherited
            self.rec.left_changed, self.rec.restore_failed = done.changed, done.failed
        self.log(f"{KEY}: restored: {done.describe()}")

    def record(self) -> Optional[IsolationRecord]:
        return self.rec


def clean_stale(log: Log = print, force: bool = False, paths: HostPaths = HostPaths(),
                set_affinity: SetAffinity = os.sched_setaffinity,
                euid: Optional[int] = None) -> Optional[str]:
    """At a run's start and in ``wotbench clean``: restore what a killed run's isolation left
    (:func:`restore_stale`). Returns why it could not (None: nothing was left, or it is put
    back): the file is root's, or a run still alive holds it."""
    if not paths.state.exists():
        return None
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        return (f"a killed run left the host's cores isolated ({paths.state}: the workqueue "
                "cpumask and tasks' affinity it narrowed); restoring needs root: run "
                "`wotbench clean` as root")
    try:
        restore_stale(paths, log, set_affinity, force=force)
    except EnvironmentProblem as e:
        return str(e)
    return None
