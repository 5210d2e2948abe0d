"""The run's lease: how components know their harness is alive and when their run ends.

A SIGKILLed harness cannot stop what it started. Every component therefore runs under
``wb-warden`` (``warden/src/warden.c``), which reads one file in the run directory once a
second — no network call — and stops its component when the file is gone, has not been
renewed for ``STALE_S`` (its mtime), or the monotonic deadline written in it has passed.
The harness renews the file every ``RENEW_S`` from a thread of its own and removes it when the
run's components are gone. The same file tells a later run or ``wotbench clean`` whether a
run's leftovers still have a live harness (:func:`lease_state`).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Literal, Optional

LEASE_FILE = "heartbeat"
LEASE_LABEL = "wotbench.lease"   # container label: the lease file's path on the host
RENEW_S = 1.0
# A harness on a loaded 2-core host can be starved for seconds (it runs at nice 10); 15 s of
# silence plus the warden's 5 s grace stops a 1000-device run's components within 25 s (the
# bench measured 29 s from the kill to the last container's exit at 20 s: too close to 30).
STALE_S = 15.0
GRACE_S = 5.0
# Until the test's timeline is planned the deadline covers deployment (image builds, starting
# a thousand devices, readiness): generous, because an early stop would be a false failure.
DEPLOY_ALLOWANCE_S = 1800.0
STOP_MARGIN_S = 120.0            # after the test's bounded end: stopping, logs, cleanup

LeaseState = Literal["live", "stale", "gone"]


def lease_text(run_id: str, deadline_mono_ns: int) -> str:
    return (f"wotbench-lease 1\nrun {run_id}\npid {os.getpid()}\n"
            f"deadline_mono_ns {deadline_mono_ns}\n")


def lease_state(path: Optional[str | Path], stale_s: float = STALE_S) -> LeaseState:
    """``live`` while its harness renews it, ``stale`` when it stopped, ``gone`` without one."""
    if not path:
        return "gone"
    try:
        age = time.time() - Path(path).stat().st_mtime
    except OSError:
        return "gone"
    return "live" if age <= stale_s else "stale"


class Lease:
    """The harness side: create, renew, move the deadline, remove."""

    def __init__(self, lease_dir: Path, run_id: str):
        self.dir, self.run_id = Path(lease_dir), run_id
        self.path = self.dir / LEASE_FILE
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self, deadline_mono_ns: Optional[int] = None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)    # components run as nobody and only read it
        self.set_deadline(deadline_mono_ns or
                          time.monotonic_ns() + int(DEPLOY_ALLOWANCE_S * 1e9))
        self._thread = threading.Thread(target=self._renew, name="wotbench-lease", daemon=True)
        self._thread.start()

    def set_deadline(self, deadline_mono_ns: int) -> None:
        """Write the deadline (a new file renamed over the old: a reader never sees half)."""
        tmp = self.dir / f".{LEASE_FILE}.tmp"
        tmp.write_text(lease_text(self.run_id, deadline_mono_ns))
        tmp.chmod(0o644)
        os.replace(tmp, self.path)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                os.utime(self.path)
            except OSError:
                return    # removed (the run is over) or the disk is gone: components stop

    def release(self) -> None:
        """The run's components are gone: stop renewing and remove the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * RENEW_S)
        try:
            self.path.unlink()
        except OSError:
            pass


def warden_argv(warden: str, lease_file: str) -> list[str]:
    """The warden's command line before ``PROGRAM ARGS``; ``lease_file`` as the component sees
    it (its mount point in a container)."""
    return [warden, "--lease", lease_file, "--stale-s", f"{STALE_S:g}", "--grace-s",
            f"{GRACE_S:g}", "--"]
