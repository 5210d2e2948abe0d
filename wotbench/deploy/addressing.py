"""Address layout: the one place that turns (subnet, device index) into an IPv4 address (a
device's name is the config's, :func:`wotbench.config.schema.device_name`).

Used by ``wotbench.deploy.resolve.device_addresses`` / ``cd_node_address`` (trace generator,
runner) and ``wotbench.runner.backends.docker.network`` (bridges). A Linux bridge has at most
1024 ports, so a subnet wider than /22 is cut into /22 blocks, one bridge each:

- subnet /22 or narrower (one block): consecutive addresses from host offset 10 up to the
  address before the broadcast address (``.0`` network, ``.1`` bridge gateway, ``.2``-``.9``
  spare; the gateway emulators take free addresses from the top);
- wider subnet: in every /22 block positions 10 .. 10+DEVICES_PER_BLOCK-1 (10..1013), leaving
  1014..1022 for up to 9 gateway emulators and 1023 (broadcast) free. Device 1004 of a /16 is
  ``x.y.4.10``, device 2008 ``x.y.8.10``.

For up to 1004 devices both are "consecutive from .10", the layout of earlier versions.
"""
from __future__ import annotations

import ipaddress
from typing import Callable, Union

from wotbench.errors import ConfigError

COAP_PORT = 5683
COAPS_PORT = 5684                # coaps:// (DTLS), RFC 7252 §6.2
CD_NODE_NAME = "cd-node"         # the contention detector's device
CD_GROUP = "cd"
BLOCK_PREFIX = 22                # one bridge per /22 block (1024 addresses)
FIRST_DEVICE_OFFSET = 10         # host part of the first device in a block
DEVICES_PER_BLOCK = 1004         # multi-block subnets: positions 10..1013 of each block

Net = Union[str, ipaddress.IPv4Network]


def _net(subnet: Net) -> ipaddress.IPv4Network:
    return subnet if isinstance(subnet, ipaddress.IPv4Network) else ipaddress.ip_network(subnet)


def block_size(subnet: Net) -> int:
    """Addresses per bridge block: 1024, or the whole subnet when it is /22 or narrower."""
    return 2 ** (32 - max(_net(subnet).prefixlen, BLOCK_PREFIX))


def per_block(subnet: Net) -> int:
    """Device addresses per bridge block."""
    net = _net(subnet)
    if net.prefixlen >= BLOCK_PREFIX:      # one block: everything from .10 below the broadcast
        return max(net.num_addresses - FIRST_DEVICE_OFFSET - 1, 0)
    return DEVICES_PER_BLOCK


def capacity(subnet: Net) -> int:
    """How many device addresses (devices + CD node) ``subnet`` holds in this layout."""
    net = _net(subnet)
    return per_block(net) * (net.num_addresses // block_size(net))


def describe_capacity(subnet: Net) -> str:
    net = _net(subnet)
    if net.prefixlen >= BLOCK_PREFIX:
        return f"{capacity(net)} devices (host part from .{FIRST_DEVICE_OFFSET})"
    return (f"{capacity(net)} devices ({DEVICES_PER_BLOCK} per /{BLOCK_PREFIX} bridge block, "
            f"from offset {FIRST_DEVICE_OFFSET} of each block)")


def host_address(subnet: Net, index: int) -> str:
    """Address of device ``index`` (0-based; the CD node is index N) in ``subnet``."""
    return address_of(subnet)(index)


def address_of(subnet: Net) -> Callable[[int], str]:
    """:func:`host_address` for one subnet, its layout computed once (a run asks for every
    device's address: 250 000 calls of ipaddress arithmetic took tens of seconds)."""
    net = _net(subnet)
    n, size, room = per_block(net), block_size(net), capacity(net)
    base = int(net.network_address) + FIRST_DEVICE_OFFSET

    def address(index: int) -> str:
        if index < 0 or n == 0 or index >= room:
            raise ConfigError([f"network.subnet: {net} is too small for {index + 1} addresses; "
                               f"it has room for {describe_capacity(net)}"])
        block, pos = divmod(index, n)
        a = base + block * size + pos
        return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"
    return address
