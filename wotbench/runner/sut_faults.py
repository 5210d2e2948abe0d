"""Applies ``sut_faults:`` (issue 35, wotbench.config.sut_faults) on schedule during the test:
a thread sleeps until each fault's instant (test start + at_s, CLOCK_MONOTONIC) and applies it —
a pause or a kill signals the server's whole process tree (SIGSTOP / SIGCONT, SIGKILL: nginx's
workers serve on while only its master is stopped; the backend's pid() is the program, not its
warden, which must keep running), a restart stops the tree and starts the server again
(:mod:`wotbench.runner.sut_restart`), a cpu_quota change sets the server's CFS quota through the
backend (``CpuLimiter``, backends/interface.py: the container's quota, or a cpu cgroup the process
backend created for the server before the test). It records the instant each took effect in
``RUN/sut-faults.json`` (ns from the test start; a restart also when it answered again) for the
analysis and the report."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from wotbench.config.sut_faults import REPLACED
from wotbench.errors import ConfigError
from wotbench.procutil import process_tree
from wotbench.rundir import atomic
from wotbench.runner.backends.interface import CpuLimiter
from wotbench.runner.sut_restart import Restarts

RESUME = "resume"   # the second step of a pause
RESTART_WAIT_S = 90  # at the test's end, for a restart still under way


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


def unwatched(faults) -> set[str]:
    """The servers whose exit during the test is the fault's, not a component failure."""
    return {f.device for f in faults or [] if f.action in REPLACED}


def preflight(faults, backend: CpuLimiter) -> None:
    """Before anything starts: ConfigError naming the key when a fault cannot be applied with
    this backend on this host."""
    quotas = [k for k, f in enumerate(faults or []) if f.action == "cpu_quota"]
    why = backend.cpu_limit_unavailable() if quotas else None
    if why:
        raise ConfigError([f"sut_faults[{k}].cpus: {why}" for k in quotas])


class FaultRunner(threading.Thread):
    def __init__(self, backend, faults, test_start_ns: int, out: Path,
                 log: Callable[[str], None] = print, devices: Sequence = (),
                 on_restarted: Callable[[str], None] = lambda name: None):
        super().__init__(name="sut-faults", daemon=True)
        self.backend, self.t0, self.out, self.log = backend, test_start_ns, out, log
        # a restarted server is new processes: the monitor must follow them (runner._watch)
        self.on_restarted = on_restarted
        # (when, fault index, step): a pause is a stop and a resume
        self.steps = sorted([(f.at_s, k, f.action) for k, f in enumerate(faults)]
                            + [(f.at_s + f.for_s, k, RESUME) for k, f in enumerate(faults)
                               if f.action == "pause"])
        self.faults = faults
        self.records = [{"device": f.device, "action": f.action, "at_s": f.at_s,
                         "for_s": f.for_s, "cpus": f.cpus, "window_s": f.window_s,
                         "applied_ns": None, "resumed_ns": None, "stopped_ns": None,
                         "throttled_periods": None, "error": None} for f in faults]
        self.halt = threading.Event()
        self.scheduled = threading.Event()   # every step done (or halted)
        self.restarts = Restarts(backend, {d.name: d for d in devices})
        self.restarting: list[tuple[threading.Thread, threading.Event]] = []   # in start order
        self.limited: list[str] = []   # servers of a cpu_quota fault, prepared by the backend

    def prepare(self) -> None:
        """Before the test: the backend readies each server of a cpu_quota fault (the process
        backend: a cpu cgroup of its own, no limit yet), so the fault only sets the quota."""
        for f in self.faults:
            if f.action == "cpu_quota" and f.device not in self.limited:
                self.backend.prepare_cpu_limit(f.device)
                self.limited.append(f.device)

    def _apply(self, name: str, step: str, k: int) -> None:
        f, rec = self.faults[k], self.records[k]
        if step in ("pause", "kill", RESUME):
            sig = {"pause": signal.SIGSTOP, "kill": signal.SIGKILL, RESUME: signal.SIGCONT}[step]
            if not signal_tree(self.backend, name, sig):
                raise ProcessLookupError(f"{name}: no process left")
        elif step == "cpu_quota":
            self.backend.limit_cpu(name, f.cpus)
        elif step == "restart":   # in a thread of its own: the schedule goes on meanwhile
            t = threading.Thread(target=self._restart, args=(k,), daemon=True,
                                 name=f"sut-restart-{name}")
            self.restarting.append((t, threading.Event()))
            t.start()

    def _restart(self, k: int) -> None:
        """Stops and starts the server, records when it answered again, then stays alive while
        the server runs (it started it: the parent-death signal, sut_restart.Restarts.hold)."""
        f, rec = self.faults[k], self.records[k]
        done = next(e for t, e in self.restarting if t is threading.current_thread())
        try:
            self.restarts.stop_and_start(f.device, f.stop_grace_s)
            rec["stopped_ns"] = time.monotonic_ns() - self.t0   # started again from here
            self.on_restarted(f.device)   # a quota set before stays (the backend's restart)
            self.restarts.wait_ready(f.device)
            rec["resumed_ns"] = time.monotonic_ns() - self.t0
            self.log(f"sut fault: restart {f.device} at {f.at_s:g} s (answering again after "
                     f"{(rec['resumed_ns'] - rec['applied_ns']) / 1e9:.2f} s)")
        except Exception as e:   # recorded; the run goes on (the analysis says it)
            rec["error"] = f"restart: {e}"
        finally:
            done.set()
        self.restarts.hold([f.device])

    def run(self) -> None:
        try:
            self._schedule()
        finally:
            self.write()
            self.scheduled.set()

    def start(self) -> None:
        self.prepare()
        super().start()

    def _schedule(self) -> None:
        for at_s, k, step in self.steps:
            wait = (self.t0 + int(at_s * 1e9) - time.monotonic_ns()) / 1e9
            if wait > 0 and self.halt.wait(wait):
                break
            rec, name = self.records[k], self.faults[k].device
            if step != RESUME:   # the instant it began to take effect
                rec["applied_ns"] = time.monotonic_ns() - self.t0
            try:
                self._apply(name, step, k)
            except Exception as e:   # recorded; the run goes on (the analysis says it)
                rec["error"] = f"{step}: {e}"
                if step != RESUME:
                    rec["applied_ns"] = None
                continue
            if step == RESUME:
                rec["resumed_ns"] = time.monotonic_ns() - self.t0
            if step != "restart":   # a restart logs when it answers again
                self.log(f"sut fault: {step} {name} at {at_s:g} s")

    def finish(self) -> None:
        """Stops scheduling (the test ended) and waits for a restart under way; a paused server
        is continued, so it can stop; the cpu limits are released (a throttled server would
        stop slowly), their throttling recorded. Safe to call twice."""
        self.halt.set()
        self.scheduled.wait(timeout=15)
        for _, done in self.restarting:   # stopping, starting, its ready_timeout_s
            done.wait(timeout=RESTART_WAIT_S)
        for rec, f in zip(self.records, self.faults):
            if rec["applied_ns"] is not None and f.action == "pause" and rec["resumed_ns"] is None:
                try:
                    signal_tree(self.backend, f.device, signal.SIGCONT)
                except Exception:
                    pass
        throttled = {name: self.backend.release_cpu_limit(name) for name in self.limited}
        for k, f in enumerate(self.faults):
            if f.device in throttled and f.action == "cpu_quota":
                self.records[k]["throttled_periods"] = throttled[f.device]
        self.limited.clear()
        self.write()

    def write(self) -> None:
        with atomic.replacing(self.out) as fh:
            fh.write(json.dumps({"faults": self.records}, indent=1) + "\n")


def device_runs(parts) -> list:
    """The started servers a restart may start again."""
    return [d for d in parts.devices if d.program is not None]
