"""Process backend: the same run with local processes instead of containers.

For hosts without Docker (or ``backend: process``). Devices listen on loopback addresses
127.a.b.c (the host part of their configured address, so 172.28.0.10 -> 127.0.0.10; all of
127/8 is loopback on Linux) and every process is pinned with ``sched_setaffinity`` to its plan
cpuset. When run as root, the programs drop to uid/gid 65534. Children get the parent-death
signal SIGTERM (a SIGKILLed harness leaves nothing running) and the environment variable
``WOTBENCH_RUN=<run id>`` (``wotbench clean`` finds them by it). Not enforced here:
``cpu_quota`` and ``memory_mb`` (no per-process cgroups); the run records a warning.
"""
from __future__ import annotations

import ctypes
import ipaddress
import os
import signal as _signal
import subprocess
from pathlib import Path

from wotbench.plan import parse_cpuset
from wotbench.errors import ConfigError
from wotbench.runner.cleanup import PROCESS_ENV, kill_processes
from wotbench.runner.components import DeviceRun, GeRun
from wotbench.runner.containers import NOBODY

PR_SET_PDEATHSIG = 1


def loopback_address(ip: str, subnet: str) -> str:
    net = ipaddress.ip_network(subnet, strict=False)
    host = int(ipaddress.ip_address(ip)) - int(net.network_address)
    if not 0 < host < 2 ** 24 - 1:
        raise ConfigError(f"devices: address {ip} has no loopback equivalent in 127.0.0.0/8")
    return str(ipaddress.ip_address(int(ipaddress.ip_address("127.0.0.0")) + host))


def child_setup(cpus: set[int]):
    """preexec_fn: pin to ``cpus`` and get SIGTERM when the harness dies (even SIGKILLed)."""
    def setup():
        if cpus:
            os.sched_setaffinity(0, cpus)
        try:  # undo the harness's own nice (needs root or CAP_SYS_NICE; else all stay equal)
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError:
            pass
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, _signal.SIGTERM, 0, 0, 0)
        except Exception:
            pass
    return setup


def _others_can_reach(path: Path) -> bool:
    """Can an unrelated uid traverse every directory down to ``path``?"""
    for p in [path, *path.parents]:
        try:
            if not p.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


class ProcessBackend:
    name = "process"
    own_cgroup = False

    def __init__(self, run_id: str, run_dir: Path, log=print):
        self.run_id, self.run_dir, self.log = run_id, run_dir, log
        self.bins: dict[str, Path] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.pending: dict[str, tuple[list[str], set[int], Path]] = {}
        self.drop = os.geteuid() == 0 and _others_can_reach(run_dir)
        if os.geteuid() == 0 and not self.drop:
            log(f"process backend: {run_dir} is not reachable for uid {NOBODY} (a parent "
                "directory lacks o+x); the programs run as root")

    def prepare(self, binaries: dict[str, Path]) -> None:
        self.bins = dict(binaries)

    def setup_network(self, subnet: str, devices: dict[str, str], gateways: list[str]) -> None:
        for name, ip in devices.items():
            if not ipaddress.ip_address(ip).is_loopback:
                raise ConfigError(f"devices: {name} has non-loopback address {ip} in the "
                                  "process backend")

    def network_record(self) -> list[dict]:
        return [{"name": "loopback", "subnet": "127.0.0.0/8"}]

    def _spawn(self, name: str, argv: list[str], cpus: set[int], out: Path) -> None:
        env = {"PATH": "/usr/bin:/bin", PROCESS_ENV: self.run_id}
        kw = dict(user=NOBODY, group=NOBODY, extra_groups=[]) if self.drop else {}
        with open(out, "wb") as f:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                cwd="/", start_new_session=True, preexec_fn=child_setup(cpus), **kw)

    def start_device(self, d: DeviceRun) -> None:
        argv = [str(self.bins["wot-device"])] + d.args(str(d.resources), str(d.log_dir),
                                                       f"{d.address}:{d.port}")
        self._spawn(d.name, argv, set(parse_cpuset(d.cpuset)), d.log_dir / "stdout.log")

    def create_ge(self, g: GeRun) -> None:
        argv = [str(self.bins["gateway-emulator"])] + g.args(str(g.trace), str(g.out_dir))
        self.pending[g.name] = (argv, {g.cpu}, g.out_dir / "stdout.log")

    def start_ge(self, g: GeRun) -> None:
        self._spawn(g.name, *self.pending.pop(g.name))

    def pid(self, name: str) -> int | None:
        p = self.procs.get(name)
        return p.pid if p else None

    def created(self, name: str) -> bool:
        return name in self.procs or name in self.pending

    def exit_code(self, name: str) -> int | None:
        p = self.procs.get(name)
        if p is None:
            return None
        rc = p.poll()
        return None if rc is None else (128 - rc if rc < 0 else rc)

    def describe_exit(self, name: str) -> str:
        return f"process exited with {self.exit_code(name)}"

    def exited(self, names: set[str]) -> dict[str, int]:
        out = {}
        for n in names:
            rc = self.exit_code(n)
            if rc is not None:
                out[n] = rc
        return out

    def signal(self, name: str, sig: int) -> None:
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass

    def wait(self, name: str, timeout: float) -> int | None:
        p = self.procs.get(name)
        if p is None:
            return None
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.exit_code(name)

    def save_output(self, name: str, path: Path) -> None:
        pass  # stdout/stderr already go to <log dir>/stdout.log

    def cleanup(self) -> dict:
        alive = [p.pid for p in self.procs.values() if p.poll() is None]
        if alive:
            kill_processes(alive, grace_s=3.0)
        for p in self.procs.values():
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        n = len(alive)
        self.procs.clear()
        return {"processes": n}
