"""Which device groups run in the wot-fleet engine (``devices[].engine``), and why not.

The engine (docs/CONTRACTS.md §3b) hosts thousands of devices in one process: one epoll loop
per device core, each device its own UDP endpoint, with Observe, block-wise transfer and
app-level impairments as a wot-device has them. It does not have every feature of a
wot-device yet; a group that needs one is refused with ``engine: fleet`` (naming the key and
the reason) and stays in processes with ``engine: auto``.

``auto`` keeps a group with an explicit ``per_container`` (a pod size) in processes, and
chooses the engine only for a run with more than
``AUTO_MIN_DEVICES`` devices. That is above the largest run the process form has carried on
this 2-core host (1 100 devices with 0 testbed loss, docs/SCALE.md), so ``auto`` never moves a
config that runs today as processes into the engine; until the process-vs-engine comparison
(docs/FLEET.md "Fidelity") says where the two agree, the engine is only the default where
processes cannot go at all. Lower it when that comparison shows agreement at smaller sizes.

Layout of a fleet group (:mod:`wotbench.deploy.pods` asks :func:`fleet_size`): its devices are
split evenly over ``ceil(count / per_container)`` fleets (``auto``: as many devices as one
process may open sockets on the host, at most MAX_FLEET_PER_CONTAINER), named
``<group>-fleet<j>`` (never a device name: those end in ``-<digits>``). On Docker each fleet is
one container with one address on the run's network, its devices on ports 5683, 5684, ...;
on the process backend (a loopback subnet) each device has its own 127.S.x.y address on port
5683, because every run on the host shares loopback's port space.
"""
from __future__ import annotations

import ipaddress
import math
from typing import Literal

from wotbench.config.connected import CONNECTED_PROTOCOLS
from wotbench.config.schema import MAX_FLEET_PER_CONTAINER, Config, DeviceGroup

Engine = Literal["process", "fleet"]
AUTO_MIN_DEVICES = 1200     # see the module docstring: above the process form's measured ceiling


def fleet_name(group: str, index: int) -> str:
    """Name of fleet ``index`` (0-based) of ``group``: its container, process and log directory."""
    return f"{group}-fleet{index}"


def unsupported(cfg: Config, i: int, g: DeviceGroup) -> list[str]:
    """What keeps group ``i`` out of the engine: ``"key: reason"`` each (empty: it may run there)."""
    k = f"devices[{i}]"
    if g.protocol in CONNECTED_PROTOCOLS:   # their own rules: wotbench.config.connected.check
        return []
    out = []
    if g.server is not None:
        out.append(f"{k}.server: a third-party server runs as its own program, not in the engine")
    if g.external is not None:
        out.append(f"{k}.external: external endpoints are not started by WoTbench")
    if g.protocol != "coap":
        out.append(f"{k}.protocol: {g.protocol}: the engine speaks CoAP only")
    if g.network is not None and cfg.network.backend in ("netem", "pumba"):
        out.append(f"{k}.network: network.backend {cfg.network.backend} acts on a container's "
                   "interface, which a fleet's devices share; the engine impairs each device "
                   "itself with network.backend app (or auto)")
    if g.cpu_quota is not None:
        out.append(f"{k}.cpu_quota: a fleet's devices share one process; a per-device CPU quota "
                   "cannot be applied")
    if cfg.dtls.enabled:
        out.append("dtls.enabled: the engine has no DTLS yet")
    return out


def engine_of(cfg: Config, i: int) -> Engine:
    """The engine group ``i`` runs in (``engine: auto`` decided, see the module docstring)."""
    g = cfg.devices[i]
    if g.engine != "auto":
        return g.engine
    if unsupported(cfg, i, g) or g.per_container != "auto":   # a pod size: the process form
        return "process"
    return "fleet" if cfg.total_devices > AUTO_MIN_DEVICES else "process"


def is_fleet(cfg: Config, i: int) -> bool:
    return engine_of(cfg, i) == "fleet"


def problems(cfg: Config) -> list[str]:
    """``engine: fleet`` on a group the engine cannot carry: every reason, each naming its key."""
    return [f"devices[{i}].engine: fleet refused, {why}" for i, g in enumerate(cfg.devices)
            if g.engine == "fleet" for why in unsupported(cfg, i, g)]


def most_per_fleet(g: DeviceGroup) -> int:
    """At most this many devices in one of the group's engines: ``per_container`` (set by the
    backend from the host's file-descriptor limit when ``auto``: fleet_capacity.size_fleets)."""
    return MAX_FLEET_PER_CONTAINER if g.per_container == "auto" else int(g.per_container)


def fleets_of(count: int, most: int = MAX_FLEET_PER_CONTAINER) -> int:
    """How many fleets carry a group of ``count`` devices, at most ``most`` each."""
    return max(1, math.ceil(count / most))


def fleet_size(count: int, most: int = MAX_FLEET_PER_CONTAINER) -> int:
    """Devices per fleet (the last one may hold fewer): an even split."""
    return math.ceil(count / fleets_of(count, most))


def own_addresses(subnet: str) -> bool:
    """Does each fleet device get its own address (loopback: the process backend)?"""
    return ipaddress.ip_network(subnet).is_loopback
