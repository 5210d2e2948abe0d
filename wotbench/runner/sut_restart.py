"""The ``restart`` SUT fault (issue 35, wotbench.config.sut_faults): stop a started server's
whole process tree and start it again with the same command and config, then wait until it
answers its readiness probe (a CoAP ping; an HTTP GET for ``protocol: http``) — the downtime is
from the stop to that answer.

Process backend: SIGTERM to every process of the tree (the warden, the program and its
children, e.g. webdis and its redis), SIGKILL to what is left after ``stop_grace_s``, then the
backend starts the device again (its earlier output is kept as ``<stdout>.before-restart``).
The new process gets the parent-death signal from the thread that started it: the fault thread
therefore lives until the restarted server has exited (:meth:`Restarts.hold`).
Docker backend: ``container.restart`` (the same container, command and limits)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from wotbench.runner.deployment import thirdparty
from wotbench.runner.teardown.cleanup import kill_processes

if TYPE_CHECKING:
    from wotbench.runner.deployment.components import DeviceRun


class Restarts:
    """Restarts the backend's servers; ``tree(pid)`` lists a process and its descendants."""

    def __init__(self, backend, devices: dict[str, "DeviceRun"],
                 tree: Callable[[int], list[int]]):
        self.backend, self.devices, self.tree = backend, devices, tree
        self.respawned: list[str] = []   # process backend: started from this thread

    def stop_and_start(self, name: str, grace_s: float) -> None:
        """Returns when the server was started again (not yet answering)."""
        if self.backend.name == "docker":
            self._docker(name, grace_s)
            return
        d = self.devices[name]
        pid = self.backend.pid(name)
        if pid is None:
            raise ProcessLookupError(f"{name} has no process")
        warden = self.backend.procs[name]
        # the warden stays a zombie until it is reaped below: kill_processes does not wait
        # on zombies; polled finely, the downtime is the restart's, not the poll's
        kill_processes(self.tree(warden.pid), grace_s, poll_s=0.01)
        warden.wait(timeout=5)   # reaped: its exit is the restart's, not a failure
        if d.stdout.exists():
            d.stdout.replace(d.stdout.with_name(d.stdout.name + ".before-restart"))
        self.backend._pids.pop(name, None)   # the program's pid is the new one's
        self.backend.start_devices([d])
        self.respawned.append(name)

    def _docker(self, name: str, grace_s: float) -> None:
        c = self.backend.ctr[name]
        c.restart(timeout=max(1, round(grace_s)))
        exits = self.backend.exits   # the event stream saw the stop: not the server's end
        end = time.monotonic() + 2
        while exits is not None and name not in exits.codes and time.monotonic() < end:
            time.sleep(0.02)
        if exits is not None:
            exits.codes.pop(name, None)

    def wait_ready(self, name: str) -> None:
        """EnvironmentProblem when it does not answer within its ``ready_timeout_s``."""
        d = self.devices[name]
        timeout = d.program.ready_timeout_s if d.program is not None else 10.0
        thirdparty.wait_answering([d], {name: d.program_key or name}, timeout)

    def hold(self, names: list[str]) -> None:
        """Process backend: keep the starting thread alive while the servers it respawned run
        (their parent-death signal fires when that thread ends); the run's stop or cleanup
        ends them."""
        mine = [n for n in names if n in self.respawned]
        while any(self.backend.exit_code(n) is None for n in mine):
            time.sleep(0.2)
