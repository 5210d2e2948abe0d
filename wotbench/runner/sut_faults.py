"""Applies ``sut_faults:`` (issue 35, wotbench.config.sut_faults) on schedule during the test:
a thread sleeps until each fault's instant (test start + at_s, CLOCK_MONOTONIC) and signals the
server's whole process tree (SIGSTOP / SIGCONT for a pause, SIGKILL for a kill: nginx's workers
serve on while only its master is stopped; the backend's pid() is the program, not its warden,
which must keep running), recording the
instant each took effect in ``RUN/sut-faults.json`` (ns from the test start) for the analysis
and the report."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

from wotbench.rundir import atomic


def process_tree(pid: int) -> list[int]:
    """pid and every descendant (from /proc/PID/task/*/children), parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        for t in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in t.read_text().split()]
            except OSError:
                pass
    return out


def signal_tree(backend, name: str, sig: int) -> int:
    """Signals the component's program and its descendants; how many got it."""
    pid = backend.pid(name)
    if pid is None:
        raise ProcessLookupError(f"{name} has no process")
    n = 0
    for p in process_tree(pid):
        try:
            os.kill(p, sig)
            n += 1
        except ProcessLookupError:
            pass
    return n


class FaultRunner(threading.Thread):
    def __init__(self, backend, faults, test_start_ns: int, out: Path,
                 log: Callable[[str], None] = print):
        super().__init__(name="sut-faults", daemon=True)
        self.backend, self.t0, self.out, self.log = backend, test_start_ns, out, log
        # (when, fault index, signal): a pause is a stop and a continue
        self.steps = sorted(
            [(f.at_s, k, signal.SIGKILL if f.action == "kill" else signal.SIGSTOP)
             for k, f in enumerate(faults)]
            + [(f.at_s + f.for_s, k, signal.SIGCONT) for k, f in enumerate(faults)
               if f.action == "pause"])
        self.faults = faults
        self.records = [{"device": f.device, "action": f.action, "at_s": f.at_s,
                         "for_s": f.for_s, "window_s": f.window_s, "applied_ns": None,
                         "resumed_ns": None, "error": None} for f in faults]
        self.halt = threading.Event()

    def run(self) -> None:
        for at_s, k, sig in self.steps:
            wait = (self.t0 + int(at_s * 1e9) - time.monotonic_ns()) / 1e9
            if wait > 0 and self.halt.wait(wait):
                break
            rec, name = self.records[k], self.faults[k].device
            try:
                if not signal_tree(self.backend, name, sig):
                    raise ProcessLookupError(f"{name}: no process left")
            except Exception as e:   # recorded; the run goes on (the analysis says it)
                rec["error"] = f"{signal.Signals(sig).name}: {e}"
                continue
            rec["resumed_ns" if sig == signal.SIGCONT else "applied_ns"] = \
                time.monotonic_ns() - self.t0
            self.log(f"sut fault: {signal.Signals(sig).name} to {name} at {at_s:g} s")
        self.write()

    def finish(self) -> None:
        """Stops scheduling (the test ended); a paused server is continued, so it can stop."""
        self.halt.set()
        self.join(timeout=5)
        for rec, f in zip(self.records, self.faults):
            if rec["applied_ns"] is not None and f.action == "pause" and rec["resumed_ns"] is None:
                try:
                    signal_tree(self.backend, f.device, signal.SIGCONT)
                except Exception:
                    pass
        self.write()

    def write(self) -> None:
        with atomic.replacing(self.out) as fh:
            fh.write(json.dumps({"faults": self.records}, indent=1) + "\n")
