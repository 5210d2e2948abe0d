"""The kernel's evidence of a connected run: every ``INTERVAL_S`` the CPU time and run-queue
wait of each component's threads, summed from /proc/<pid>/task/*/schedstat (as the monitor's
cgroups.csv does for other runs: ``wotbench.monitor.recorder``), into
``monitor/connected-sched.csv`` ``mono_ns,component,role,cpu_ns,runqueue_ns`` (cumulative; the
analysis takes differences). Threads are listed again at each sample: an engine starts its
loops after it was spawned, and nginx's workers are children of its master.

A component is a name, a role (``testbed``: the engines and the applications; ``system``: the
edge server) and a function returning its pids now. Sampling a handful of processes once a
second costs a few hundred µs: it runs on the harness's thread, not beside any hot path."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Optional

COLUMNS = "mono_ns,component,role,cpu_ns,runqueue_ns"
INTERVAL_S = 1.0
PidsFn = Callable[[], list[int]]


def available() -> Optional[str]:
    """None when this kernel has per-thread schedstat, else why not."""
    own = Path(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat")
    return None if own.exists() else "no /proc/<pid>/task/<tid>/schedstat (CONFIG_SCHEDSTATS?)"


def thread_counters(pids: list[int]) -> Optional[tuple[int, int]]:
    """(CPU ns, run-queue wait ns) summed over every thread of ``pids``; None if none is left."""
    cpu = wait = 0
    seen = False
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    fields = f.read().split()
            except OSError:
                continue              # the thread ended between the listing and the read
            cpu += int(fields[0])
            wait += int(fields[1])
            seen = True
    return (cpu, wait) if seen else None


class SchedSampler:
    def __init__(self, path: Path):
        self.path = path
        self.components: list[tuple[str, str, PidsFn]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out = path.open("w")
        self._out.write(COLUMNS + "\n")

    def add(self, component: str, role: str, pids: PidsFn) -> None:
        with self._lock:
            self.components.append((component, role, pids))

    def sample(self) -> None:
        now = time.monotonic_ns()
        with self._lock:
            comps = list(self.components)
        rows = []
        for name, role, pids in comps:
            c = thread_counters(pids())
            if c is not None:
                rows.append(f"{now},{name},{role},{c[0]},{c[1]}\n")
        self._out.writelines(rows)
        self._out.flush()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                self.sample()
            except Exception:   # evidence is best effort: it must never stop the run
                pass

    def start(self) -> "SchedSampler":
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="connected-sched", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Idempotent: a last sample (the components still alive), then the file is closed."""
        if self._out.closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        try:
            self.sample()
        finally:
            self._out.close()
