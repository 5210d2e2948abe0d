"""Resource monitor (paper §4.2): collectl for the host, plus per-component CPU accounting.

- ``monitor/collectl/<host>-<date>.{tab,cpu}``: ``collectl -scCmn -i <interval> -P -oUzm``
  (host CPU, per-core CPU, memory, network; uncompressed; first column UTC epoch seconds),
  run on the OS core(s). :func:`load_collectl` parses them into pandas with a ``mono_ns``
  column (mapping saved in ``monitor/clock.json``) and :meth:`Monitor.stop` writes the parsed
  table to ``monitor/host.csv`` and ``monitor/cpu.csv``.
- ``monitor/cgroups.csv``, one row per component per interval, cumulative counters
  (the analysis takes differences):
  ``mono_ns,component,role,cpu_ns,runqueue_ns,nr_periods,nr_throttled,throttled_ns``
  ``cpu_ns``: CPU time consumed (cgroup cpuacct.usage / cpu.stat usage_usec when the component
  has its own cgroup, i.e. a container; else the sum over its threads of /proc schedstat).
  ``runqueue_ns``: time its threads waited on a run queue (/proc/<pid>/task/*/schedstat) -- the
  direct sign of CPU contention. ``nr_periods,nr_throttled,throttled_ns``: CFS bandwidth
  throttling (only with a cpu quota; empty when not applicable or unreadable).
Every file is read defensively (cgroup v1 or v2, missing files, vanished processes).
"""
from __future__ import annotations

import csv
import glob
import json
import signal
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_COLUMNS = ["mono_ns", "component", "role", "cpu_ns", "runqueue_ns", "nr_periods",
                  "nr_throttled", "throttled_ns"]


@dataclass
class Watched:
    component: str
    role: str
    pid: int
    own_cgroup: bool       # True for containers: cgroup counters belong to this component


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


def _kv(text: str | None) -> dict[str, int]:
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def cgroup_counters(dirs: dict[str, Path]) -> dict[str, int | None]:
    """cpu_ns, nr_periods, nr_throttled, throttled_ns from the v1 or v2 files available."""
    res: dict[str, int | None] = {"cpu_ns": None, "nr_periods": None, "nr_throttled": None,
                                  "throttled_ns": None}
    if "cpuacct" in dirs:
        usage = _read(dirs["cpuacct"] / "cpuacct.usage")
        if usage and usage.strip().isdigit():
            res["cpu_ns"] = int(usage)
    if "cpu" in dirs:
        st = _kv(_read(dirs["cpu"] / "cpu.stat"))
        res["nr_periods"] = st.get("nr_periods")
        res["nr_throttled"] = st.get("nr_throttled")
        res["throttled_ns"] = st.get("throttled_time")
    if "v2" in dirs:
        st = _kv(_read(dirs["v2"] / "cpu.stat"))
        if res["cpu_ns"] is None and "usage_usec" in st:
            res["cpu_ns"] = st["usage_usec"] * 1000
        if res["nr_periods"] is None:
            res["nr_periods"] = st.get("nr_periods")
            res["nr_throttled"] = st.get("nr_throttled")
            if "throttled_usec" in st:
                res["throttled_ns"] = st["throttled_usec"] * 1000
    return res


def schedstat(pid: int) -> tuple[int, int] | None:
    """(on-CPU ns, run-queue wait ns) summed over the threads of ``pid``."""
    cpu = wait = 0
    found = False
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        parts = (_read(Path(f)) or "").split()
        if len(parts) >= 2:
            cpu += int(parts[0])
            wait += int(parts[1])
            found = True
    return (cpu, wait) if found else None


class Monitor:
    """Start with :meth:`start`, add components with :meth:`watch`, end with :meth:`stop`."""

    def __init__(self, out_dir: Path, interval_s: float = 1.0, cpus: list[int] | None = None,
                 collectl: bool = True, log=print):
        self.dir = Path(out_dir)
        self.interval = interval_s
        self.cpus = cpus
        self.use_collectl = collectl
        self.log = log
        self.watched: dict[str, Watched] = {}
        self._dirs: dict[str, dict[str, Path]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._csv = None

    def watch(self, component: str, role: str, pid: int, own_cgroup: bool) -> None:
        with self._lock:
            self.watched[component] = Watched(component, role, pid, own_cgroup)
            self._dirs[component] = cgroup_dirs(pid) if own_cgroup else {}

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "clock.json").write_text(json.dumps(
            {"wall_s": time.time(), "mono_ns": time.monotonic_ns()}) + "\n")
        if self.use_collectl and shutil.which("collectl"):
            cdir = self.dir / "collectl"
            cdir.mkdir(exist_ok=True)
            interval = max(1, round(self.interval))
            from wotbench.runner.process_backend import child_setup
            self._proc = subprocess.Popen(
                ["collectl", "-scCmn", "-i", str(interval), "-P", "-oUzm", "-F1", "-f", str(cdir)],
                stdout=subprocess.DEVNULL, stderr=open(self.dir / "collectl.stderr", "w"),
                preexec_fn=child_setup(set(self.cpus or ())),
                start_new_session=True)
        elif self.use_collectl:
            self.log("monitor: collectl not found; host metrics skipped (apt-get install collectl)")
        self._csv = open(self.dir / "cgroups.csv", "w", newline="")
        self._writer = csv.writer(self._csv)
        self._writer.writerow(CGROUP_COLUMNS)
        self._thread = threading.Thread(target=self._loop, name="wotbench-monitor", daemon=True)
        self._thread.start()

    def sample(self) -> None:
        now = time.monotonic_ns()
        with self._lock:
            items = list(self.watched.values())
        for w in items:
            ss = schedstat(w.pid)
            cg = cgroup_counters(self._dirs.get(w.component, {})) if w.own_cgroup else {}
            if ss is None and not any(v is not None for v in cg.values()):
                continue  # process gone and no cgroup left
            cpu = cg.get("cpu_ns") if cg.get("cpu_ns") is not None else (ss[0] if ss else None)
            self._writer.writerow([now, w.component, w.role, cpu, ss[1] if ss else None,
                                   cg.get("nr_periods"), cg.get("nr_throttled"),
                                   cg.get("throttled_ns")])
        self._csv.flush()

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as e:  # never let monitoring kill the run
                self.log(f"monitor: sample failed: {e}")
            next_t += self.interval
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> None:
        """Idempotent. Stops sampling and collectl, then writes the parsed host tables."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            try:
                self.sample()  # final sample: counters at the end of the run
            except Exception:
                pass
        if self._csv is not None:
            self._csv.close()
            self._csv = None
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
                for kind, df in load_collectl(self.dir).items():
                    df.to_csv(self.dir / f"{kind}.csv", index=False)
            except Exception as e:
                self.log(f"monitor: could not parse collectl output: {e}")


def load_collectl(monitor_dir: Path) -> dict[str, pd.DataFrame]:
    """Parse ``monitor/collectl/*.tab`` (key "host") and ``*.cpu`` (key "cpu") written with
    ``-oUzm``. Columns keep collectl's names (``[CPU:1]Totl%``...) plus ``utc_s`` and
    ``mono_ns`` (CLOCK_MONOTONIC, via ``monitor/clock.json``)."""
    monitor_dir = Path(monitor_dir)
    clock = json.loads((monitor_dir / "clock.json").read_text())
    out = {}
    for kind, ext in (("host", "tab"), ("cpu", "cpu")):
        frames = []
        for f in sorted((monitor_dir / "collectl").glob(f"*.{ext}")):
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
            df.insert(1, "mono_ns", ((df["utc_s"] - clock["wall_s"]) * 1e9
                                     + clock["mono_ns"]).round().astype("int64"))
            out[kind] = df
    return out
