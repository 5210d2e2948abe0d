"""The quiet-host gate: before a measured run, wait until the host is quiet (a low 1-minute load
average and no competing jobs such as other WoTbench runs, test suites or compilers), and record
the load before and after it. Used by the validation study, and by sweeps and capacity searches
with ``--quiet``.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

# Jobs that compete with a measured run, by the program they run: other WoTbench runs, test
# suites, compilers, image builds. Only the program counts, not the arguments: a job queued behind
# the machine-wide lock (``flock /tmp/wotbench-exclusive.lock wotbench run ...``) and a
# ``grep wotbench`` compete for nothing (the queued job is listed itself once it runs).
COMPETING_JOBS = frozenset({"wotbench", "pytest", "py.test", "gcc", "cc", "cc1", "cc1plus", "clang",
                            "ld", "as", "docker build"})
DEFAULT_MAX_LOAD = 0.6
DEFAULT_TIMEOUT_S = 600.0


def loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def job_name(args: str) -> str:
    """The program a command line runs: ``/usr/bin/gcc -O2 x.c`` -> gcc, ``python -m pytest`` ->
    pytest, ``python -m wotbench.cli`` -> wotbench, ``python bench/run_all.py`` -> run_all,
    ``docker build .`` -> docker build."""
    argv = args.split()
    prog = Path(argv[0]).name if argv else ""
    if re.fullmatch(r"python[\d.]*", prog):
        for i, a in enumerate(argv[1:], 1):
            if a == "-m" and i + 1 < len(argv):
                return argv[i + 1].split(".")[0]
            if not a.startswith("-"):
                return Path(a).stem
    if prog == "docker" and "build" in argv[1:3]:
        return "docker build"
    return prog


def busy_processes(ps_output: Optional[str] = None, exclude: Optional[set[int]] = None) -> list[str]:
    """Other processes that would load the host (:data:`COMPETING_JOBS`), not this process's
    ancestors."""
    if ps_output is None:
        ps_output = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True,
                                   check=False).stdout
    exclude = _ancestors() if exclude is None else exclude
    out = []
    for line in ps_output.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) in exclude:
            continue
        if job_name(parts[1]) in COMPETING_JOBS:
            out.append(f"{parts[0]} {parts[1][:100]}")
    return out


def wait_quiet(max_load: float, timeout_s: float, poll_s: float = 10.0,
               log: Callable[[str], None] = print) -> tuple[bool, float, list[str]]:
    t_end = time.monotonic() + timeout_s
    while True:
        la, busy = loadavg(), busy_processes()
        if la < max_load and not busy:
            return True, la, []
        if time.monotonic() >= t_end:
            return False, la, busy
        log(f"  waiting for a quiet host: load {la:.2f} (< {max_load} wanted)"
            + (f", busy: {'; '.join(busy[:3])}" if busy else ""))
        time.sleep(poll_s)


@dataclass
class QuietGate:
    """Before each measured run: wait for a quiet host (``wait=False``: only record the load),
    and record the 1-minute load average before and after the run."""
    max_load: float = DEFAULT_MAX_LOAD
    timeout_s: float = DEFAULT_TIMEOUT_S
    wait: bool = True

    def before(self, log: Callable[[str], None] = print) -> tuple[Optional[str], dict]:
        """(why the run must not start, or None; the load record to complete with ``after``)."""
        if self.wait:
            ok, la, busy = wait_quiet(self.max_load, self.timeout_s, log=log)
            if not ok:
                return (f"host never quiet within {self.timeout_s:g} s (load {la:.2f}; "
                        f"{'; '.join(busy[:3]) or 'no other job seen'})",
                        {"before": la, "after": None})
        return None, {"before": loadavg(), "busy_before": busy_processes()}

    @staticmethod
    def after(record: dict) -> dict:
        record.update(after=loadavg(), busy_after=busy_processes())
        return record
