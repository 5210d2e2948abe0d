"""Resource monitor (paper §4.2): collectl for the host, plus per-component CPU accounting.

- ``monitor/collectl/<host>-<date>.{tab,cpu}``: ``collectl -scCmn -i <interval> -P -oUzm``
  (host CPU, per-core CPU, memory, network; uncompressed; first column UTC epoch seconds),
  run on the OS core(s). :func:`load_collectl` parses them into pandas with a ``mono_ns``
  column (mapping saved in ``monitor/clock.json``) and :meth:`Monitor.stop` writes the parsed
  table to ``monitor/host.csv`` and ``monitor/cpu.csv``.
- ``monitor/cgroups.csv``, one row per component per interval (devices: in rotating batches of
  ``DEVICE_BATCH``, plus a ``<group>-*`` row per device group summing its devices' latest
  counters), cumulative counters (the analysis takes differences):
  ``mono_ns,component,role,cpu_ns,runqueue_ns,nr_periods,nr_throttled,throttled_ns``
  ``cpu_ns``: CPU time consumed (cgroup cpuacct.usage / cpu.stat usage_usec when the component
  has its own cgroup, i.e. a container; else the sum over its threads of /proc schedstat).
  ``runqueue_ns``: time its threads waited on a run queue (/proc/<pid>/task/*/schedstat) -- the
  direct sign of CPU contention. ``nr_periods,nr_throttled,throttled_ns``: CFS bandwidth
  throttling (only with a cpu quota; empty when not applicable or unreadable).
- ``monitor/cores.csv`` and ``monitor/pressure.csv``: per-core busy/steal/idle time and host CPU
  pressure (:mod:`wotbench.monitor.host_counters`); ``monitor/foreign.csv``: the CPU that other
  processes used on the run's cores, by process (:mod:`wotbench.monitor.foreign`);
  ``monitor/sources.json``: which of these evidence sources this host had.
- ``monitor/sut.csv``: CPU and memory of the system under test's own components (third-party
  servers, the proxy), :mod:`wotbench.monitor.sut_sampler`.
Every file is read defensively (cgroup v1 or v2, missing files, vanished processes).
"""
from __future__ import annotations

import csv
import os
import signal
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd

from wotbench.monitor.fds import open_ro as _open, pread_text as _pread
from wotbench.monitor.foreign import FOREIGN_COLUMNS, ContainerLookup, ForeignScan
from wotbench.monitor.host_counters import CORE_COLUMNS, PRESSURE_COLUMNS, HostCounters
from wotbench.monitor.sut_sampler import SutSampler
from wotbench.errors import WotbenchError
from wotbench.rundir import RunDir, atomic
from wotbench.rundir._model import read_record
from wotbench.rundir.monitor_files import MonitorClock, MonitorCost
from wotbench.procutil import child_setup

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_COLUMNS = ["mono_ns", "component", "role", "cpu_ns", "runqueue_ns", "nr_periods",
                  "nr_throttled", "throttled_ns"]
# devices read per interval (the others keep their latest values); every device is read at the
# evidence windows' edges (:meth:`Monitor.align`), so each window's sums are exact at any scale
DEVICE_BATCH = 100


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_dirs(pid: int) -> dict[str, Path]:
    """Controller -> cgroup directory of ``pid`` ("v2" key for the unified hierarchy)."""
    text = _read(Path(f"/proc/{pid}/cgroup")) or ""
    out = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "":
            for base in (CGROUP_ROOT / "unified", CGROUP_ROOT):
                if (base / rel / "cgroup.controllers").exists() or (base / rel / "cpu.stat").exists():
                    out["v2"] = base / rel
                    break
            continue
        for ctl in controllers.split(","):
            for mount in (CGROUP_ROOT / controllers, CGROUP_ROOT / ctl):
                if (mount / rel).is_dir():
                    out[ctl] = mount / rel
                    break
    return out


def container_cgroup_dirs(container_id: str) -> dict[str, Path]:
    """The cgroup directories of a Docker container found from its id alone (no API call, no
    pid): cgroupfs (``docker/<id>``, or ``<id>`` at the top: the GEs, runner/backends/docker)
    or systemd (``system.slice/docker-<id>.scope``) layout."""
    rels = (f"docker/{container_id}", container_id, f"system.slice/docker-{container_id}.scope")
    out = {}
    for ctl, mounts in (("cpuacct", ("cpuacct", "cpu,cpuacct")), ("cpu", ("cpu", "cpu,cpuacct")),
                        ("memory", ("memory",))):
        for m in mounts:
            for rel in rels:
                if (CGROUP_ROOT / m / rel).is_dir():
                    out.setdefault(ctl, CGROUP_ROOT / m / rel)
    for base in (CGROUP_ROOT / "unified", CGROUP_ROOT):
        for rel in rels:
            if (base / rel / "cpu.stat").exists():
                out.setdefault("v2", base / rel)
    return out


def _kv(text: str | None) -> dict[str, int]:
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


class Source:
    """One component's counters, read with one ``pread`` per file on descriptors opened once:
    sampling a thousand devices must not load the core the gateway emulators share with the
    harness. CPU time from the component's own cgroup (``cpu_ns``: cpuacct.usage in v1,
    cpu.stat usage_usec in v2) or, without one, from its threads' schedstat; run-queue wait
    from its threads' schedstat; CFS throttling from cpu.stat."""

    def __init__(self, component: str, role: str, group: Optional[str], tids: list[int],
                 dirs: dict[str, Path]):
        self.component, self.role, self.group = component, role, group
        self.cpuacct = _open(dirs["cpuacct"] / "cpuacct.usage") if "cpuacct" in dirs else None
        self.cpu_stat = _open(dirs["cpu"] / "cpu.stat") if "cpu" in dirs else None
        self.v2_stat = _open(dirs["v2"] / "cpu.stat") if "v2" in dirs else None
        self.tasks = [fd for fd in (_open(Path(f"/proc/{t}/schedstat")) for t in tids)
                      if fd is not None]
        self.last: Optional[list] = None   # the latest row (cumulative counters)

    def read(self, now: int) -> Optional[list]:
        cpu = wait = None
        ss = [_pread(fd) for fd in self.tasks]
        parts = [x.split() for x in ss if x]
        if parts:
            cpu = sum(int(p[0]) for p in parts)
            wait = sum(int(p[1]) for p in parts)
        usage = _pread(self.cpuacct)
        v1 = _kv(_pread(self.cpu_stat))
        v2 = _kv(_pread(self.v2_stat))
        if usage and usage.strip().isdigit():
            cpu = int(usage)
        elif "usage_usec" in v2:
            cpu = v2["usage_usec"] * 1000
        if cpu is None:
            return None   # gone: no thread and no cgroup left
        thr = v1 or v2
        throttled = thr.get("throttled_time", thr["throttled_usec"] * 1000 if "throttled_usec" in thr else None)
        self.last = [now, self.component, self.role, cpu, wait, thr.get("nr_periods"),
                     thr.get("nr_throttled"), throttled]
        return self.last

    def close(self) -> None:
        for fd in [self.cpuacct, self.cpu_stat, self.v2_stat, *self.tasks]:
            if fd is not None:
                os.close(fd)
        self.tasks = []
        self.cpuacct = self.cpu_stat = self.v2_stat = None


def _tids(pid: Optional[int], dirs: dict[str, Path]) -> list[int]:
    """The component's threads: its cgroup's (v1 ``tasks``, v2 ``cgroup.threads``), else the
    process's own (/proc/<pid>/task)."""
    for f in ([dirs["cpuacct"] / "tasks"] if "cpuacct" in dirs else []) + \
             ([dirs["v2"] / "cgroup.threads"] if "v2" in dirs else []):
        text = _read(f)
        if text:
            return [int(x) for x in text.split()]
    if pid:
        return [int(p.name) for p in Path(f"/proc/{pid}/task").glob("*") if p.name.isdigit()]
    return []


class Monitor:
    """Start with :meth:`start`, add components with :meth:`watch`, end with :meth:`stop`.

    Every interval it samples the gateway emulators and the CD components, and the devices in
    rotating batches of at most ``device_batch``; for every device group it also writes a row
    ``<group>-*`` (role ``device-group``) with the sums of its devices' latest counters, so a
    group's CPU and run-queue wait are a per-interval series however many devices there are."""

    def __init__(self, rd: RunDir, interval_s: float = 1.0, cpus: list[int] | None = None,
                 collectl: bool = True, log=print, device_batch: int = DEVICE_BATCH, *,
                 run_id: str = "", run_cores: Optional[set[int]] = None,
                 lookup: Optional[ContainerLookup] = None, sut_groups: Iterable[str] = ()):
        """``cpus``: where collectl runs (the OS cores); ``run_cores``: the cores whose foreign
        use is recorded (None: every core); ``lookup``: container id -> (name, labels);
        ``sut_groups``: the device groups that run a third-party server (sampled as the SUT)."""
        self.rd = rd
        self.counters = HostCounters()
        self._extra: dict = {}
        self.cost = {"samples": 0, "components": 0, "components_cpu_ns": 0,
                     "host_counters_cpu_ns": 0, "process_scan_cpu_ns": 0, "sut_cpu_ns": 0,
                     "sut_components": 0}
        self.sut = SutSampler(rd, sut_groups, log=log)
        self._started_ns: Optional[int] = None
        # instants (CLOCK_MONOTONIC ns) to read every component / scan the host's processes at
        self._full_at: list[int] = []
        self._scan_at: list[int] = []
        self.foreign = ForeignScan(run_id, run_cores if run_cores is not None
                                   else set(range(os.cpu_count() or 1)), lookup)
        self.interval = interval_s
        self.cpus = cpus
        self.use_collectl = collectl
        self.log = log
        self.device_batch = device_batch
        self.sources: dict[str, Source] = {}
        self._next_device = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._csv = None

    def watch(self, component: str, role: str, *, pid: Optional[int] = None,
              cgroup: Optional[dict[str, Path]] = None, group: Optional[str] = None) -> None:
        """Sample ``component`` from its own cgroup (``cgroup``: a container's directories) or
        from a process and its threads (``pid``)."""
        dirs = cgroup if cgroup is not None else {}
        src = Source(component, role, group, _tids(pid, dirs), dirs)
        with self._lock:
            if pid:
                self.foreign.own_pids.add(pid)
            for d in dirs.values():
                self.foreign.own_containers.add(d.name.removeprefix("docker-").removesuffix(".scope"))
            old = self.sources.pop(component, None)
            if old:
                old.close()
            self.sources[component] = src
        self.sut.watch(component, role, group, pid, dirs)

    def start(self) -> None:
        rd = self.rd
        rd.monitor_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_json(rd.clock_json, MonitorClock(wall_s=time.time(),
                                                      mono_ns=time.monotonic_ns()).model_dump(),
                          indent=None)
        if self.use_collectl and shutil.which("collectl"):
            cdir = rd.collectl_dir
            cdir.mkdir(exist_ok=True)
            interval = max(1, round(self.interval))
            self._proc = subprocess.Popen(
                ["collectl", "-scCmn", "-i", str(interval), "-P", "-oUzm", "-F1", "-f", str(cdir)],
                stdout=subprocess.DEVNULL, stderr=open(rd.collectl_stderr, "w"),
                # at the harness's nice: collectl at 0 delayed the GEs' sends around its
                # sample each second (docs/FLEET.md "The GEs' late sends")
                preexec_fn=child_setup(set(self.cpus or ()), keep_nice=True),
                start_new_session=True)
        elif self.use_collectl:
            self.log("monitor: collectl not found; host metrics skipped (apt-get install collectl)")
        self._csv = open(rd.cgroups_csv, "w", newline="")
        self._writer = csv.writer(self._csv)
        self._writer.writerow(CGROUP_COLUMNS)
        self._extra = {}
        for key, path, columns in (("cores", rd.cores_csv, CORE_COLUMNS),
                                   ("pressure", rd.pressure_csv, PRESSURE_COLUMNS),
                                   ("foreign", rd.foreign_csv, FOREIGN_COLUMNS)):
            f = open(path, "w", newline="")
            w = csv.writer(f)
            w.writerow(columns)
            self._extra[key] = (f, w)
        atomic.write_json(rd.monitor_sources_json, self.evidence_sources(), indent=1)
        self._started_ns = time.monotonic_ns()
        self._thread = threading.Thread(target=self._loop, name="wotbench-monitor", daemon=True)
        self._thread.start()

    def _due(self, everything: bool) -> list[Source]:
        with self._lock:
            srcs = list(self.sources.values())
        devices = [s for s in srcs if s.group is not None]
        if everything or len(devices) <= self.device_batch:
            return srcs
        k = self._next_device % len(devices)
        batch = (devices + devices)[k:k + self.device_batch]
        self._next_device = k + self.device_batch
        return [s for s in srcs if s.group is None] + batch

    def align(self, full_at: list[int], scan_at: list[int]) -> None:
        """Read every component at ``full_at`` (the evidence windows' edges) and scan the host's
        processes only at ``scan_at`` (edges and middles): the counters are cumulative, so each
        window's sums come out exact while 1000 devices cost a full read once a window, not
        every interval (docs/VALIDATION.md "Cost"). Without it every sample does both."""
        with self._lock:
            self._full_at, self._scan_at = sorted(full_at), sorted(scan_at)

    def _due_marks(self, now: int) -> tuple[bool, bool]:
        """(read everything, scan the processes) for a sample at ``now``."""
        with self._lock:
            if not self._scan_at and not self._full_at:
                return False, True
            slack = 20_000_000          # a wake-up a little early still counts
            full = bool(self._full_at) and self._full_at[0] <= now + slack
            scan = bool(self._scan_at) and self._scan_at[0] <= now + slack
            self._full_at = [x for x in self._full_at if x > now + slack]
            self._scan_at = [x for x in self._scan_at if x > now + slack]
        return full, scan

    def _next_mark_s(self) -> Optional[float]:
        with self._lock:
            marks = self._full_at[:1] + self._scan_at[:1]
        return min(marks) / 1e9 if marks else None

    def sample(self, everything: bool = False, scan: bool = True) -> None:
        now = time.monotonic_ns()
        t0 = time.thread_time_ns()
        for src in self._due(everything):
            row = src.read(now)
            if row is not None:
                self._writer.writerow(row)
        groups: dict[str, list] = {}
        with self._lock:
            for src in self.sources.values():
                if src.group is not None and src.last is not None:
                    groups.setdefault(src.group, []).append(src.last)
        for g, rows in groups.items():
            total = [sum(r[i] or 0 for r in rows) if any(r[i] is not None for r in rows) else None
                     for i in range(3, 8)]
            self._writer.writerow([now, f"{g}-*", "device-group", *total])
        self._csv.flush()
        t1 = time.thread_time_ns()
        cores, pressure = self.counters.sample(now)
        t2 = time.thread_time_ns()
        foreign = self.foreign.sample(now) if scan else []
        t3 = time.thread_time_ns()
        self.sut.sample(now, everything)
        t4 = time.thread_time_ns()
        for key, rows in (("cores", cores), ("pressure", pressure), ("foreign", foreign)):
            f, w = self._extra[key]
            w.writerows(rows)
            f.flush()
        # what sampling costs (this thread's CPU time), written to monitor/cost.json at stop
        self.cost["samples"] += 1
        self.cost["components_cpu_ns"] += t1 - t0
        self.cost["host_counters_cpu_ns"] += t2 - t1
        self.cost["process_scan_cpu_ns"] += t3 - t2
        self.cost["sut_cpu_ns"] += t4 - t3
        self.cost["components"] = len(self.sources)
        self.cost["sut_components"] = len(self.sut)

    def _write_cost(self) -> None:
        elapsed = time.monotonic_ns() - (self._started_ns or time.monotonic_ns())
        cpu = sum(v for k, v in self.cost.items() if k.endswith("_cpu_ns"))
        cost = MonitorCost(**self.cost, interval_s=self.interval,
                           elapsed_s=round(elapsed / 1e9, 3),
                           share_of_a_core=round(cpu / elapsed, 5) if elapsed > 0 else None)
        atomic.write_json(self.rd.monitor_cost_json, cost.model_dump(), indent=1)

    def evidence_sources(self) -> dict[str, Optional[str]]:
        """Evidence source -> None when this host has it, else why not (monitor/sources.json)."""
        schedstat = Path(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat")
        return {"thread_runqueue_wait": None if schedstat.exists()
                else "no /proc/<pid>/task/<tid>/schedstat (kernel without CONFIG_SCHEDSTATS?)",
                **self.counters.sources(), "process_scan": None}

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            full, scan = self._due_marks(time.monotonic_ns())
            try:
                self.sample(everything=full, scan=scan)
            except Exception as e:  # never let monitoring kill the run
                self.log(f"monitor: sample failed: {e}")
            now = time.monotonic()
            while next_t <= now:
                next_t += self.interval
            mark = self._next_mark_s()
            wake = min(next_t, mark) if mark is not None else next_t
            self._stop.wait(max(0.0, wake - time.monotonic()))

    def stop(self) -> None:
        """Idempotent. Stops sampling and collectl, then writes the parsed host tables."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            try:
                self.sample(everything=True)  # final sample: counters at the end of the run
            except Exception:
                pass
        with self._lock:
            for src in self.sources.values():
                src.close()
            self.sources.clear()
        self.sut.close()
        if self._csv is not None:   # a full disk must not stop the rest of the cleanup
            files, self._csv = [self._csv] + [f for f, _ in self._extra.values()], None
            self._extra = {}
            for f in files:
                _close(f, self.log)
            try:
                self._write_cost()
            except WotbenchError as e:
                self.log(f"monitor: {e}")
        self.counters.close()
        self.foreign.close()
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
            try:
                tables = load_collectl(self.rd)
                for kind, path in (("host", self.rd.host_csv), ("cpu", self.rd.cpu_csv)):
                    if kind in tables:
                        with atomic.replacing_path(path) as tmp:
                            tables[kind].to_csv(tmp, index=False)
            except Exception as e:
                self.log(f"monitor: could not parse collectl output: {e}")


def _close(f, log) -> None:
    """Close a sample file; what its buffer still held is lost when the disk is full."""
    try:
        f.close()
    except OSError as e:
        log(f"monitor: {f.name}: the last samples could not be written ({e.strerror})")


def load_collectl(rd: RunDir) -> dict[str, pd.DataFrame]:
    """Parse ``monitor/collectl/*.tab`` (key "host") and ``*.cpu`` (key "cpu") written with
    ``-oUzm``. Columns keep collectl's names (``[CPU:1]Totl%``...) plus ``utc_s`` and
    ``mono_ns`` (CLOCK_MONOTONIC, via ``monitor/clock.json``)."""
    clock = read_record(rd.clock_json, MonitorClock)
    out = {}
    for kind, ext in (("host", "tab"), ("cpu", "cpu")):
        frames = []
        for f in sorted(rd.collectl_dir.glob(f"*.{ext}")):
            header, rows = None, []
            for line in f.read_text(errors="replace").splitlines():
                if line.startswith("#UTC"):
                    header = ["utc_s"] + line.split()[1:]
                elif line and not line.startswith("#") and header:
                    vals = line.split()
                    if len(vals) == len(header):
                        rows.append(vals)
            if header and rows:
                frames.append(pd.DataFrame(rows, columns=header).apply(pd.to_numeric,
                                                                       errors="coerce"))
        if frames:
            df = pd.concat(frames, ignore_index=True)
            df.insert(1, "mono_ns", ((df["utc_s"] - clock.wall_s) * 1e9
                                     + clock.mono_ns).round().astype("int64"))
            out[kind] = df
    return out
