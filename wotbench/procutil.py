"""Helpers for the local processes a run starts (process-backend emulators, hogs, collectl)."""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Optional
import os
import resource
import signal as _signal

PR_SET_PDEATHSIG = 1


def child_setup(cpus: set[int], nofile: Optional[int] = None, keep_nice: bool = False):
    """preexec_fn: pin to ``cpus`` and get SIGTERM when the harness dies (even SIGKILLed);
    ``nofile``: raise RLIMIT_NOFILE to it (soft and hard; never lowered); the harness's nice is
    undone (an emulator competes as any process) unless ``keep_nice`` (the harness's own
    helpers, e.g. collectl: they must yield to the GEs on the core they share)."""
    def setup():
        if cpus:
            os.sched_setaffinity(0, cpus)
        if nofile:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft < nofile:   # a failure shows as the engine's own "raise ulimit -n" message
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, max(hard, nofile)))
                except (ValueError, OSError):
                    pass
        try:  # undo the harness's own nice (needs root or CAP_SYS_NICE; else all stay equal)
            if not keep_nice:
                os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError:
            pass
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, _signal.SIGTERM, 0, 0, 0)
        except Exception:
            pass
    return setup


def first_child(pid: int, wait_s: float = 2.0) -> Optional[int]:
    """The first child of ``pid`` (a warden's program), waiting up to ``wait_s`` for its fork;
    None when ``pid`` has none by then."""
    import time
    end = time.monotonic() + wait_s
    while True:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if kids:
            return int(kids[0])
        if time.monotonic() > end:
            return None
        time.sleep(0.01)


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
