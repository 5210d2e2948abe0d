"""Can the gateway emulator open ``gateways.clients`` sockets? Checked before anything starts:
each client endpoint is one UDP socket, i.e. one file descriptor and one ephemeral port of the
GE's network namespace. The GE checks the same itself (``gateway-emulator/src/limits.c``, exit
2), but by then the devices are up; here the run stops first, naming the key, the limit and
the fix."""
from __future__ import annotations

import resource
from pathlib import Path
from typing import Optional

from wotbench.config.schema import Config
from wotbench.errors import ConfigError
from wotbench.runner.backends.docker.scalelimits import dockerd_nofile

FD_MARGIN = 64    # the GE's own files and sockets besides the clients' (limits.c FD_MARGIN)
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_range(path: Path = PORT_RANGE) -> Optional[tuple[int, int]]:
    try:
        lo, hi = (int(x) for x in path.read_text().split()[:2])
        return lo, hi
    except (OSError, ValueError):
        return None


def problems(clients: int, nofile_hard: Optional[int],
             ports: Optional[tuple[int, int]]) -> list[str]:
    out = []
    need = clients + FD_MARGIN
    if nofile_hard is not None and nofile_hard < need:
        out.append(f"gateways.clients: {clients} clients need {need} file descriptors in the "
                   f"gateway emulator, but its hard RLIMIT_NOFILE is {nofile_hard}; raise it "
                   f"(ulimit -Hn {need} as root before the run, or LimitNOFILE= of the Docker "
                   "daemon) or use fewer clients")
    if ports is not None and clients > ports[1] - ports[0] + 1:
        out.append(f"gateways.clients: {clients} clients need {clients} source ports, but the "
                   f"ephemeral port range {ports[0]}-{ports[1]} has {ports[1] - ports[0] + 1}; "
                   "widen it (sysctl net.ipv4.ip_local_port_range=\"1024 65000\") or use fewer "
                   "clients")
    return out


def check(cfg: Config, docker: bool) -> None:
    """Raise ConfigError (exit 2) when the GE cannot open the configured client sockets."""
    if cfg.gateways.clients is None:
        return
    hard = dockerd_nofile(hard=True) if docker else resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        hard = None
    found = problems(cfg.gateways.clients, hard, port_range())
    if found:
        raise ConfigError(found)
