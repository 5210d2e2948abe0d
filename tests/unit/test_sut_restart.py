"""The ``restart`` SUT fault through the backends' own seam (``RunBackend.restart``): the
process backend stops a server's whole tree (SIGKILL after the grace for what ignores SIGTERM)
and starts the same command again; the Docker backend restarts the container and takes back
the exit its event stream saw; ``sut_restart.Restarts`` holds its thread only for a server
bound to it. The whole fault against libcoap's server: tests/e2e/test_e2e_sut_restart_quota.py."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from wotbench.config.byo import Program
from wotbench.procutil import process_tree
from wotbench.runner.backends.docker.backend import DockerBackend
from wotbench.runner.backends.process.backend import ProcessBackend
from wotbench.runner.deployment.components import DeviceRun
from wotbench.runner.sut_restart import Restarts
from wotbench.runner.teardown.cleanup import kill_processes

# a server that ignores SIGTERM and has a child of its own (as webdis has its redis); no braces:
# they would be placeholders of the command
SERVER = ("import os, signal, subprocess, sys, time; "
          "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
          "child = subprocess.Popen(['sleep', '30']); "
          "print(os.getpid(), child.pid, flush=True); time.sleep(30)")


def _gone(pid: int) -> bool:
    """No process, or a zombie (it ended; its parent has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] == "Z"
    except OSError:
        return True


def _server(tmp_path: Path) -> DeviceRun:
    return DeviceRun(name="srv-0", id=0, group="srv", role="device", address="127.0.0.1",
                     cpuset="0", resources=None, log_dir=tmp_path, stdout=tmp_path / "srv-0.out",
                     program=Program(command=[sys.executable, "-c", SERVER]),
                     program_key="devices[0].server")


def _started_pids(out: Path, timeout_s: float = 10.0) -> tuple[int, int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        words = out.read_text().split() if out.exists() else []
        if len(words) == 2:
            return int(words[0]), int(words[1])
        time.sleep(0.01)
    raise AssertionError(f"{out} never named the server's pids")


def test_process_backend_restarts_the_whole_tree_with_the_same_command(tmp_path):
    b = ProcessBackend("r", tmp_path, log=lambda msg: None)
    d = _server(tmp_path)
    b.prepare_programs({d.program_key: d.program})
    try:
        b.start_devices([d])
        first, first_child = _started_pids(d.stdout)
        assert b.pid(d.name) == first

        t = time.monotonic()
        assert b.restart(d, grace_s=0.3) is True   # bound to the thread that restarted it
        assert time.monotonic() - t >= 0.25         # it ignored SIGTERM: killed after the grace
        assert _gone(first) and _gone(first_child)   # the whole tree, its child too

        again, _ = _started_pids(d.stdout)
        assert again != first and b.pid(d.name) == again and b.exit_code(d.name) is None
        kept = d.stdout.with_name(d.stdout.name + ".before-restart")
        assert kept.read_text().split() == [str(first), str(first_child)]   # its earlier output
    finally:   # SIGKILL at once: the server ignores SIGTERM, and its child must go too
        p = b.procs.get(d.name)
        if p is not None:
            kill_processes(process_tree(p.pid), grace_s=0)
        b.cleanup()


def test_process_backend_refuses_to_restart_what_it_never_started(tmp_path):
    b = ProcessBackend("r", tmp_path, log=lambda msg: None)
    with pytest.raises(ProcessLookupError, match="srv-0 has no process"):
        b.restart(_server(tmp_path), grace_s=1)


class _Exits:
    """The backend's exit event stream: dockerd reports the restart's stop a moment later."""

    def __init__(self):
        self.codes: dict[str, int] = {}


class _Container:
    def __init__(self, exits: _Exits, name: str):
        self.exits, self.name, self.timeouts = exits, name, []

    def restart(self, timeout):
        self.timeouts.append(timeout)
        self.exits.codes[self.name] = 143   # the "die" event of its stop


def test_docker_backend_restarts_the_container_and_takes_back_its_stop(tmp_path):
    b = DockerBackend(client=None, run_id="r", log=lambda msg: None)
    b.exits = _Exits()
    b.exits.codes["other"] = 1   # another component's real exit stays
    c = b.ctr["srv-0"] = _Container(b.exits, "srv-0")

    assert b.restart(_server(tmp_path), grace_s=2.6) is False   # dockerd holds it
    assert c.timeouts == [3]                    # whole seconds, as the engine takes them
    assert b.exits.codes == {"other": 1} and b.exit_code("srv-0") is None


def test_docker_backend_refuses_a_pod_member_and_a_container_it_never_created(tmp_path):
    b = DockerBackend(client=None, run_id="r", log=lambda msg: None)
    with pytest.raises(ProcessLookupError, match="srv-0 has no container"):
        b.restart(_server(tmp_path), grace_s=1)
    b.pod_of["srv-0"] = "pod-0"
    with pytest.raises(ValueError, match="srv-0 runs in pod pod-0"):
        b.restart(_server(tmp_path), grace_s=1)


class _Backend:
    """A backend whose restarted server runs for ``runs`` exit_code polls."""

    def __init__(self, bound: bool, runs: int):
        self.bound, self.runs, self.restarted = bound, runs, []

    def restart(self, device, grace_s):
        self.restarted.append((device.name, grace_s))
        return self.bound

    def exit_code(self, name):
        self.runs -= 1
        return None if self.runs >= 0 else 0


@pytest.mark.parametrize("bound", [True, False])
def test_restarts_holds_its_thread_only_while_a_server_bound_to_it_runs(tmp_path, bound):
    backend = _Backend(bound, runs=2)
    r = Restarts(backend, {"srv-0": _server(tmp_path)})
    r.stop_and_start("srv-0", 1.5)
    assert backend.restarted == [("srv-0", 1.5)]
    r.hold(["srv-0"])
    # bound: polled until it exited (2 polls running, the third saw the exit); else never
    assert backend.runs == (-1 if bound else 2)
