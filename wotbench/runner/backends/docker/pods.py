"""Pods in the Docker backend: several wot-devices in one container (wotbench.deploy.pods).

A pod's container runs ``wot-device --pod -- ARGS -- ARGS ...``: one process per device, each
with its own resource file and log directory mounted at ``/res/<device>.csv`` and
``/logs/<device>``, listening on its own port of the pod's address. Its limits are the sum of
its devices' limits; its cpuset is the union of theirs (the plan puts a pod on one core when
devices are pinned)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

from wotbench.deploy.plan import cpuset_str, parse_cpuset
from wotbench.runner.deployment.components import DeviceRun
from wotbench.runner.backends.docker.containers import Spec
from wotbench.runner.prepare.dtlskey import KEY_IN

RES_DIR_IN, LOGS_DIR_IN = "/res", "/logs"
PIDS_PER_DEVICE = 64       # as a one-device container: the device's threads plus headroom


def group_by_container(devices: Sequence[DeviceRun]) -> dict[str, list[DeviceRun]]:
    """Container name -> the devices it runs, in order."""
    out: dict[str, list[DeviceRun]] = {}
    for d in devices:
        out.setdefault(d.container, []).append(d)
    return out


def is_pod(container: str, members: Sequence[DeviceRun]) -> bool:
    return len(members) > 1 or members[0].name != container


def pod_spec(container: str, members: Sequence[DeviceRun], image: str,
             networks: dict[str, str]) -> Spec:
    command = ["--pod"]
    binds: dict[Path, tuple[str, str]] = {}
    for d in members:
        res_in, logs_in = f"{RES_DIR_IN}/{d.name}.csv", f"{LOGS_DIR_IN}/{d.name}"
        command += ["--", *d.args(res_in, logs_in, f"0.0.0.0:{d.port}", KEY_IN)]
        binds[d.resources] = (res_in, "ro")
        binds[d.log_dir] = (logs_in, "rw")
        if d.dtls:   # one key file for the run, mounted read-only once
            binds[d.dtls.key_file] = (KEY_IN, "ro")
    cores = sorted({c for d in members for c in parse_cpuset(d.cpuset)})
    quotas = [d.cpu_quota for d in members if d.cpu_quota]
    memory = [d.memory_mb for d in members if d.memory_mb]
    return Spec(name=container, role="device", image=image, command=command,
                cpuset=cpuset_str(cores), networks=networks, binds=binds,
                cpu_quota=sum(quotas) if quotas else None,
                memory_mb=sum(memory) if memory else None,
                pids_limit=sum(PIDS_PER_DEVICE + d.threads for d in members))


def member_pids(init_pid: int, proc: Path = Path("/proc")) -> dict[str, int]:
    """Device name -> pid of the pod's device processes (children of the pod's ``--pod``
    process, each started with ``--name NAME``; the pod process itself is the container's init
    or, under the run's warden, the warden's child)."""
    out: dict[str, int] = {}
    for c in _children(init_pid, proc):
        argv = _argv(proc / str(c) / "cmdline")
        if argv[1:2] == ["--pod"]:
            out.update(member_pids(c, proc))
        elif "--name" in argv[:-1]:
            out[argv[argv.index("--name") + 1]] = c
    return out


def _children(pid: int, proc: Path) -> list[int]:
    try:
        return [int(c) for c in (proc / str(pid) / "task" / str(pid) / "children").read_text().split()]
    except OSError:
        return []


def _argv(cmdline: Path) -> list[str]:
    try:
        return [a.decode("utf-8", "replace") for a in cmdline.read_bytes().split(b"\0")]
    except OSError:
        return []


def reported_exit(pod_output: str, device: str) -> int:
    """The exit code a pod reported for ``device`` on its stderr (pod.c: "device NAME exited
    with code N ..."); -1 when the output does not say."""
    found = re.findall(rf"device {re.escape(device)} exited with code (\d+)", pod_output)
    return int(found[-1]) if found else -1
