"""Before a cell deploys: can *this node* reach what its share of the devices needs?

A cell's GE talks to ``external`` endpoints (and an external ``gateways.proxy.endpoint``) from
its own node, and a ``server:`` group's devices run that image on the node's own Engine. A
node that cannot reach an endpoint, or lacks the image, would fail late (after its deploy) or,
worse, report the endpoint's silence as timeouts. So the agent checks its share first, with
the harness's own probes -- a CoAP ping (``runner.coapprobe``: an empty CON, answered by RST)
for CoAP endpoints, a GET of the group's first path (``runner.httpprobe``: any HTTP status is an
answer) for ``protocol: http`` endpoints and an HTTP->CoAP proxy -- and the run stops before T0
naming the node, the config key, the target and the fix.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from pydantic import BaseModel

from wotbench.config.byo import split_endpoint
from wotbench.config.schema import Config
from wotbench.config.schema import device_name

PROBE_S = 5.0

Ping = Callable[[list[tuple[str, str, int]], float], list[str]]   # coapprobe.ping_all's shape


class Target(BaseModel):
    key: str          # the config key that names it
    name: str         # the device (or "proxy")
    host: str
    port: int
    scheme: str = "coap"
    path: str = ""    # http: what the readiness GET asks for

    @property
    def where(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def targets_of(cfg: Config, devices: Iterable[str]) -> list[Target]:
    """The endpoints WoTbench does not start that a cell with ``devices`` talks to: its
    external devices, and an external proxy (every cell's GE goes through it). Only the
    groups with ``external`` are walked: a cell of a 10^6-device config has none, mostly."""
    mine = devices if isinstance(devices, (set, frozenset)) else set(devices)
    out = []
    for i, g in enumerate(cfg.devices):
        if g.external is None:
            continue
        for k in range(g.count):
            name = device_name(g.group, k)
            if name in mine:
                host, port = split_endpoint(g.external[k])
                out.append(Target(key=f"devices[{i}].external[{k}]", name=name, host=host,
                                  port=port, scheme=g.protocol,
                                  path=g.paths[0] if g.paths else ""))
    p = cfg.gateways.proxy
    if p is not None and p.endpoint is not None:
        host, port = split_endpoint(p.endpoint)
        out.append(Target(key="gateways.proxy.endpoint", name="proxy", host=host, port=port,
                          scheme="http" if p.mode == "http" else "coap"))
    return out


def server_images(cfg: Config, devices: Iterable[str]) -> list[tuple[str, str]]:
    """(config key, image) of the ``server:`` groups with a device in the share (only those
    groups are walked, the share's set made once)."""
    mine = devices if isinstance(devices, (set, frozenset)) else set(devices)
    return [(f"devices[{i}].server.image", g.server.image) for i, g in enumerate(cfg.devices)
            if g.server is not None and g.server.image
            and any(device_name(g.group, k) in mine for k in range(g.count))]


def _coap_silent(targets: list[Target], ping: Ping, timeout_s: float) -> list[Target]:
    silent = set(ping([(t.key, t.host, t.port) for t in targets], timeout_s))
    return [t for t in targets if t.key in silent]


def _http_silent(targets: list[Target], ping: Ping, timeout_s: float) -> list[Target]:
    from wotbench.runner.deployment.httpprobe import probe_all
    silent, _ = probe_all([(t.key, t.host, t.port, t.path) for t in targets], timeout_s)
    return [t for t in targets if t.key in set(silent)]


PROBES: dict[str, Callable[[list[Target], Ping, float], list[Target]]] = {
    "coap": _coap_silent, "http": _http_silent}
# what each probe is, and the check a user runs on the node by hand
ASKED = {"coap": ("a CoAP ping", "coap-client-notls -m ping coap://{where}"),
         "http": ("an HTTP GET", "curl -sv http://{where}/{path}")}


def preflight(cfg: Config, devices: Iterable[str], node: str, has_image: Callable[[str], bool],
              ping: Optional[Ping] = None, timeout_s: float = PROBE_S) -> Optional[str]:
    """None when this node reaches every target of its share and holds every server image;
    else why not, naming the node, each key and target, and the fix."""
    if ping is None:
        from wotbench.runner.deployment.coapprobe import ping_all
        ping = ping_all
    devices = frozenset(devices)   # one set for every test below (a share: 10^5 names)
    problems = []
    for key, image in server_images(cfg, devices):
        if not has_image(image):
            problems.append(f"{key}: the image {image} is not on {node}'s Docker Engine; fix: "
                            f"docker save {image} | ssh {node} docker load (every node that gets "
                            "a device of the group needs it)")
    targets = targets_of(cfg, devices)
    by_scheme: dict[str, list[Target]] = {}
    for t in targets:
        by_scheme.setdefault(t.scheme, []).append(t)
    for scheme, ts in by_scheme.items():
        asked, by_hand = ASKED[scheme]
        for t in PROBES[scheme](ts, ping, timeout_s):
            problems.append(
                f"{t.key}: {t.name} at {t.where} did not answer {asked} from {node} within "
                f"{timeout_s:g} s; fix: make it reachable from {node} (is it running? its address, "
                f"the route and firewall between them; check on {node}: "
                f"{by_hand.format(where=t.where, path=t.path)}), or take the label off {node} "
                f"(docker node update --label-rm wotbench.cell {node}) so no cell runs there")
    if not problems:
        return None
    return (f"{node} cannot serve its share before T0 ({len(problems)} problem(s)): "
            + "; ".join(problems))
