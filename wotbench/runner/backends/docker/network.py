"""Per-run user-defined bridge networks with fixed addresses.

A Linux bridge accepts at most 1024 ports (BR_MAX_PORTS), so one bridge cannot carry more than
~1000 containers. The configured subnet is therefore cut into /22 blocks (1024 addresses, at
most 1021 usable once the network, broadcast and gateway addresses are taken): a block can never
hold more endpoints than a bridge has ports. One internal bridge is created per block that holds
at least one device; gateways (GE, CD-GE) join every bridge, each with a fixed address at the
top of the block. A subnet narrower than /22 is used whole, as a single bridge.

The device addresses themselves come from the configuration (``wotbench.config.schema``, which uses
the layout of :mod:`wotbench.deploy.addressing`); this module only checks that they fit and groups them
by block. Addresses that are consecutive across a block boundary cannot work (the boundary
falls on a block's broadcast and network address); :func:`bridge_address` is the layout that
fits (``wotbench.deploy.addressing.host_address``).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from wotbench.deploy.addressing import BLOCK_PREFIX, host_address
from wotbench.errors import ConfigError, EnvironmentProblem

MAX_BRIDGE_PORTS = 1024


def bridge_address(subnet: str, index: int) -> str:
    """Address of device ``index`` (0-based) in the multi-bridge layout (wotbench.deploy.addressing)."""
    return host_address(subnet, index)


@dataclass
class NetBlock:
    name: str
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    devices: dict[str, str] = field(default_factory=dict)      # component -> ip
    gateways: dict[str, str] = field(default_factory=dict)     # GE name -> ip on this block


@dataclass
class NetworkPlan:
    run_id: str
    subnet: ipaddress.IPv4Network
    blocks: list[NetBlock]

    def endpoints(self, component: str) -> dict[str, str]:
        """network name -> ip for every network ``component`` is attached to."""
        out = {}
        for b in self.blocks:
            if component in b.devices:
                out[b.name] = b.devices[component]
            if component in b.gateways:
                out[b.name] = b.gateways[component]
        return out


def plan_networks(run_id: str, subnet: str, devices: dict[str, str],
                  gateways: list[str]) -> NetworkPlan:
    """Group ``devices`` (name -> ipv4) into bridge blocks and give each gateway an address."""
    try:
        net = ipaddress.ip_network(subnet, strict=True)
    except ValueError as e:
        raise ConfigError(f"network.subnet: {e}") from None
    if net.version != 4:
        raise ConfigError("network.subnet: only IPv4 subnets are supported")
    prefix = max(net.prefixlen, BLOCK_PREFIX)
    blocks: dict[ipaddress.IPv4Network, NetBlock] = {}
    used: set[ipaddress.IPv4Address] = set()
    problems = []
    for name, ip_s in devices.items():
        ip = ipaddress.ip_address(ip_s)
        if ip not in net:
            problems.append(f"devices: address {ip} of {name} is outside network.subnet {net}")
            continue
        block_net = ipaddress.ip_network(f"{ip}/{prefix}", strict=False)
        if block_net not in blocks:
            idx = len(blocks)
            blocks[block_net] = NetBlock(f"wb-{run_id}-net{idx}", block_net,
                                         next(block_net.hosts()))
        b = blocks[block_net]
        if ip in (block_net.network_address, block_net.broadcast_address, b.gateway):
            problems.append(f"devices: address {ip} of {name} is reserved in {block_net} "
                            "(network, broadcast or bridge gateway of a bridge block; more than "
                            "~1000 devices need the per-block layout of "
                            "wotbench.deploy.addressing, used by wotbench.deploy.resolve.device_addresses)")
        if ip in used:
            problems.append(f"devices: address {ip} is used twice")
        used.add(ip)
        b.devices[name] = str(ip)
    for b in blocks.values():
        free = (ip for ip in reversed(list(b.subnet.hosts()))
                if ip not in used and ip != b.gateway)
        for ge in gateways:
            ip = next(free, None)
            if ip is None:
                problems.append(f"network.subnet: block {b.subnet} has no free address left "
                                f"for {ge}; use a wider subnet or fewer devices per block")
                break
            used.add(ip)
            b.gateways[ge] = str(ip)
        ports = len(b.devices) + len(b.gateways)
        if ports > MAX_BRIDGE_PORTS - 1:
            problems.append(f"network: {ports} endpoints on one bridge exceeds the Linux limit "
                            f"of {MAX_BRIDGE_PORTS} ports")
    if problems:
        raise ConfigError(problems)
    return NetworkPlan(run_id, net, sorted(blocks.values(), key=lambda b: b.subnet))


def create_networks(client, plan: NetworkPlan, labels: dict[str, str]) -> list:
    """Create one internal bridge per block (no route out of the host: the load stays local)."""
    import docker.errors
    import docker.types

    nets = []
    for b in plan.blocks:
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
            subnet=str(b.subnet), gateway=str(b.gateway))])
        try:
            nets.append(client.networks.create(
                b.name, driver="bridge", internal=True, check_duplicate=True, ipam=ipam,
                labels=labels, options={"com.docker.network.driver.mtu": "1500"}))
        except docker.errors.APIError as e:   # e.g. another network holds the range
            raise EnvironmentProblem(
                f"network.subnet: Docker cannot create the bridge {b.name} for {b.subnet}: "
                f"{e.explanation or e}; another network may use that range (docker network "
                "inspect), or choose another network.subnet") from None
    return nets


# candidates for a run's subnet when the configured default is taken (RFC 1918, /16 each)
CANDIDATES = [f"172.{b}.0.0/16" for b in range(16, 32)] + [f"10.{b}.0.0/16" for b in range(200, 256)]


def subnets_in_use(client) -> list[tuple[str, ipaddress.IPv4Network]]:
    """(network name, subnet) of every Docker network with an IPv4 IPAM subnet."""
    out = []
    for n in client.networks.list():
        for c in ((n.attrs.get("IPAM") or {}).get("Config") or []):
            try:
                net = ipaddress.ip_network(c.get("Subnet", ""), strict=False)
            except ValueError:
                continue
            if net.version == 4:
                out.append((n.name, net))
    return out


def overlapping(subnet: str, taken: list[tuple[str, ipaddress.IPv4Network]]
                ) -> tuple[str, ipaddress.IPv4Network] | None:
    """The first network whose subnet overlaps ``subnet``, or None."""
    want = ipaddress.ip_network(subnet)
    return next(((name, net) for name, net in taken if net.overlaps(want)), None)


def free_subnet(subnet: str, taken: list[tuple[str, ipaddress.IPv4Network]]) -> str | None:
    """A candidate at least as large as ``subnet`` that overlaps nothing in ``taken``."""
    size = ipaddress.ip_network(subnet).num_addresses
    for cand in CANDIDATES:
        net = ipaddress.ip_network(cand)
        if net.num_addresses >= size and overlapping(cand, taken) is None:
            return cand if net.num_addresses == size else str(
                next(net.subnets(new_prefix=ipaddress.ip_network(subnet).prefixlen)))
    return None


def subnet_taken_message(subnet: str, blocker: tuple[str, ipaddress.IPv4Network]) -> str:
    name, net = blocker
    fix = ("choose another network.subnet (or leave the key out: the run then picks a free one), "
           "or `wotbench clean`, which removes it -- or, when Docker kept it with a stale "
           "endpoint, says that only a daemon restart frees it" if name.startswith("wb-")
           else f"choose another network.subnet, or remove it: docker network rm {name}")
    return f"network.subnet: {subnet} overlaps Docker network {name} ({net}); {fix}"

