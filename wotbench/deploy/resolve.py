"""Resolution: from a validated config to what a run deploys, on top of the schema
(:mod:`wotbench.config.schema`) and the placement (:mod:`wotbench.deploy.plan`).

- :func:`resolve` fills the contention detector's ``auto`` values
  (:func:`cd_module.sizing.resolve_cd`), ``devices[].engine``
  (:func:`wotbench.deploy.fleet.engine_of`) and ``gateways.wait`` from a placement plan;
- :func:`device_addresses` / :func:`cd_node_address`: every device's name, group, trace id and
  IPv4 address in ``network.subnet`` (layout: :mod:`wotbench.deploy.addressing`);
- :func:`dump_resolved` writes ``config.resolved.yaml``.
``backend: auto`` is left to the runner (it depends on whether Docker is reachable).
"""
from __future__ import annotations

import functools
import ipaddress
import typing
from pathlib import Path
from typing import Optional, Sequence

import yaml

from wotbench.config.schema import device_name
from wotbench.deploy.addressing import (CD_GROUP, CD_NODE_NAME, COAP_PORT, COAPS_PORT, address_of,
                                        host_address)
from wotbench.config.byo import split_endpoint
from wotbench.config.schema import Config
from wotbench.config import dtls as dtls_spec
from wotbench.deploy.fleet import engine_of
from wotbench.deploy.plan import Plan, make_plan
from cd_module.sizing import resolve_cd
from wotbench.deploy.memo import per_config
from wotbench.deploy.pods import address_count, slots
from wotbench.rundir import atomic

PROXY_NAME = "proxy"


def resolve(cfg: Config, plan: Optional[Plan] = None, *,
            cores: Optional[Sequence[int]] = None) -> Config:
    """A copy with every ``auto`` value filled in: the CD's (:func:`resolve_cd`), and ``gateways.wait``
    and ``gateways.spin_us`` from ``plan`` (busy when each GE has a dedicated core, else hybrid; planned on ``cores``,
    default this host's, when no plan is given)."""
    out = resolve_cd(cfg)
    for i, g in enumerate(out.devices):   # engine: auto decided (wotbench.deploy.fleet)
        g.engine = engine_of(cfg, i)
    if out.gateways.wait == "auto" or out.gateways.spin_us is None:
        plan = plan or make_plan(cfg, cores=cores)
        if out.gateways.wait == "auto":
            out.gateways.wait = plan.ge_wait
        if out.gateways.spin_us is None:
            out.gateways.spin_us = plan.ge_spin_us
    return out


def dump_resolved(cfg: Config, path: str | Path) -> Path:
    """Write ``config.resolved.yaml`` (every key, defaults included) and return its path."""
    path = Path(path)
    data = dtls_spec.redact(cfg.model_dump(mode="json"))   # the key stays out of the run dir
    with atomic.replacing(path) as f:
        f.write("# resolved WoTbench config (all defaults and auto values filled in)\n")
        yaml.safe_dump(data, f, sort_keys=False, default_flow_style=False)
    return path


class DeviceAddress(typing.NamedTuple):
    name: str
    group: str
    id: int
    ip: str
    port: int
    container: str = ""    # its container (wotbench.deploy.pods): its own name, or its pod's


@per_config
def device_addresses(cfg: Config, subnet: Optional[str] = None) -> list[DeviceAddress]:
    """Every device in config order: name ``<group>-<i>``, group, id 0..N-1, IPv4, port.

    wot-devices listen on 5684 (coaps) with ``dtls.enabled``, else 5683; the CD node stays on
    plain CoAP. Addresses follow :mod:`wotbench.deploy.addressing` in ``network.subnet`` (or ``subnet``):
    consecutive from host offset 10, e.g. 172.28.0.10, 172.28.0.11, ... 172.28.3.241 for the
    1000th device of a /16; in a subnet wider than /22 at most 1004 per /22 bridge block
    (device 1004 is 172.28.4.10). Network, gateway (.1) and broadcast addresses of a block are
    never used.

    Devices that share a container (``devices[].per_container``, :mod:`wotbench.deploy.pods`) share
    its address and listen on consecutive ports from 5683 (5684 with DTLS)."""
    net = ipaddress.ip_network(subnet or cfg.network.subnet)
    out, i = [], 0
    where = iter(slots(cfg))
    ip_of = functools.lru_cache(maxsize=None)(address_of(net))   # pods share an address
    for g in cfg.devices:
        port = g.server.port if g.server is not None else \
            COAPS_PORT if cfg.dtls.enabled else COAP_PORT
        for k in range(g.count):
            s = next(where)
            if g.external is not None:   # an endpoint WoTbench does not start (wotbench.config.byo)
                host, eport = split_endpoint(g.external[k])
                out.append(DeviceAddress(device_name(g.group, k), g.group, i, host, eport,
                                         s.container))
            else:
                out.append(DeviceAddress(device_name(g.group, k), g.group, i,
                                         ip_of(s.address_index),
                                         port + s.port_offset, s.container))
            i += 1
    return out


def proxy_address(cfg: Config, subnet: Optional[str] = None) -> Optional[DeviceAddress]:
    """The forward proxy of ``gateways.proxy`` (None without one): an endpoint WoTbench does
    not start, or the component ``proxy`` at the address after the CD node's."""
    p = cfg.gateways.proxy
    if p is None:
        return None
    if p.endpoint is not None:
        host, port = split_endpoint(p.endpoint)
        return DeviceAddress(PROXY_NAME, PROXY_NAME, -1, host, port)
    net = ipaddress.ip_network(subnet or cfg.network.subnet)
    return DeviceAddress(PROXY_NAME, PROXY_NAME, -1, host_address(net, address_count(cfg) + 1),
                         p.port, PROXY_NAME)


def cd_node_address(cfg: Config, subnet: Optional[str] = None) -> DeviceAddress:
    """The contention-detector node: name ``cd-node``, group ``cd``, id = number of devices,
    the address right after the last device (or pod)."""
    net = ipaddress.ip_network(subnet or cfg.network.subnet)
    return DeviceAddress(CD_NODE_NAME, CD_GROUP, cfg.total_devices,
                         host_address(net, address_count(cfg)), COAP_PORT, CD_NODE_NAME)
