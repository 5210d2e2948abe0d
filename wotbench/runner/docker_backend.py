"""Docker backend: FROM scratch images, per-run internal bridges, least-privilege containers."""
from __future__ import annotations

import signal as _signal
from pathlib import Path

from wotbench.runner import cleanup, containers, images, network
from wotbench.runner.components import DeviceRun, GeRun

# in-container paths of the bind mounts
RES_IN, LOGS_IN, TRACE_IN, OUT_IN = "/resources.csv", "/logs", "/trace.csv", "/out"
# CFS weight of the GE containers (default 1024). Where the plan must share a GE's core with
# the OS and the harness (hosts with < 4 cores), a sleeping GE that wakes for its next send then
# preempts the harness, collectl and dockerd instead of queueing behind them. Needs no privilege.
GE_CPU_SHARES = 8192


class DockerBackend:
    name = "docker"
    own_cgroup = True

    def __init__(self, client, run_id: str, log=print):
        self.client, self.run_id, self.log = client, run_id, log
        self.images: dict[str, str] = {}
        self.net_plan: network.NetworkPlan | None = None
        self.ctr: dict[str, object] = {}
        self.labels = {containers.RUN_LABEL: run_id}

    def prepare(self, binaries: dict[str, Path]) -> None:
        self.images = images.ensure_images(self.client, binaries, self.log)

    def setup_network(self, subnet: str, devices: dict[str, str], gateways: list[str]) -> None:
        self.net_plan = network.plan_networks(self.run_id, subnet, devices, gateways)
        network.create_networks(self.client, self.net_plan, self.labels)

    def network_record(self) -> list[dict]:
        return [{"name": b.name, "subnet": str(b.subnet), "devices": len(b.devices),
                 "gateways": b.gateways} for b in self.net_plan.blocks] if self.net_plan else []

    def _run(self, spec: containers.Spec, start: bool = True):
        c = containers.create(self.client, self.run_id, spec)
        self.ctr[spec.name] = c
        if start:
            c.start()
        return c

    def start_device(self, d: DeviceRun) -> None:
        self._run(containers.Spec(
            name=d.name, role=d.role, image=self.images["wot-device"],
            command=d.args(RES_IN, LOGS_IN, None), cpuset=d.cpuset,
            networks=self.net_plan.endpoints(d.name),
            binds={d.resources: (RES_IN, "ro"), d.log_dir: (LOGS_IN, "rw")},
            cpu_quota=d.cpu_quota, memory_mb=d.memory_mb, pids_limit=64 + d.threads))

    def create_ge(self, g: GeRun) -> None:
        self._run(containers.Spec(
            name=g.name, role=g.role, image=self.images["gateway-emulator"],
            command=g.args(TRACE_IN, OUT_IN), cpuset=str(g.cpu),
            networks=self.net_plan.endpoints(g.name),
            binds={g.trace: (TRACE_IN, "ro"), g.out_dir: (OUT_IN, "rw")},
            memory_mb=None, pids_limit=64, cpu_shares=GE_CPU_SHARES), start=False)

    def start_ge(self, g: GeRun) -> None:
        self.ctr[g.name].start()

    def pid(self, name: str) -> int | None:
        """The running container's pid; None if it is not running or was never created."""
        c = self.ctr.get(name)
        if c is None:
            return None
        c.reload()
        return c.attrs.get("State", {}).get("Pid") or None

    def exit_code(self, name: str) -> int | None:
        return containers.exit_state(self.ctr[name])[1]

    def created(self, name: str) -> bool:
        return name in self.ctr

    def describe_exit(self, name: str) -> str:
        status, code, oom = containers.exit_state(self.ctr[name])
        return f"container exited with {code}" + (" (OOM-killed: raise memory_mb)" if oom else "")

    def exited(self, names: set[str]) -> dict[str, int]:
        """Exit codes of the components in ``names`` that are no longer running (one API call)."""
        out = {}
        for c in self.client.containers.list(all=True, filters={
                "label": f"{containers.RUN_LABEL}={self.run_id}", "status": "exited"}):
            comp = c.labels.get(containers.COMPONENT_LABEL)
            if comp in names:
                out[comp] = c.attrs.get("State", {}).get("ExitCode")
        return out

    def signal(self, name: str, sig: int) -> None:
        import docker.errors
        try:
            self.ctr[name].kill(signal=_signal.Signals(sig).name)
        except docker.errors.APIError:
            pass  # not running (any more)

    def wait(self, name: str, timeout: float) -> int | None:
        import requests.exceptions
        try:
            return self.ctr[name].wait(timeout=timeout).get("StatusCode")
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return None

    def save_output(self, name: str, path: Path) -> None:
        text = containers.logs_tail(self.ctr[name], lines=200)
        if text:
            path.write_text(text)

    def cleanup(self) -> dict:
        self.ctr.clear()
        return cleanup.remove_run(self.client, self.run_id, self.log)
