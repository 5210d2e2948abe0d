"""The edge server's own CPU and memory in a connected run, sampled like a single-host run's
``server:`` SUT: the monitor's :class:`~wotbench.monitor.sut_sampler.SutSampler` follows the
server's process tree (nginx's master and workers; the shell, webdis and redis-server) into
``monitor/sut.csv`` every ``INTERVAL_S`` and once more at the stop, on a thread of the harness.
:func:`privileges` records who its processes run as (uid, effective capabilities) in
``edge/privileges.json``: least privilege is checked, not assumed."""
from __future__ import annotations

import threading
import time
from typing import Optional

from wotbench.monitor.sut_sampler import SutSampler, descendants
from wotbench.rundir import RunDir

INTERVAL_S = 1.0
COMPONENT = "edge-server"


class EdgeSutSampler:
    def __init__(self, rd: RunDir, interval_s: float = INTERVAL_S, log=print):
        self.sampler = SutSampler(rd, log=log)
        self.interval = interval_s
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self, pid: int) -> "EdgeSutSampler":
        """Follow ``pid`` (the server's first process) and its descendants from now."""
        self.sampler.watch(COMPONENT, "server", COMPONENT, pid, {})
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="connected-sut", daemon=True)
        self._thread.start()
        return self

    def sample(self) -> None:
        try:
            self.sampler.sample(time.monotonic_ns(), True)
        except OSError as e:      # a full disk: the run goes on, the report says what is missing
            self.sampler.log(f"edge server sampling: {e}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """The last sample (call it before the server stops), then the files closed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            self.sample()
        self.sampler.close()


def privileges(pid: int) -> list[dict]:
    """Each process of the tree below ``pid``: its name, real/effective uid, CapEff (hex)."""
    out = []
    for p in descendants(pid):
        try:
            lines = open(f"/proc/{p}/status").read().splitlines()
        except OSError:
            continue
        f = dict(line.split(":", 1) for line in lines if ":" in line)
        uids = f.get("Uid", "").split()
        out.append({"pid": p, "name": f.get("Name", "").strip(),
                    "uid": int(uids[0]) if uids else None,
                    "euid": int(uids[1]) if len(uids) > 1 else None,
                    "cap_eff": f.get("CapEff", "").strip()})
    return out
