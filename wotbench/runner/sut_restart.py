"""The ``restart`` SUT fault (issue 35, wotbench.config.sut_faults): stop a started server's
whole process tree and start it again with the same command and config, then wait until it
answers its readiness probe (a CoAP ping; an HTTP GET for ``protocol: http``) — the downtime is
from the stop to that answer.

The stop and start are the backend's own (``RunBackend.restart``, backends/interface.py:
SIGTERM to the tree, SIGKILL after ``stop_grace_s``, the same command, placement and limits).
A local process gets the parent-death signal from the thread that started it: when the backend
says so, the fault thread therefore lives until the restarted server has exited
(:meth:`Restarts.hold`)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from wotbench.runner.backends.interface import Inspector, Restarter
from wotbench.runner.deployment import thirdparty

if TYPE_CHECKING:
    from wotbench.runner.deployment.components import DeviceRun


class Backend(Restarter, Inspector, Protocol):
    """What a restart asks of the backend."""


class Restarts:
    """Restarts the backend's servers (``devices``: the started servers, by name)."""

    def __init__(self, backend: Backend, devices: dict[str, "DeviceRun"]):
        self.backend, self.devices = backend, devices
        self.bound: list[str] = []   # restarted from this side's threads, which must live on

    def stop_and_start(self, name: str, grace_s: float) -> None:
        """Returns when the server was started again (not yet answering)."""
        if self.backend.restart(self.devices[name], grace_s):
            self.bound.append(name)

    def wait_ready(self, name: str) -> None:
        """EnvironmentProblem when it does not answer within its ``ready_timeout_s``."""
        d = self.devices[name]
        timeout = d.program.ready_timeout_s if d.program is not None else 10.0
        thirdparty.wait_answering([d], {name: d.program_key or name}, timeout)

    def hold(self, names: list[str]) -> None:
        """Keep the calling thread alive while the servers it restarted and is bound to run
        (their parent-death signal fires when that thread ends); the run's stop or cleanup
        ends them."""
        mine = [n for n in names if n in self.bound]
        while any(self.backend.exit_code(n) is None for n in mine):
            time.sleep(0.2)
