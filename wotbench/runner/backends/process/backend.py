"""Process backend: the same run with local processes instead of containers.

For hosts without Docker (or ``backend: process``). Devices listen on loopback addresses
127.S.b.c (the host part of their configured address in the run's own 127.S.0.0/16 block, so
172.28.0.10 -> 127.0.0.10 for a run alone on the host; all of 127/8 is loopback on Linux; the
block is claimed per run, ``loopslot``) and every process is pinned with ``sched_setaffinity`` to its plan
cpuset. When run as root, the programs drop to uid/gid 65534. Children get the parent-death
signal SIGTERM (a SIGKILLed harness leaves nothing running) and the environment variable
``WOTBENCH_RUN=<run id>`` (``wotbench clean`` finds them by it). Not enforced here:
``cpu_quota`` and ``memory_mb`` (no per-process cgroups); the run records a warning.
"""
from __future__ import annotations

import ipaddress
import os
import signal as _signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from wotbench.config.byo import Program
from wotbench.config.schema import Config
from wotbench.deploy import fleet_capacity
from wotbench.errors import ConfigError
from wotbench.netimpair import DeviceTarget
from wotbench.deploy.plan import parse_cpuset
from wotbench.rundir import BridgeRecord
from wotbench.runner.deployment import thirdparty
from wotbench.runner.backends.interface import Log
from wotbench.runner.teardown.cleanup import kill_processes, leftover_processes
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.during.hogspec import HogSpec
from wotbench.labels import NOBODY, PROCESS_ENV, PROCESS_LEASE_ENV
from wotbench.procutil import child_setup, first_child, process_tree
from wotbench.rundir import RunDir
from wotbench.runner.backends.process import cpu_cgroup, loopslot
from wotbench.runner.prepare.binaries import WARDEN
from wotbench.runner.deployment.lease import LEASE_FILE, warden_argv


def loopback_address(ip: str, subnet: str) -> str:
    net = ipaddress.ip_network(subnet, strict=False)
    host = int(ipaddress.ip_address(ip)) - int(net.network_address)
    if not 0 < host < 2 ** 24 - 1:
        raise ConfigError(f"devices: address {ip} has no loopback equivalent in 127.0.0.0/8")
    return str(ipaddress.ip_address(int(ipaddress.ip_address("127.0.0.0")) + host))


def _others_can_reach(path: Path) -> bool:
    """Can an unrelated uid traverse every directory down to ``path``?"""
    for p in [path, *path.parents]:
        try:
            if not p.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _interpreter(path: Path) -> Optional[Path]:
    """The ``#!`` interpreter of a script (a venv's entry point names the venv's python)."""
    try:
        with open(path, "rb") as f:
            head = f.readline(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    parts = head[2:].decode(errors="replace").split()
    return Path(parts[0]) if parts and parts[0].startswith("/") else None


def _others_can_run(path: Path) -> bool:
    """Can an unrelated uid execute ``path`` (following links: every target on the way, and a
    script's interpreter, e.g. a venv's python linked to a pyenv under /root)?"""
    try:
        real = path.resolve()
        ok = _others_can_reach(path.parent) and _others_can_reach(real.parent) \
            and bool(real.stat().st_mode & 0o001)
    except OSError:
        return False
    interp = _interpreter(real) if ok else None
    return ok and (interp is None or _others_can_run(interp))


def hog_process_argv(spec: HogSpec, hog_path: str | Path) -> list[str]:
    """The hog's argv with the host binary instead of the in-image path."""
    return [str(hog_path)] + spec.argv[1:]


class ProcessHog:
    """A running hog process (in its own session: nothing else would ever stop it)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def stop(self, timeout: float) -> bytes:
        p = self.proc
        if p.poll() is None:
            p.send_signal(_signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:   # hung: it ignores SIGTERM
            p.kill()
            out, _ = p.communicate()
        return out or b""


class ProcessKind:
    name = "process"
    runtime = "local processes"
    ge_start_lead_s = 0.05
    needs_docker = False
    container_namespaces = False

    def connect(self) -> Any:
        return None     # nothing to reach: this host runs the programs itself

    def adapt(self, cfg: Config, connection: Any) -> tuple[Config, list[str]]:
        """Devices on loopback addresses of a block no other run on this host uses:
        172.28.0.10 -> 127.S.0.10."""
        cfg, sized = fleet_capacity.size_fleets(cfg, self.fleet_nofile_hard())
        block = loopslot.claim()
        cfg.network.subnet = loopslot.subnet(block)
        notes = ["process backend: cpu_quota and memory_mb are not enforced"] + sized
        if block:
            notes.append(f"process backend: another process-backend run holds 127.0.0.0/16; this "
                         f"run's devices listen in {cfg.network.subnet}")
        return cfg, notes

    def impairment_options(self, connection: Any) -> dict[str, dict[str, Any]]:
        return {}       # app-level impairments only: they need nothing of a runtime

    def fleet_nofile_hard(self) -> Optional[int]:
        """The harness's own hard limit: its children may raise their soft limit to it."""
        return fleet_capacity.own_nofile_hard()

    def create(self, run_id: str, run_dir: Path, log: Log, connection: Any) -> "ProcessBackend":
        return ProcessBackend(run_id, run_dir, log)


class ProcessBackend:
    name = "process"

    def __init__(self, run_id: str, run_dir: Path, log: Log = print):
        self.run_id, self.run_dir, self.log = run_id, run_dir, log
        self.bins: dict[str, Path] = {}
        self.programs: dict[str, Path] = {}     # config key -> third-party program on this host
        self.as_root: set[str] = set()          # ... those uid 65534 cannot run
        self.procs: dict[str, subprocess.Popen] = {}
        self.pending: dict[str, tuple[list[str], set[int], Path]] = {}
        self._pids: dict[str, int] = {}         # component -> its program (the warden's child)
        self.quotas: dict[str, cpu_cgroup.ProcessQuota] = {}   # cpu_quota faults' servers
        self.hosted: set[str] = set()           # devices served by another one's process
        self.lease = str(RunDir(run_dir).lease_dir / LEASE_FILE)
        self.subnet = "127.0.0.0/16"            # the run's loopback block (setup_network)
        self.drop = os.geteuid() == 0 and _others_can_reach(run_dir)
        if os.geteuid() == 0 and not self.drop:
            log(f"process backend: {run_dir} is not reachable for uid {NOBODY} (a parent "
                "directory lacks o+x); the programs run as root")

    def prepare(self, binaries: dict[str, Path]) -> None:
        self.bins = dict(binaries)

    def prepare_programs(self, programs: dict[str, Program]) -> None:
        self.programs = {key: thirdparty.find_command(key, p) for key, p in programs.items()}
        for key, path in self.programs.items():
            if self.drop and not _others_can_run(path):
                self.as_root.add(key)
                self.log(f"process backend: {key}: {path} cannot be run by uid {NOBODY} (its "
                         "file or a parent directory is closed to others); it runs as root")

    def setup_network(self, subnet: str, devices: dict[str, str], gateways: list[str]) -> None:
        self.subnet = subnet
        for name, ip in devices.items():
            if not ipaddress.ip_address(ip).is_loopback:
                raise ConfigError(f"devices: {name} has non-loopback address {ip} in the "
                                  "process backend")

    def network_record(self) -> list[BridgeRecord]:
        return [BridgeRecord(name="loopback", subnet=self.subnet)]

    def other_runs(self) -> dict[str, int]:
        """Other process-backend runs (their processes carry WOTBENCH_RUN); without a Docker
        client this backend cannot see other runs' containers (the monitor still sees their
        CPU on the run's cores, as plain containers)."""
        found: dict[str, int] = {}
        for _, rid in leftover_processes():
            if rid != self.run_id:
                found[rid] = found.get(rid, 0) + 1
        return found

    def container_info(self, container_id: str) -> Optional[tuple[str, dict[str, str]]]:
        return None

    def remove_abandoned(self) -> list[str]:
        return []   # a dead harness's children got the parent-death signal: none is left

    def describe(self) -> dict[str, Any]:
        return {}

    def _spawn(self, name: str, argv: list[str], cpus: set[int], out: Path,
               drop: bool = True, cwd: str = "/", nofile: Optional[int] = None) -> None:
        env = {"PATH": "/usr/bin:/bin", PROCESS_ENV: self.run_id, PROCESS_LEASE_ENV: self.lease}
        kw = dict(user=NOBODY, group=NOBODY, extra_groups=[]) if self.drop and drop else {}
        with open(out, "wb") as f:
            self.procs[name] = subprocess.Popen(
                self._kept(argv), stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                cwd=cwd, start_new_session=True, preexec_fn=child_setup(cpus, nofile), **kw)

    def _kept(self, argv: list[str]) -> list[str]:
        """Under the run's warden (runner/deployment/lease.py), which outlives no harness: it also gets the
        parent-death signal and forwards it."""
        warden = self.bins.get(WARDEN.name)
        return warden_argv(str(warden), self.lease) + argv if warden else argv

    def start_devices(self, devices: Sequence[DeviceRun]) -> None:
        # one by one, from this thread: the parent-death signal fires when the *spawning
        # thread* ends, so a worker thread would take the devices down with it
        for d in devices:
            if d.hosted_by:   # an HTTP Thing served by another device's process
                self.procs[d.name] = self.procs[d.hosted_by]
                self.hosted.add(d.name)
                continue
            if d.program is not None:   # a third-party server or proxy: its own command line
                argv = [str(self.programs[d.program_key])] + d.program_args(False, d.address)[1:]
            else:
                argv = [str(self.bins["wot-device"])] + d.args(
                    str(d.resources), str(d.log_dir), f"{d.address}:{d.port}",
                    str(d.dtls.key_file) if d.dtls else "")
            # a third-party command runs in the directory wotbench was started from, so its
            # relative paths mean what they meant to the user
            self._spawn(d.name, argv, set(parse_cpuset(d.cpuset)), d.stdout,
                        drop=d.program_key not in self.as_root,
                        cwd=os.getcwd() if d.program is not None else "/")

    def start_fleets(self, fleets: Sequence[FleetRun]) -> None:
        """Each engine a local process pinned to its cpuset, its devices on their own loopback
        addresses, RLIMIT_NOFILE raised to what it needs (fleet_capacity checked the hard
        limit before the run)."""
        for f in fleets:
            argv = fleet_runs.command(f, in_container=False, binary=str(self.bins["wot-fleet"]))
            self._spawn(f.name, argv, set(parse_cpuset(f.cpuset)), f.stdout, nofile=f.req.nofile)

    def create_ge(self, g: GeRun) -> None:
        argv = [str(self.bins["gateway-emulator"])] + g.args(
            str(g.trace), str(g.out_dir), str(g.dtls.key_file) if g.dtls else "",
            str(g.journal) if g.journal else None)
        self.pending[g.name] = (argv, {g.cpu}, g.stdout)

    def start_ge(self, g: GeRun) -> None:
        self._spawn(g.name, *self.pending.pop(g.name))

    def launch_hog(self, spec: HogSpec) -> ProcessHog:
        return ProcessHog(subprocess.Popen(
            self._kept(hog_process_argv(spec, self.bins["hog"])), stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={PROCESS_ENV: self.run_id, PROCESS_LEASE_ENV: self.lease},
            start_new_session=True, preexec_fn=child_setup(set(spec.cores))))

    def impairment_targets(self, names: Sequence[str]) -> list[DeviceTarget]:
        return [DeviceTarget(name=n, pid=self.pid(n)) for n in names]

    def cgroup(self, name: str) -> Optional[dict[str, Path]]:
        return None   # the process shares the harness's cgroup: account by its threads

    def pid(self, name: str) -> Optional[int]:
        """The component's program: the warden's child (the warden when there is none); None for
        a device served by another one's process (accounted once, as that one)."""
        p = self.procs.get(name)
        if p is None or name in self.hosted:
            return None
        if name not in self._pids and p.poll() is None:
            child = first_child(p.pid) if WARDEN.name in self.bins else None
            self._pids[name] = child or p.pid
        return self._pids.get(name, p.pid)

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

    def stop(self, names: Sequence[str], grace_s: float) -> dict[str, Optional[int]]:
        names = [n for n in names if n in self.procs]
        signalled: set[int] = set()
        for n in names:   # a process serving several devices (HTTP Things) signalled once
            if id(self.procs[n]) not in signalled:
                signalled.add(id(self.procs[n]))
                self.signal(n, _signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        out: dict[str, Optional[int]] = {}
        for n in names:
            try:
                self.procs[n].wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            out[n] = self.exit_code(n)
        return out

    def restart(self, device: DeviceRun, grace_s: float) -> bool:
        """The whole tree (the warden, the program and its children, e.g. webdis and its
        redis) stopped, then the device started again from the calling thread (its earlier
        output kept as ``<stdout>.before-restart``): the new process is bound to that thread."""
        warden = self.procs.get(device.name)
        if warden is None:
            raise ProcessLookupError(f"{device.name} has no process")
        if device.hosts or device.hosted_by:
            raise ProcessLookupError(f"{device.name} shares its process with other HTTP Things: "
                                     "restarting it would restart them all")
        # the warden stays a zombie until it is reaped below: kill_processes does not wait
        # on zombies; polled finely, the downtime is the restart's, not the poll's
        kill_processes(process_tree(warden.pid), grace_s, poll_s=0.01)
        warden.wait(timeout=5)   # reaped: its exit is the restart's, not a failure
        if device.stdout.exists():
            device.stdout.replace(device.stdout.with_name(device.stdout.name + ".before-restart"))
        self._pids.pop(device.name, None)   # the program's pid is the new one's
        self.start_devices([device])
        if device.name in self.quotas:   # a quota set before stays on the new process
            self.quotas[device.name].adopt(self._tree(device.name))
        return True

    def _tree(self, name: str) -> list[int]:
        pid = self.pid(name)
        return process_tree(pid) if pid is not None else []

    # -- the cpu_quota SUT fault: a cpu cgroup of the server's own (cpu_cgroup.py) ----------
    def cpu_limit_unavailable(self) -> Optional[str]:
        why = cpu_cgroup.unavailable()
        return None if why is None else (
            "the process backend changes a server's CPU quota in a cpu cgroup it creates, and "
            f"this host offers none: {why}; use backend: docker, or run as root on a host with "
            "cgroup v2's cpu controller or cgroup v1's cpu hierarchy")

    def prepare_cpu_limit(self, name: str) -> None:
        """The server's process tree moves into a cpu cgroup of its own (no limit yet)."""
        if name not in self.quotas:
            self.quotas[name] = cpu_cgroup.ProcessQuota(self.run_id, name)
            self.quotas[name].adopt(self._tree(name))

    def limit_cpu(self, name: str, cpus: float) -> None:
        q = self.quotas.get(name)
        if q is None:
            raise ProcessLookupError(f"{name}: no cpu cgroup was prepared for it")
        q.limit(cpus)

    def release_cpu_limit(self, name: str) -> Optional[int]:
        """Its throttling read, its processes back in the parent cgroup (a throttled server
        would stop slowly), the cgroup removed."""
        q = self.quotas.pop(name, None)
        if q is None:
            return None
        throttled = q.throttled()
        q.remove()
        return throttled

    def runtime_lost(self, probe: bool = False,
                     error: Optional[BaseException] = None) -> Optional[str]:
        return None   # no runtime between the harness and its processes

    def save_output(self, name: str, path: Path) -> None:
        pass  # stdout/stderr already went to the component's stdout file as it ran

    def cleanup(self) -> dict[str, int]:
        for name in list(self.quotas):   # a run that ended before the test's end
            self.release_cpu_limit(name)
        alive = sorted({p.pid for p in self.procs.values() if p.poll() is None})
        if alive:
            kill_processes(alive, grace_s=3.0)
        for p in {id(p): p for p in self.procs.values()}.values():
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        n = len(alive)
        self.procs.clear()
        loopslot.release()      # its devices are gone: the block is free for the next run
        return {"processes": n}
