"""Resolution: from a validated config to what a run deploys, on top of the schema
(:mod:`wotbench.config.schema`) and the placement (:mod:`wotbench.deploy.plan`).

- :func:`resolve_cd` fills ``contention_detector.service_time_ms`` / ``mode`` when ``auto``
  (needs nothing but the config: the trace generator uses it);
- :func:`resolve` also fills ``gateways.wait`` from a placement plan;
- :func:`device_addresses` / :func:`cd_node_address`: every device's name, group, trace id and
  IPv4 address in ``network.subnet`` (layout: :mod:`wotbench.deploy.addressing`);
- :func:`dump_resolved` writes ``config.resolved.yaml``.
``backend: auto`` is left to the runner (it depends on whether Docker is reachable).
"""
from __future__ import annotations

import ipaddress
import typing
from pathlib import Path
from typing import Optional, Sequence

import yaml

from wotbench.deploy.addressing import CD_GROUP, CD_NODE_NAME, COAP_PORT, COAPS_PORT, device_name, host_address
from wotbench.config.byo import split_endpoint
from wotbench.config.schema import Config
from wotbench.config import dtls as dtls_spec
from wotbench.config.distributions import make_distribution
from wotbench.deploy.plan import Plan, make_plan
from wotbench.deploy.pods import address_count, slots

PROXY_NAME = "proxy"


CD_DEFAULT_MS = 1.0   # CD service time when no device's service time is known (all third-party)


def group_request_rates(cfg: Config) -> list[float]:
    """Offered request rate (req/s) of one device of each group: 1000 / mean RIT (ms)."""
    return [1000.0 / make_distribution(g.rit).mean for g in cfg.devices]


def resolve_cd(cfg: Config) -> Config:
    """A copy with the contention detector's ``auto`` values filled in:

    - service_time_ms: request-weighted mean device service time,
      sum_g(count_g * rate_g * S_g) / sum_g(count_g * rate_g)  (ms)
    - mode: the mode that receives most requests (ties: busy)
    """
    out = cfg.model_copy(deep=True)
    out._source = cfg._source
    cd = out.contention_detector
    if cd.service_time_ms != "auto" and cd.mode != "auto":
        return out
    # third-party servers and external endpoints have no known service time: the CD is sized
    # on the emulated devices, or, with none, on CD_DEFAULT_MS in busy mode (wotbench.config.byo)
    weights = [0.0 if g.third_party else g.count * r
               for g, r in zip(cfg.devices, group_request_rates(cfg))]
    total = sum(weights)
    if total == 0:
        if cd.service_time_ms == "auto":
            cd.service_time_ms = CD_DEFAULT_MS
        if cd.mode == "auto":
            cd.mode = "busy"
        return out
    if cd.service_time_ms == "auto":
        st = sum(w * make_distribution(g.service_time).mean
                 for w, g in zip(weights, cfg.devices)) / total
        cd.service_time_ms = round(st, 6)
    if cd.mode == "auto":
        busy = sum(w for w, g in zip(weights, cfg.devices) if g.mode == "busy")
        cd.mode = "busy" if busy >= total - busy else "sleep"
    return out


def resolve(cfg: Config, plan: Optional[Plan] = None, *,
            cores: Optional[Sequence[int]] = None) -> Config:
    """A copy with every ``auto`` value filled in: :func:`resolve_cd`, and ``gateways.wait``
    from ``plan`` (busy when each GE has a dedicated core, else hybrid; planned on ``cores``,
    default this host's, when no plan is given)."""
    out = resolve_cd(cfg)
    if out.gateways.wait == "auto":
        out.gateways.wait = (plan or make_plan(cfg, cores=cores)).ge_wait
    return out


def dump_resolved(cfg: Config, path: str | Path) -> Path:
    """Write ``config.resolved.yaml`` (every key, defaults included) and return its path."""
    path = Path(path)
    data = dtls_spec.redact(cfg.model_dump(mode="json"))   # the key stays out of the run dir
    with path.open("w") as f:
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
                                         host_address(net, s.address_index),
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
