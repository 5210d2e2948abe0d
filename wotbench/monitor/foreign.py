"""Who else uses the run's cores: the process scan that names the antagonist (docs/VALIDATION.md
"Naming the antagonist").

Every monitor interval, every process of the host that is not the run's own is read once
(``/proc/<pid>/stat`` on a descriptor kept open while the process lives): its CPU time since the
previous scan (utime + stime, USER_HZ ticks), and the core it ran on (its only allowed core, else
the core its threads last ran on). A row is written to ``monitor/foreign.csv`` for each process
that used CPU on one of the watched cores in that interval::

    mono_ns,interval_ns,pid,comm,owner_kind,owner,core,cpu_ns,cmdline

``comm`` and ``cmdline`` are the process's as it is at the scan (both re-read for every row
written): a program started through ``taskset``, ``nice`` or ``timeout`` execs into what it runs,
and is named by that, with its command line (``cmdline``, at most 200 characters); a process
whose command changed is classified again.

``owner_kind`` says what the process is, found once per pid from its cgroup and environment:

- ``injected``  a hog this run started itself (``contention:`` episodes);
- ``wotbench``  a component of another WoTbench run (``owner`` = that run's id), found by the
  ``wotbench.run`` label of its container or the ``WOTBENCH_RUN`` variable of a process;
- ``container`` a container WoTbench did not start (``owner`` = its name);
- ``runtime``   the container runtime (dockerd, containerd, shims, runc);
- ``host``      any other process (``owner`` empty).

The run's own components, the harness, its threads, the processes it started in its own session
(at any depth) and its direct children, and the processes that started the harness (a sweep, a
study) are not written: their CPU is accounted per component in ``monitor/cgroups.csv`` or is the
harness's. A process the harness started in a new session of its own (the study's antagonists,
``start_new_session``) is classified by what it is, at the depth below the direct child. A
``wotbench`` program that is not this run's is another WoTbench harness (``wotbench``, owner
empty when its run is unknown). Cost: one ``pread`` per foreign process and interval,
about 4-6 ms of CPU per scan with ~200 host processes (measured: docs/VALIDATION.md).
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Optional

from wotbench.labels import PROCESS_ENV, ROLE_LABEL, RUN_LABEL
from wotbench.monitor.host_counters import TICK_NS

FOREIGN_COLUMNS = ["mono_ns", "interval_ns", "pid", "comm", "owner_kind", "owner", "core", "cpu_ns",
                   "cmdline"]
CMDLINE_MAX = 200
MAX_DEPTH = 32            # the parent chain walked to find the harness
RUNTIME_COMMS = {"dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc",
                 "docker-proxy", "docker-init"}
HOG_COMM = "hog"
# under dockerd's cgroup (docker/<id>, docker-<id>.scope) or at the top (:/<id>, the GEs)
_CONTAINER_ID = re.compile(r"(?:docker[/-]|:/)([0-9a-f]{64})")
# what the monitor gets to tell a container WoTbench did not start from another run's
ContainerLookup = Callable[[str], Optional[tuple[str, dict[str, str]]]]


@dataclass
class _Proc:
    fd: Optional[int]
    comm: str
    kind: Optional[str]       # None: the run's own (never written)
    owner: str
    allowed: Optional[frozenset[int]]
    cpu_ticks: int
    cmdline: str = ""


def parse_stat(text: str) -> tuple[str, list[str]]:
    """(comm, the fields after it: index 0 is field 3 ``state``) of a /proc/<pid>/stat line;
    comm may hold spaces and parentheses, so it ends at the last ')'."""
    i, j = text.index("("), text.rindex(")")
    return text[i + 1:j], text[j + 2:].split()


def parse_cpu_list(text: str) -> frozenset[int]:
    """``0-2,5`` -> {0, 1, 2, 5}."""
    out = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return frozenset(out)


def read_cmdline(pid: int) -> str:
    """``/proc/<pid>/cmdline`` as one line (arguments joined by spaces), at most CMDLINE_MAX."""
    raw = _read(f"/proc/{pid}/cmdline", 4096) or ""
    return " ".join(a for a in raw.split("\0") if a)[:CMDLINE_MAX]


HARNESS_MODULES = {"wotbench", "wotbench.cli"}


def is_wotbench(comm: str, cmdline: str) -> bool:
    """A WoTbench harness: the ``wotbench`` program or ``python -m wotbench[.cli]`` — not any
    program of the package (the study's ``-m wotbench.validation.dutyhog`` is an antagonist)."""
    args = cmdline.split()
    head = [os.path.basename(a) for a in args[:2]]
    return comm == "wotbench" or "wotbench" in head or any(
        a == "-m" and i + 1 < len(args) and args[i + 1] in HARNESS_MODULES
        for i, a in enumerate(args[:3]))


def _stat_of(pid: int) -> Optional[tuple[str, list[str]]]:
    text = _read(f"/proc/{pid}/stat", 4096)
    try:
        return parse_stat(text) if text else None
    except ValueError:
        return None


def _read(path: str, size: int = 65536) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read(size).decode(errors="replace")
    except OSError:
        return None


class ForeignScan:
    """``own_pids``/``own_containers``: the run's own processes and container ids (the monitor's
    watched components); ``run_id``: this run's; ``lookup``: container id -> (name, labels), or
    None when Docker is not reachable; ``cores``: the cores whose foreign use is written."""

    def __init__(self, run_id: str, cores: set[int], lookup: Optional[ContainerLookup] = None):
        self.run_id = run_id
        self.cores = cores
        self.lookup = lookup
        self.harness = os.getpid()
        own = _stat_of(self.harness)
        self.harness_sid = int(own[1][3]) if own else None
        self.ancestors = self._ancestors()
        self.own_pids: set[int] = set()
        self.own_containers: set[str] = set()
        self.procs: dict[int, _Proc] = {}
        self.last_ns: Optional[int] = None
        self._containers: dict[str, Optional[tuple[str, dict[str, str]]]] = {}
        # process start times count from boot; CLOCK_MONOTONIC stops during suspend
        self._boot_to_mono = (time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                              - time.clock_gettime_ns(time.CLOCK_BOOTTIME))

    # ------------------------------------------------------------------ classification
    def _container(self, cid: str) -> Optional[tuple[str, dict[str, str]]]:
        if cid not in self._containers:
            try:
                self._containers[cid] = self.lookup(cid) if self.lookup else None
            except Exception:   # the daemon may be gone: the process stays a plain container
                self._containers[cid] = None
        return self._containers[cid]

    def _ancestors(self) -> set[int]:
        """The processes that started the harness (a sweep, a study, make), up to init."""
        out, pid = set(), self.harness
        for _ in range(MAX_DEPTH):
            st = _stat_of(pid)
            if st is None:
                break
            pid = int(st[1][1])
            if pid <= 1:
                break
            out.add(pid)
        return out

    def _harness_started(self, pid: int, ppid: int) -> bool:
        """The harness started it: its direct child, or a descendant in the harness's session
        (a descendant in a session of its own is something the harness launched to be
        judged, like the study's antagonists)."""
        if ppid == self.harness:
            return True
        for _ in range(MAX_DEPTH):
            st = _stat_of(pid)
            if st is None or self.harness_sid is None or int(st[1][3]) != self.harness_sid:
                return False
            pid = int(st[1][1])
            if pid == self.harness:
                return True
            if pid <= 1:
                return False
        return False

    def classify(self, pid: int, comm: str, ppid: int, cmdline: str = ""
                 ) -> tuple[Optional[str], str]:
        """(owner_kind, owner); owner_kind None for the run's own processes."""
        if pid in self.own_pids or pid == self.harness or pid in self.ancestors or \
                self._harness_started(pid, ppid):
            return (HOG_COMM == comm and "injected" or None), ""
        cg = _read(f"/proc/{pid}/cgroup") or ""
        m = _CONTAINER_ID.search(cg)
        if m:
            cid = m.group(1)
            info = self._container(cid)
            labels = info[1] if info else {}
            run = labels.get(RUN_LABEL)
            if cid in self.own_containers or run == self.run_id:
                return ("injected" if labels.get(ROLE_LABEL) == "hog" or comm == HOG_COMM
                        else None), ""
            if run:
                return "wotbench", run
            return "container", info[0] if info else cid[:12]
        env = _read(f"/proc/{pid}/environ", 1 << 16) or ""
        for var in env.split("\0"):
            if var.startswith(PROCESS_ENV + "="):
                run = var[len(PROCESS_ENV) + 1:]
                if run == self.run_id:
                    return ("injected" if comm == HOG_COMM else None), ""
                return "wotbench", run
        if comm in RUNTIME_COMMS or comm.startswith("containerd-shim"):
            return "runtime", ""
        if is_wotbench(comm, cmdline):    # another harness (its run id is not in its env)
            return "wotbench", ""
        return "host", ""

    def _new(self, pid: int, since_ns: Optional[int]) -> Optional[_Proc]:
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            comm, f = parse_stat(os.pread(fd, 4096, 0).decode(errors="replace"))
        except (OSError, ValueError):
            os.close(fd)
            return None
        cmdline = read_cmdline(pid)
        kind, owner = self.classify(pid, comm, int(f[1]), cmdline)
        if kind is None:            # ours: remember, never read again
            os.close(fd)
            return _Proc(None, comm, None, "", None, 0)
        status = _read(f"/proc/{pid}/status") or ""
        allowed = next((parse_cpu_list(line.split(":", 1)[1]) for line in status.splitlines()
                        if line.startswith("Cpus_allowed_list:")), None)
        ticks = int(f[11]) + int(f[12])
        # a process born since the last scan used all of its CPU time in this interval
        born_ns = int(f[19]) * TICK_NS + self._boot_to_mono
        fresh = since_ns is not None and born_ns > since_ns
        return _Proc(fd, comm, kind, owner, allowed, 0 if fresh else ticks, cmdline)

    def _exec_seen(self, pid: int, p: _Proc, comm: str, ppid: int, cmdline: str) -> None:
        """The process exec'd: name it by what it runs now, and classify it again (its
        environment may have changed with the exec; a harness's own stays its own)."""
        p.comm, p.cmdline = comm, cmdline
        p.kind, p.owner = self.classify(pid, comm, ppid, cmdline)

    # ------------------------------------------------------------------ sampling
    def _core(self, pid: int, p: _Proc, processor: int) -> int:
        if p.allowed is not None and len(p.allowed) == 1:
            return next(iter(p.allowed))
        return processor

    def sample(self, now: int) -> list[list]:
        rows = []
        interval = now - self.last_ns if self.last_ns is not None else 0
        seen = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            seen.add(pid)
            p = self.procs.get(pid)
            if p is None:
                p = self._new(pid, self.last_ns)
                if p is None:
                    continue
                self.procs[pid] = p
            if p.fd is None:
                continue
            try:
                comm, f = parse_stat(os.pread(p.fd, 4096, 0).decode(errors="replace"))
            except (OSError, ValueError):   # it exited between listdir and read
                continue

            ticks = int(f[11]) + int(f[12])
            delta, p.cpu_ticks = ticks - p.cpu_ticks, ticks
            if delta <= 0 or self.last_ns is None:
                continue
            core = self._core(pid, p, int(f[36]))
            if core in self.cores:
                # an exec may keep the command name (sh -> taskset -> sh): the command line,
                # read for the few processes written, tells
                cmdline = read_cmdline(pid)
                if comm != p.comm or (cmdline and cmdline != p.cmdline):
                    self._exec_seen(pid, p, comm, int(f[1]), cmdline)
                    if p.kind is None:
                        continue
                rows.append([now, interval, pid, p.comm, p.kind, p.owner, core, delta * TICK_NS,
                             p.cmdline])
        for pid in [q for q in self.procs if q not in seen]:   # exited: free its descriptor
            fd = self.procs.pop(pid).fd
            if fd is not None:
                os.close(fd)
        self.last_ns = now
        return rows

    def close(self) -> None:
        for p in self.procs.values():
            if p.fd is not None:
                os.close(p.fd)
        self.procs.clear()

