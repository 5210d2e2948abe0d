"""Docker backend: FROM scratch images, per-run internal bridges, least-privilege containers.

One Docker client serves the whole run (``DockerKind.connect``): the doctor checks, the images,
the containers and networks, and Pumba's tc sidecar image all use it.
"""
from __future__ import annotations

import os
import signal as _signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

from wotbench.deploy import fleet, fleet_capacity, pods
from wotbench.config.byo import Program
from wotbench.config.schema import Config
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.netimpair import DeviceTarget
from wotbench.netimpair.tcimage import ensure_tc_image
from wotbench.rundir import BridgeRecord, RunDir
from wotbench.runner.teardown import cleanup, leftovers
from wotbench.runner.deployment import serverfiles, thirdparty
from wotbench.runner.deployment.lease import LEASE_FILE, LEASE_LABEL
from wotbench.runner.backends.docker import containers
from wotbench.runner.backends.docker import pods as docker_pods
from wotbench.runner.backends.docker import hostimage
from wotbench.runner.backends.docker import images
from wotbench.runner.backends.docker import network
from wotbench.runner.backends.docker import scalelimits
from wotbench.runner.backends.interface import Log
from wotbench.runner.prepare.binaries import WARDEN
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.deployment.fleets import FleetRun
from wotbench.runner.prepare.dtlskey import KEY_IN
from wotbench.runner.during.hogspec import HogSpec
from wotbench.labels import COMPONENT_LABEL, NOBODY, RUN_LABEL
from wotbench.monitor.recorder import container_cgroup_dirs

# in-container paths of the bind mounts
RES_IN, LOGS_IN, TRACE_IN, OUT_IN = "/resources.csv", "/logs", "/trace.csv", "/out"
JOURNAL_IN = "/journal"
# CFS weight of the GE containers (default 1024). Where the plan must share a GE's core with
# the OS and the harness (hosts with < 4 cores), a sleeping GE that wakes for its next send then
# preempts the harness, collectl and dockerd instead of queueing behind them. Needs no privilege.
GE_CPU_SHARES = 8192
# ... and that weight only counts against the GE's siblings in the cgroup hierarchy: under the
# daemon's /docker (weight 1024 at the top) it weighed the GEs against the other containers,
# while every host task on the GE core (the sandbox's agent at nice -10 = 9 548, dockerd,
# kworkers) outweighed all of /docker together and held the core for tens of milliseconds
# (docs/FLEET.md "The GEs' late sends"). So a GE's cgroup goes to the top, beside the host's
# tasks, where the daemon keeps its containers under /docker (ge_cgroup_parent).
GE_CGROUP_PARENT = "/"
CFS_PERIOD_US = 100_000   # Docker's default CFS period (cpu_quota fault); 1 ms is the quota's floor
PARALLEL = 8     # API calls per container are slow (dockerd work each): a few at once
DAEMON_BACK_WAIT_S = 60.0   # cleanup after a daemon restart: how long to wait for it
POD_REPORT_GRACE_S = 2.0   # a pod member gone without the pod's report: how long to wait for the
                           # pod's own exit event before calling it a member's death (code -1)

T = TypeVar("T")


def docker_client(timeout: int = 30):
    """A pinged Docker client, or raise the SDK's exception."""
    import docker
    client = docker.from_env(timeout=timeout)
    client.ping()
    return client


def in_parallel(fn: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
    """``fn`` over ``items`` with at most PARALLEL calls at once; results in order, the first
    exception re-raised after every call has ended."""
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = [pool.submit(fn, x) for x in items]
    return [f.result() for f in futures]


def hog_container_kwargs(spec: HogSpec, image: str, *, run_id: str,
                         client=None, warden: Optional[containers.Warden] = None) -> dict[str, Any]:
    """Keyword arguments for docker SDK ``client.containers.run``: detached, unprivileged, no
    network, pinned to the episode's cores, memory limited to its buffers; under the run's
    warden when there is one."""
    binds: dict[Path, tuple[str, str]] = {}
    labels = {**spec.labels, COMPONENT_LABEL: spec.name}
    kept = containers.kept(client, image, spec.argv[1:], binds, labels, warden)
    return {
        "image": image, **kept,
        "volumes": {str(h): {"bind": p, "mode": m} for h, (p, m) in binds.items()},
        "name": containers.container_name(run_id, spec.name),
        "detach": True, "user": f"{NOBODY}:{NOBODY}", "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"], "network_mode": "none", "read_only": True,
        "cpuset_cpus": spec.cpuset, "mem_limit": spec.memory_limit_bytes,
        "labels": labels, "stop_signal": "SIGTERM",
    }


class DockerHog:
    """A running hog container."""

    def __init__(self, container):
        self.container = container

    def stop(self, timeout: float) -> bytes:
        c = self.container
        c.reload()
        if c.status == "running":
            c.kill(signal="SIGTERM")
        c.wait(timeout=timeout)
        return c.logs(stdout=True, stderr=False)


def _signal_name(code: int) -> str:
    """", killed by SIGKILL" for 137 and the like."""
    try:
        return f", killed by {_signal.Signals(code - 128).name}" if code > 128 else ""
    except ValueError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)     # a pod reaps its devices at once: no zombie lingers
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class ExitEvents:
    """Exit codes of this run's containers, pushed by dockerd on one event stream: the runner
    learns that a device died without listing the containers every second (at a thousand
    devices that listing alone kept dockerd busy on the core the gateway emulators share)."""

    def __init__(self, client, run_id: str):
        self.codes: dict[str, int] = {}
        self.lost: Optional[str] = None     # the stream ended without close(): dockerd went away
        self._closing = False
        self._stream = client.events(decode=True, filters={
            "type": "container", "event": "die", "label": f"{RUN_LABEL}={run_id}"})
        self._thread = threading.Thread(target=self._read, name="wotbench-exits", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for ev in self._stream:
                attrs = (ev.get("Actor") or {}).get("Attributes") or {}
                comp = attrs.get(COMPONENT_LABEL)
                if comp:
                    self.codes[comp] = int(attrs.get("exitCode", -1))
        except Exception as e:  # noqa: BLE001 - the stream was closed, or dockerd went away
            why = f"{e.__class__.__name__}"
        else:
            why = "its event stream ended"
        if not self._closing:
            self.lost = f"the Docker daemon went away during the run ({why})"

    def close(self) -> None:
        self._closing = True
        try:
            self._stream.close()
        except Exception:  # noqa: BLE001 - already closed
            pass


class DockerKind:
    name = "docker"
    runtime = "Docker"
    ge_start_lead_s = 0.4
    needs_docker = True
    container_namespaces = True

    def connect(self) -> Any:
        return docker_client()

    def adapt(self, cfg: Config, connection: Any) -> tuple[Config, list[str]]:
        """A subnet no existing Docker network uses: the configured one when it is free; when
        it is taken, a free one if the user did not choose it, else a clear stop."""
        in_fleets = sum(g.count for i, g in enumerate(cfg.devices) if fleet.is_fleet(cfg, i))
        devices, ctrs = cfg.total_devices - in_fleets + 1, pods.containers(cfg) + 1   # + CD node
        short = scalelimits.too_small(devices, ctrs, scalelimits.host_limits(), in_fleets)
        if short:
            raise EnvironmentProblem(scalelimits.message(devices, ctrs, short, in_fleets))
        cfg, notes = fleet_capacity.size_fleets(cfg, self.fleet_nofile_hard())
        taken = network.subnets_in_use(connection)
        blocker = network.overlapping(cfg.network.subnet, taken)
        if blocker is None:
            return cfg, notes
        if "subnet" in cfg.network.model_fields_set:
            raise ConfigError(network.subnet_taken_message(cfg.network.subnet, blocker))
        free = network.free_subnet(cfg.network.subnet, taken)
        if free is None:
            raise EnvironmentProblem(network.subnet_taken_message(cfg.network.subnet, blocker)
                                     + "; no free private /16 was found either")
        out = cfg.model_copy(deep=True)
        out.network.subnet = free
        return out, notes + [f"network.subnet {cfg.network.subnet} overlaps Docker network "
                             f"{blocker[0]} ({blocker[1]}): this run uses {free}"]

    def fleet_nofile_hard(self) -> Optional[int]:
        """dockerd's hard limit: runc cannot give a container more (without CAP_SYS_RESOURCE
        in the daemon's namespace it cannot raise it at all)."""
        return scalelimits.dockerd_nofile(hard=True)

    def impairment_options(self, connection: Any) -> dict[str, dict[str, Any]]:
        """Pumba's tc sidecar image is built with the run's client."""
        if connection is None:
            return {}
        return {"pumba": {"image_builder": partial(ensure_tc_image, connection)}}

    def create(self, run_id: str, run_dir: Path, log: Log, connection: Any) -> "DockerBackend":
        return DockerBackend(connection or docker_client(), run_id, log, run_dir)


class DockerBackend:
    name = "docker"

    def __init__(self, client, run_id: str, log: Log = print, run_dir: Optional[Path] = None):
        self.client, self.run_id, self.log = client, run_id, log
        self.run_dir = run_dir
        self.warden: Optional[containers.Warden] = None   # prepare(): every container's keeper
        self.images: dict[str, str] = {}
        self.programs: dict[str, tuple[str, bool]] = {}   # config key -> (image, its own entrypoint)
        self.net_plan: Optional[network.NetworkPlan] = None
        self.ctr: dict[str, Any] = {}
        self._ge_parent: Optional[str] = None   # _ge_cgroup_parent, decided once
        self.pod_of: dict[str, str] = {}   # device -> its pod's container (wotbench.deploy.pods)
        self._pids: dict[str, int] = {}    # device -> its process in its pod
        self._member_codes: dict[str, int] = {}   # pod devices whose process died (pod goes on)
        self._dead_since: dict[str, float] = {}   # ... first seen gone, not yet reported
        self.labels = {RUN_LABEL: run_id}
        self.exits: Optional[ExitEvents] = None

    # -- describe -----------------------------------------------------------------------
    def other_runs(self) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            for c in self.client.containers.list(filters={"label": RUN_LABEL}):
                rid = (c.labels or {}).get(RUN_LABEL)
                if rid and rid != self.run_id:
                    found[rid] = found.get(rid, 0) + 1
        except Exception as e:   # the verdict says what it could not see
            self.log(f"could not list other runs' containers: {e}")
        for _, rid in cleanup.leftover_processes():
            if rid != self.run_id:
                found[rid] = found.get(rid, 0) + 1
        return found

    def remove_abandoned(self) -> list[str]:
        try:
            return [r.run_id for r in leftovers.remove_abandoned(self.client, self.log,
                                                                 keep=self.run_id)]
        except Exception as e:   # noqa: BLE001 - a leftover never blocks the next run
            self.log(f"could not check for leftovers of earlier runs: {e}")
            return []

    def container_info(self, container_id: str) -> Optional[tuple[str, dict[str, str]]]:
        try:
            c = self.client.containers.get(container_id)
        except Exception:
            return None
        return c.name, dict(c.labels or {})

    def describe(self) -> dict[str, Any]:
        try:
            return {"docker": self.client.version().get("Version")}
        except Exception:  # noqa: BLE001 - a fact for the record, never a reason to fail
            return {}

    # -- build --------------------------------------------------------------------------
    def prepare(self, binaries: dict[str, Path]) -> None:
        binaries = dict(binaries)
        warden = binaries.pop(WARDEN.name, None)   # mounted into containers, not an image
        if warden is not None and self.run_dir is not None:
            self.warden = containers.Warden(warden, RunDir(self.run_dir).lease_dir)
            self.labels[LEASE_LABEL] = str(self.warden.lease_dir / LEASE_FILE)   # networks too
        self.images = images.ensure_images(self.client, binaries, self.log)

    def prepare_programs(self, programs: dict[str, Program]) -> None:
        """A local image as it is, or a host command packed into a FROM scratch image."""
        for key, p in programs.items():
            if p.image:
                thirdparty.check_image(self.client, key, p.image)
                self.programs[key] = (p.image, True)
            else:
                path = thirdparty.find_command(key, p)
                self.programs[key] = (hostimage.pack_program(self.client, path, self.log), False)

    # -- network ------------------------------------------------------------------------
    def setup_network(self, subnet: str, devices: dict[str, str], gateways: list[str]) -> None:
        self.exits = self.exits or ExitEvents(self.client, self.run_id)   # before any container
        plan = network.plan_networks(self.run_id, subnet, devices, gateways)
        network.create_networks(self.client, plan, self.labels)
        self.net_plan = plan    # run.json records networks that exist, not planned ones

    def network_record(self) -> list[BridgeRecord]:
        return [BridgeRecord(name=b.name, subnet=str(b.subnet), devices=len(b.devices),
                             gateways=b.gateways) for b in self.net_plan.blocks] \
            if self.net_plan else []

    # -- components ---------------------------------------------------------------------
    def _create(self, spec: containers.Spec):
        spec.warden = self.warden
        c = containers.create(self.client, self.run_id, spec)
        self.ctr[spec.name] = c
        return c

    def _start_device(self, d: DeviceRun) -> None:
        if d.program is not None:
            self._start_program(d)
            return
        binds = {d.resources: (RES_IN, "ro"), d.log_dir: (LOGS_IN, "rw")}
        if d.dtls:   # the key as a read-only file; only its path is in the container config
            binds[d.dtls.key_file] = (KEY_IN, "ro")
        self._create(containers.Spec(
            name=d.name, role=d.role, image=self.images["wot-device"],
            command=d.args(RES_IN, LOGS_IN, None, KEY_IN), cpuset=d.cpuset,
            networks=self.net_plan.endpoints(d.name),
            binds=binds,
            cpu_quota=d.cpu_quota, memory_mb=d.memory_mb, pids_limit=64 + d.threads)).start()

    def _start_program(self, d: DeviceRun) -> None:
        """A third-party server or proxy: same placement, limits and least privilege as ours;
        a packed host command's image has the program as its entrypoint."""
        image, own_entrypoint = self.programs[d.program_key]
        argv = d.program_args(own_entrypoint, d.address, in_container=True)
        binds, tmpfs = {}, {}
        if d.files is not None:   # its rendered config (read-only) and a tmpfs to write in
            binds[d.files.config] = (d.files.config_in(True), "ro")
            tmpfs[serverfiles.SCRATCH_IN] = serverfiles.SCRATCH_TMPFS
        self._create(containers.Spec(
            name=d.name, role=d.role, image=image,
            command=argv if own_entrypoint else argv[1:], cpuset=d.cpuset,
            networks=self.net_plan.endpoints(d.name), binds=binds, tmpfs=tmpfs,
            cpu_quota=d.cpu_quota, memory_mb=d.memory_mb, pids_limit=64 + d.threads)).start()

    def _start_pod(self, container: str, members: Sequence[DeviceRun]) -> None:
        self._create(docker_pods.pod_spec(container, members, self.images["wot-device"],
                                          self.net_plan.endpoints(container))).start()

    def start_devices(self, devices: Sequence[DeviceRun]) -> None:
        units = list(docker_pods.group_by_container(devices).items())
        for container, members in units:
            if docker_pods.is_pod(container, members):
                self.pod_of.update({d.name: container for d in members})

        def start(unit: tuple[str, list[DeviceRun]]) -> None:
            container, members = unit
            if members[0].name in self.pod_of:
                self._start_pod(container, members)
            else:
                self._start_device(members[0])
        in_parallel(start, units)

    def start_fleets(self, fleets: Sequence[FleetRun]) -> None:
        """One container per engine on the run's network at the fleet's address, its devices
        on ports of that address; the run's resource files mounted once, read-only."""
        if not fleets:
            return
        image = self.images["wot-fleet"]
        res_dir = RunDir(self.run_dir).resources_dir if self.run_dir else None

        def start(f: FleetRun) -> None:
            import docker.errors
            binds = {f.dir: (fleet_runs.FLEET_DIR_IN, "rw")}
            if res_dir is not None:
                binds[res_dir] = (fleet_runs.RES_DIR_IN, "ro")
            try:
                self._create(containers.Spec(
                    name=f.name, role="fleet", image=image,
                    command=fleet_runs.command(f, in_container=True), cpuset=f.cpuset,
                    networks=self.net_plan.endpoints(f.name), binds=binds,
                    memory_mb=-(-f.req.memory_bytes // 2**20), pids_limit=f.req.pids,
                    nofile=f.req.nofile)).start()
            except docker.errors.APIError as e:   # e.g. a nofile limit runc may not set
                raise EnvironmentProblem(f"{f.name}: Docker could not start the wot-fleet "
                                         f"container ({f.req.nofile} file descriptors, "
                                         f"{f.req.memory_bytes // 2**20} MiB): "
                                         f"{e.explanation or e}") from None
        in_parallel(start, list(fleets))

    def _unit(self, name: str) -> str:
        """The container a component runs in: its pod's, else its own."""
        return self.pod_of.get(name, name)

    def create_ge(self, g: GeRun) -> None:
        binds = {g.trace: (TRACE_IN, "ro"), g.out_dir: (OUT_IN, "rw")}
        if g.dtls:
            binds[g.dtls.key_file] = (KEY_IN, "ro")
        journal = None
        if g.journal is not None:   # its directory on the host's tmpfs (runner/deployment/journal.py)
            binds[g.journal.parent] = (JOURNAL_IN, "rw")
            journal = f"{JOURNAL_IN}/{g.journal.name}"
        self._create(containers.Spec(
            name=g.name, role=g.role, image=self.images["gateway-emulator"],
            command=g.args(TRACE_IN, OUT_IN, KEY_IN, journal), cpuset=str(g.cpu),
            networks=self.net_plan.endpoints(g.name),
            network_mode="host" if g.host_network else None,
            binds=binds,
            memory_mb=None, pids_limit=64, cpu_shares=GE_CPU_SHARES,
            cgroup_parent=self._ge_cgroup_parent()))

    def _ge_cgroup_parent(self) -> Optional[str]:
        """GE_CGROUP_PARENT where the run's containers so far landed under the daemon's default
        /docker (cgroupfs), else None: a daemon with its own cgroup-parent (the emulated
        cluster's nodes) or the systemd driver keeps its layout."""
        if self._ge_parent is None:
            first = next(iter(self.ctr.values()), None)
            dirs = container_cgroup_dirs(first.id) if first is not None else {}
            self._ge_parent = GE_CGROUP_PARENT if any(
                d.parent.name == "docker" for d in dirs.values()) else ""
        return self._ge_parent or None

    def start_ge(self, g: GeRun) -> None:
        self.ctr[g.name].start()

    def launch_hog(self, spec: HogSpec) -> DockerHog:
        kw = hog_container_kwargs(spec, self.images["hog"], run_id=self.run_id,
                                  client=self.client, warden=self.warden)
        return DockerHog(self.client.containers.run(**kw))

    def impairment_targets(self, names: Sequence[str]) -> list[DeviceTarget]:
        return [DeviceTarget.from_container(n, self.ctr[self._unit(n)]) for n in names]

    # -- inspect ------------------------------------------------------------------------
    def cgroup(self, name: str) -> Optional[dict[str, Path]]:
        """The component's own cgroup; None for a device in a pod (its threads are sampled)."""
        c = self.ctr.get(name)
        return container_cgroup_dirs(c.id) if c is not None and name not in self.pod_of else None

    def _container_pid(self, container: str) -> Optional[int]:
        c = self.ctr.get(container)
        if c is None:
            return None
        c.reload()
        return c.attrs.get("State", {}).get("Pid") or None

    def pid(self, name: str) -> Optional[int]:
        """The running component's pid (a pod's device: its own process); None if it is not
        running or was never created."""
        if name not in self.pod_of:
            return self._container_pid(name)
        if name not in self._pids:
            init = self._container_pid(self.pod_of[name])
            self._pids.update(docker_pods.member_pids(init) if init else {})
        return self._pids.get(name)

    def exit_code(self, name: str) -> Optional[int]:
        unit = self._unit(name)
        if self.exits is not None and unit in self.exits.codes:
            return self.exits.codes[unit]
        return None if self.exits is not None else containers.exit_state(self.ctr[unit])[1]

    def created(self, name: str) -> bool:
        return self._unit(name) in self.ctr

    def describe_exit(self, name: str) -> str:
        if name in self._member_codes:
            code = self._member_codes[name]
            return (f"its process in pod {self.pod_of[name]} died"
                    + (f" (code {code}{_signal_name(code)})" if code >= 0 else "")
                    + "; its pod-mates went on")
        status, code, oom = containers.exit_state(self.ctr[self._unit(name)])
        return f"container exited with {code}" + (" (OOM-killed: raise memory_mb)" if oom else "")

    def exited(self, names: set[str]) -> dict[str, int]:
        """Exit codes of the components in ``names`` that are no longer running (from the
        event stream: no API call); a pod's exit is each of its devices', and a device whose
        process died in a pod that goes on (pod.c) has the code its pod reported."""
        codes = dict(self.exits.codes) if self.exits is not None else {}
        out = {n: codes[self._unit(n)] for n in names if self._unit(n) in codes}
        tails: dict[str, str] = {}   # one log read per pod per poll, however many are gone
        for n in names - out.keys():
            pid = self._pids.get(n)
            if pid is not None and n not in self._member_codes and not _alive(pid):
                pod = self.pod_of[n]
                if pod not in tails:
                    tails[pod] = containers.logs_tail(self.ctr[pod], lines=50)
                code = docker_pods.reported_exit(tails[pod], n)
                # no report yet: the whole pod may be going (killed: its exit event comes a
                # moment after its processes are gone), so its code is the container's; only
                # a pod still running POD_REPORT_GRACE_S later lost one member unreported
                first = self._dead_since.setdefault(n, time.monotonic())
                if code >= 0 or time.monotonic() - first >= POD_REPORT_GRACE_S:
                    self._member_codes[n] = code
            if n in self._member_codes:
                out[n] = self._member_codes[n]
        return out

    # -- control ------------------------------------------------------------------------
    def signal(self, name: str, sig: int) -> None:
        import docker.errors
        c = self.ctr.get(self._unit(name))
        if c is None:
            return
        try:
            c.kill(signal=_signal.Signals(sig).name)
        except docker.errors.APIError:
            pass  # not running (any more)

    def _wait(self, name: str, timeout: float) -> Optional[int]:
        import requests.exceptions
        try:
            return self.ctr[name].wait(timeout=timeout).get("StatusCode")
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return None

    def _detach(self, names: Sequence[str]) -> None:
        """Disconnect running components from the run's networks one at a time. Docker 20.10
        releases a container's endpoints when it exits; hundreds exiting at once can lose a
        decrement of the network's endpoint count, and that network then "has active
        endpoints" until the daemon restarts. Detached first, the exits release nothing."""
        import docker.errors
        if self.net_plan is None:
            return
        for n in names:
            for net in self.net_plan.endpoints(n):
                try:
                    self.client.api.disconnect_container_from_network(self.ctr[n].id, net)
                except docker.errors.APIError:
                    pass   # not running, or not connected: the exit releases it as before

    def stop(self, names: Sequence[str], grace_s: float) -> dict[str, Optional[int]]:
        """SIGTERM and wait; a pod stops as one container, and its exit code is each of its
        devices' (the pod names a failing device on its output)."""
        names = [n for n in names if self._unit(n) in self.ctr]
        units = list(dict.fromkeys(self._unit(n) for n in names))
        self._detach(units)
        in_parallel(lambda u: self.signal(u, _signal.SIGTERM), units)
        deadline = time.monotonic() + grace_s
        if self.exits is None:  # no event stream: one wait call per container
            codes = dict(zip(units, in_parallel(
                lambda u: self._wait(u, max(0.1, deadline - time.monotonic())), units)))
        else:   # the exits arrive on the event stream: no API call per container
            codes = self.exits.codes
            while time.monotonic() < deadline and not all(u in codes for u in units):
                time.sleep(0.05)
        return {n: codes.get(self._unit(n)) for n in names}

    def restart(self, device: DeviceRun, grace_s: float) -> bool:
        """``container.restart``: the same container, command, cgroup and limits (Docker stops
        the container's whole process tree). The exit the event stream saw is the restart's,
        not the server's end: it is taken back. A device in a pod cannot restart alone."""
        name = device.name
        c = self._own_container(name, "restarting it would restart its pod-mates")
        c.restart(timeout=max(1, round(grace_s)))
        exits = self.exits
        end = time.monotonic() + 2
        while exits is not None and name not in exits.codes and time.monotonic() < end:
            time.sleep(0.02)
        if exits is not None:
            exits.codes.pop(name, None)
        return False   # the daemon holds it, not this thread

    def _own_container(self, name: str, in_pod: str):
        """The container of a component that has one to itself (a SUT fault acts on it alone);
        ValueError saying ``in_pod`` for a device in a pod."""
        if name in self.pod_of:
            raise ValueError(f"{name} runs in pod {self.pod_of[name]}: {in_pod}")
        c = self.ctr.get(name)
        if c is None:
            raise ProcessLookupError(f"{name} has no container")
        return c

    # -- the cpu_quota SUT fault: the container's own CFS quota -----------------------------
    def cpu_limit_unavailable(self) -> Optional[str]:
        return None   # the container's quota: nothing of this host's

    def prepare_cpu_limit(self, name: str) -> None:
        pass   # every container has its cgroup already

    def limit_cpu(self, name: str, cpus: float) -> None:
        """``container.update`` (docker.errors.APIError when the engine refuses, e.g. a
        container created with NanoCpus); a device in a pod cannot be limited alone."""
        c = self._own_container(name, "its quota would limit its pod-mates")
        c.update(cpu_period=CFS_PERIOD_US, cpu_quota=max(1000, int(cpus * CFS_PERIOD_US)))

    def release_cpu_limit(self, name: str) -> Optional[int]:
        return None   # the quota goes with the container; its throttling is not read

    def _daemon_answers(self, wait_s: float) -> bool:
        """Ping until the daemon answers (a restart takes seconds), at most ``wait_s``."""
        end = time.monotonic() + wait_s
        while True:
            try:
                self.client.ping()
                return True
            except Exception:  # noqa: BLE001 - connection refused while it restarts
                if time.monotonic() > end:
                    return False
                time.sleep(1.0)

    def runtime_lost(self, probe: bool = False,
                     error: Optional[BaseException] = None) -> Optional[str]:
        """From the event stream (no API call); ``probe``: after ``error``, also ask the daemon
        (a restarted one may answer again already: the error's own kind then tells)."""
        import requests.exceptions
        lost = self.exits.lost if self.exits is not None else None
        if lost is None and isinstance(error, requests.exceptions.ConnectionError):
            lost = f"the connection to the Docker daemon broke during the run ({error})"
        if lost is None and probe:
            try:
                self.client.ping()
            except Exception as e:  # noqa: BLE001 - any failure to answer is the finding
                lost = f"the Docker daemon does not answer ({e.__class__.__name__})"
        return lost

    def save_output(self, name: str, path: Path) -> None:
        text = containers.logs_tail(self.ctr[self._unit(name)], lines=200)
        if text:   # best effort: a full disk must not stop the cleanup (the failure names it)
            try:
                path.write_text(text)
            except OSError as e:
                self.log(f"{name}: its output could not be saved to {path} ({e.strerror})")

    def cleanup(self) -> dict[str, int]:
        self.ctr.clear()
        self.pod_of.clear()
        if not self._daemon_answers(DAEMON_BACK_WAIT_S):
            raise EnvironmentProblem(
                f"the Docker daemon did not answer within {DAEMON_BACK_WAIT_S:g} s; once it is "
                "back, `wotbench clean` removes what is left of this run (its components stop "
                "themselves: the run's lease is released)")
        try:
            return cleanup.remove_run(self.client, self.run_id, self.log)
        finally:
            if self.exits is not None:
                self.exits.close()
