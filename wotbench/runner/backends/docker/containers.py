"""Device and gateway containers with least privilege and the plan's CPU placement."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from wotbench.labels import COMPONENT_LABEL, NOBODY, ROLE_LABEL, RUN_LABEL
from wotbench.runner.deployment.lease import LEASE_FILE, LEASE_LABEL, warden_argv

# Every container runs the static binary as nobody, without capabilities, on a read-only root.
LEAST_PRIVILEGE = dict(read_only=True, user=f"{NOBODY}:{NOBODY}", cap_drop=["ALL"],
                       security_opt=["no-new-privileges"], privileged=False)


WARDEN_IN, LEASE_IN = "/.wb/warden", "/.wb/lease"


@dataclass(frozen=True)
class Warden:
    """The run's keeper (runner/deployment/lease.py): its static binary and the lease directory, both
    mounted read-only; the container's entrypoint becomes the warden, its command the
    image's own entrypoint and arguments."""
    binary: Path
    lease_dir: Path


@dataclass
class Spec:
    name: str                      # component name (device name, ge-0, cd-ge, cd-node)
    role: str                      # device | ge | cd-node | cd-ge
    image: str
    command: list[str]
    cpuset: str                    # "1" or "1-3"
    networks: dict[str, str]       # network name -> fixed ipv4
    binds: dict[Path, tuple[str, str]] = field(default_factory=dict)  # host -> (path, ro|rw)
    cpu_quota: float | None = None  # fraction of one core
    memory_mb: int | None = None
    pids_limit: int = 64
    cpu_shares: int | None = None   # CFS weight (default 1024)
    cgroup_parent: str | None = None  # None: the daemon's (/docker with cgroupfs)
    network_mode: str | None = None  # "host": the host's namespace, instead of ``networks``
    tmpfs: dict[str, str] = field(default_factory=dict)   # path -> mount options (writable)
    warden: Optional[Warden] = None
    nofile: Optional[int] = None     # RLIMIT_NOFILE (soft = hard); None: dockerd's default


_ENTRYPOINTS: dict[str, tuple[list[str], list[str]]] = {}


def image_argv(client, image: str, command: list[str]) -> list[str]:
    """What the image would run with ``command``: its entrypoint, then ``command`` (or its
    default command when ``command`` is empty)."""
    if image not in _ENTRYPOINTS:
        cfg = client.images.get(image).attrs.get("Config") or {}
        _ENTRYPOINTS[image] = (list(cfg.get("Entrypoint") or []), list(cfg.get("Cmd") or []))
    entrypoint, default = _ENTRYPOINTS[image]
    return entrypoint + (list(command) or default)


def kept(client, image: str, command: list[str], binds: dict, labels: dict,
         warden: Optional[Warden]) -> dict:
    """Keyword arguments that put the container under the warden (nothing without one)."""
    if warden is None:
        return {"command": command}
    binds[warden.binary] = (WARDEN_IN, "ro")
    binds[warden.lease_dir] = (LEASE_IN, "ro")
    labels[LEASE_LABEL] = str(warden.lease_dir / LEASE_FILE)
    return {"entrypoint": warden_argv(WARDEN_IN, f"{LEASE_IN}/{LEASE_FILE}"),
            "command": image_argv(client, image, command)}


def container_name(run_id: str, component: str) -> str:
    return f"wb-{run_id}-{component}"


def create(client, run_id: str, spec: Spec):
    """Create (not start) the container; it joins every network of ``spec`` with its fixed IP."""
    nets = list(spec.networks.items())
    kwargs = dict(LEAST_PRIVILEGE)
    if spec.network_mode:   # e.g. a GE that must reach endpoints outside the run's bridges
        kwargs["network_mode"], nets = spec.network_mode, []
    else:
        first_net, first_ip = nets[0]
        kwargs["network"] = first_net
        kwargs["networking_config"] = {
            first_net: client.api.create_endpoint_config(ipv4_address=first_ip)}
    if spec.cpu_quota:
        kwargs["nano_cpus"] = int(spec.cpu_quota * 1e9)
    if spec.cpu_shares:
        kwargs["cpu_shares"] = spec.cpu_shares
    if spec.cgroup_parent:
        kwargs["cgroup_parent"] = spec.cgroup_parent
    if spec.tmpfs:   # writable scratch space; the root stays read-only
        kwargs["tmpfs"] = dict(spec.tmpfs)

    if spec.memory_mb:
        kwargs["mem_limit"] = f"{int(spec.memory_mb)}m"
        kwargs["memswap_limit"] = f"{int(spec.memory_mb)}m"
    if spec.nofile:   # e.g. a wot-fleet engine: one socket per device
        from docker.types import Ulimit
        kwargs["ulimits"] = [Ulimit(name="nofile", soft=spec.nofile, hard=spec.nofile)]
    labels = {RUN_LABEL: run_id, ROLE_LABEL: spec.role, COMPONENT_LABEL: spec.name}
    binds = dict(spec.binds)
    kwargs.update(kept(client, spec.image, spec.command, binds, labels, spec.warden))
    c = client.containers.create(
        spec.image, name=container_name(run_id, spec.name), detach=True, labels=labels,
        cpuset_cpus=spec.cpuset, pids_limit=spec.pids_limit + (1 if spec.warden else 0),
        volumes={str(h): {"bind": p, "mode": m} for h, (p, m) in binds.items()},
        log_config={"type": "json-file", "config": {"max-size": "1m"}},
        init=False, auto_remove=False, **kwargs)
    for net_name, ip in nets[1:]:
        client.networks.get(net_name).connect(c, ipv4_address=ip)
    return c


def exit_state(container) -> tuple[str, int | None, bool]:
    """(status, exit code or None, oom_killed), refreshing the container's attributes."""
    container.reload()
    st = container.attrs.get("State", {})
    code = st.get("ExitCode") if st.get("Status") in ("exited", "dead") else None
    return st.get("Status", "?"), code, bool(st.get("OOMKilled"))


def logs_tail(container, lines: int = 20) -> str:
    try:
        return container.logs(stdout=True, stderr=True, tail=lines).decode("utf-8", "replace")
    except Exception:  # the container may be gone already
        return ""
