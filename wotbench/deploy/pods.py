"""Devices per container ("pods"): which container each device runs in, and on which port.

Starting a container costs the container runtime about 0.27 CPU-s on a 2-core host (dockerd,
containerd, the shim; measured for `make bench-scale`), whatever the parallelism, so a thousand
one-device containers need minutes. A pod is one container with one network namespace holding
several wot-device processes (``wot-device --pod``), each its own process, threads, resource
file and device log, listening on its own port of the pod's address.

``devices[].per_container`` sets the pod size of a group; ``auto`` keeps one device per
container (the paper's layout) up to AUTO_MAX_CONTAINERS devices and beyond that packs each
eligible group so that the run needs about AUTO_MAX_CONTAINERS containers. Not eligible (always
one per container): third-party servers and external endpoints (wotbench.config.byo), and a group with
``network:`` impairments applied by tc (netem/pumba act on a container's link, so a rate limit
would be shared by the pod's devices); the ``app`` impairment backend is per device and allows
pods.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from wotbench.config.schema import MAX_PER_CONTAINER, Config, DeviceGroup
from wotbench.deploy import fleet
from wotbench.deploy import addressing
from wotbench.config.schema import device_name
from wotbench.deploy.memo import per_config


AUTO_MAX_CONTAINERS = 128   # ~35 CPU-s of container starts here: 1000 devices ready in < 70 s


@dataclass(frozen=True)
class Slot:
    """Where one device runs."""
    container: str        # its container: its own name, or its pod's
    address_index: int    # position in the address layout (wotbench.deploy.addressing.host_address)
    port_offset: int      # added to the base port: 0 .. pod size - 1


def pod_name(group: str, index: int) -> str:
    """Container name of pod ``index`` (0-based) of ``group``; never a device name, which
    always ends in ``-<digits>``."""
    return f"{group}-pod{index}"


def eligible(cfg: Config, g: DeviceGroup) -> bool:
    """May this group share containers (see the module docstring)?"""
    return not ineligible_why(cfg, g)


def ineligible_why(cfg: Config, g: DeviceGroup) -> str:
    """Why this group runs one device per container ('' when it may share)."""
    if g.third_party:
        return ("third-party servers and external endpoints run one per container "
                "(or are not started)")
    if g.network is not None and cfg.network.backend != "app":
        return ("its network impairments are applied by tc to a container's link, which a pod's "
                "devices would share; set network.backend: app (per device) or per_container: 1")
    return ""


def group_sizes(cfg: Config) -> list[int]:
    """Devices per container of every group, ``auto`` resolved (a fleet group: per fleet,
    :mod:`wotbench.deploy.fleet`)."""
    in_fleets = [fleet.is_fleet(cfg, i) for i in range(len(cfg.devices))]
    total = sum(g.count for g, f in zip(cfg.devices, in_fleets) if not f)   # process devices
    auto = 1 if total <= AUTO_MAX_CONTAINERS else min(math.ceil(total / AUTO_MAX_CONTAINERS),
                                                      MAX_PER_CONTAINER)
    out = []
    for g, in_fleet in zip(cfg.devices, in_fleets):
        k = g.per_container
        if in_fleet:
            out.append(fleet.fleet_size(g.count, fleet.most_per_fleet(g)))
        else:
            out.append(int(k) if k != "auto" else (auto if eligible(cfg, g) else 1))
    return out


def fleet_address_room(cfg: Config, sizes: list[int], in_fleets: list[bool]) -> int:
    """On a loopback subnet: how many addresses the engines' devices may take, what the subnet
    holds besides the other groups' addresses and the CD node's (at least 1)."""
    others = sum(math.ceil(g.count / k) for g, k, f in zip(cfg.devices, sizes, in_fleets) if not f)
    return max(1, addressing.capacity(cfg.network.subnet) - others - 1)


@per_config
def slots(cfg: Config) -> list[Slot]:
    """Every device's slot, in config order (the order of ``Config.device_names``). A fleet
    device on a loopback subnet (the process backend) has an address of its own, port 5683;
    when the subnet has fewer addresses than the engines have devices (a /16 holds 64 256),
    the next devices take the engine devices' addresses again, in order, on the next port
    (5684, ...): each device still its own endpoint, and no other component's address."""
    out: list[Slot] = []
    index = 0
    own = fleet.own_addresses(cfg.network.subnet)
    sizes = group_sizes(cfg)
    in_fleets = [fleet.is_fleet(cfg, gi) for gi in range(len(cfg.devices))]
    room = fleet_address_room(cfg, sizes, in_fleets) if own and any(in_fleets) else 0
    fleet_addresses: list[int] = []     # the address of each engine device of the first lap
    fleet_k = 0                         # engine devices so far
    for gi, (g, k) in enumerate(zip(cfg.devices, sizes)):
        in_fleet = in_fleets[gi]
        for i in range(g.count):
            j, pos = divmod(i, k)
            alone = k == 1 and not in_fleet
            name = fleet.fleet_name(g.group, j) if in_fleet else \
                device_name(g.group, i) if alone else pod_name(g.group, j)
            if in_fleet and own:
                if fleet_k < room:
                    fleet_addresses.append(index)
                    out.append(Slot(container=name, address_index=index, port_offset=0))
                    index += 1
                else:                   # the subnet is used up: the next port, same order
                    lap, again = divmod(fleet_k, room)
                    out.append(Slot(container=name, address_index=fleet_addresses[again],
                                    port_offset=lap))
                fleet_k += 1
                continue
            out.append(Slot(container=name, address_index=index, port_offset=pos))
            if pos == k - 1 or i == g.count - 1:
                index += 1
    return out


def address_count(cfg: Config) -> int:
    """Addresses the devices use (the CD node takes the next one)."""
    s = slots(cfg)
    return max(x.address_index for x in s) + 1 if s else 0   # (engine devices may reuse some)


def containers(cfg: Config) -> int:
    """How many containers the devices need."""
    return len({s.container for s in slots(cfg)})
