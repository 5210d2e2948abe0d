"""Names, addresses and paths of an emulated WoTbench cluster, and its state file.

Everything a cluster-up creates is named ``wbc-...`` and lives under one state directory
(default /var/lib/wotbench-cluster): the state file there lets cluster-down find it all. One
address block (default 10.213.0.0/16) holds every address: the nodes' link /24 (its first
/24: node i is .10+i), node i's docker0 (the i-th /24) and the Swarm overlay pool (its upper
half). The link bridge lives in its own network namespace (``wbc-sw``), so nothing of the
cluster is in the host's namespace: the host's iptables (Docker's FORWARD DROP) never sees
the nodes' traffic, and the host has no route into the block.
"""
from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel

# WBC_PREFIX: another name for a second emulated cluster beside make test-cluster's (a bench's,
# e.g. bench/fleet_cluster_bench.py); at most 8 characters ("<prefix>-n32", "<prefix>0" are
# interface and namespace names)
PREFIX = os.environ.get("WBC_PREFIX", "wbc")[:8]
SWITCH_NS = f"{PREFIX}-sw"            # network namespace of the link bridge
BRIDGE = f"{PREFIX}0"                 # the link bridge, inside SWITCH_NS
DEFAULT_ROOT = Path("/var/lib/wotbench-cluster")
DEFAULT_BLOCK = "10.213.0.0/16"
MAX_NODES = 32
NODE_LABEL = "wotbench.node"          # Swarm node label: the node's name
CELL_LABEL = "wotbench.cell"          # Swarm node label: "true" on nodes that run a cell
ENGINE_LABEL = "wotbench.cluster"     # engine label (daemon.json): the cluster id
NETNS_DIR = Path("/var/run/netns")


class Node(BaseModel):
    """One emulated node: a dockerd in its own network and UTS namespace."""
    index: int
    name: str             # wbc-n1: hostname, Swarm node name, netns, cgroup parent, veth
    address: str          # its address on the link (Swarm advertise address)
    bip: str              # its docker0 (--bip)
    dir: Path             # everything of its own: data-root, exec-root, socket, log
    pid: Optional[int] = None           # its dockerd, once started
    swarm_id: Optional[str] = None      # its Swarm node id, once joined

    @property
    def socket(self) -> Path:
        return self.dir / "docker.sock"

    @property
    def config_file(self) -> Path:
        return self.dir / "daemon.json"

    @property
    def log_file(self) -> Path:
        return self.dir / "dockerd.log"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.name


class Cluster(BaseModel):
    """The state file: what cluster-up created (written before each step, so that a failed
    or interrupted cluster-up and any later cluster-down find everything)."""
    cluster_id: str
    root: Path
    block: str
    storage_driver: Optional[str] = None
    nodes: list[Node]
    status: Literal["creating", "up", "failed"] = "creating"
    manager: Optional[str] = None       # name of the Swarm manager node
    images: list[str] = []              # image tags carried to every node

    @property
    def state_file(self) -> Path:
        return state_file(self.root)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        os.replace(tmp, self.state_file)


def state_file(root: Path) -> Path:
    return root / "state.json"


def load(root: Path) -> Optional[Cluster]:
    """The state file under ``root``, None when there is none."""
    try:
        return Cluster.model_validate(json.loads(state_file(root).read_text()))
    except FileNotFoundError:
        return None


def link_subnet(block: str) -> ipaddress.IPv4Network:
    return next(ipaddress.ip_network(block).subnets(new_prefix=24))


def overlay_pool(block: str) -> str:
    """The Swarm overlay address pool: the block's upper half."""
    return str(list(ipaddress.ip_network(block).subnets(prefixlen_diff=1))[1])


def check_block(block: str, n: int) -> ipaddress.IPv4Network:
    """The block as a network; ValueError naming the problem when it cannot hold ``n`` nodes."""
    net = ipaddress.ip_network(block, strict=True)
    if net.version != 4 or net.prefixlen > 16 or not net.is_private:
        raise ValueError(f"--block {block}: a private IPv4 /16 (or larger) is needed, "
                         f"e.g. {DEFAULT_BLOCK}")
    if not 1 <= n <= MAX_NODES:
        raise ValueError(f"N={n}: between 1 and {MAX_NODES} nodes")
    return net


def plan(cluster_id: str, root: Path, block: str, n: int) -> Cluster:
    """The cluster of ``n`` nodes (nothing created yet)."""
    net = check_block(block, n)
    link = link_subnet(block)
    slash24 = list(net.subnets(new_prefix=24))
    nodes = [Node(index=i, name=f"{PREFIX}-n{i}", address=str(link.network_address + 10 + i),
                  bip=f"{slash24[i].network_address + 1}/24", dir=root / "nodes" / f"{PREFIX}-n{i}")
             for i in range(1, n + 1)]
    return Cluster(cluster_id=cluster_id, root=root, block=block, nodes=nodes)


def daemon_config(node: Node, cluster_id: str, storage_driver: Optional[str]) -> dict:
    """The node's own daemon.json: every path its own (the host's /etc/docker/daemon.json
    is never read), its cgroups under ``/<node name>``, its own containerd namespaces.
    iptables stays on: dockerd runs in the node's network namespace, so its rules are the
    node's alone."""
    cfg = {
        "data-root": str(node.dir / "data"),
        "exec-root": str(node.dir / "exec"),
        "pidfile": str(node.dir / "dockerd.pid"),
        "hosts": [f"unix://{node.socket}"],
        "bip": node.bip,
        "cgroup-parent": node.name,
        "containerd-namespace": node.name,
        "containerd-plugins-namespace": f"{node.name}-plugins",
        "labels": [f"{ENGINE_LABEL}={cluster_id}", f"{NODE_LABEL}={node.name}"],
        "log-driver": "json-file",
        "log-opts": {"max-size": "10m", "max-file": "2"},
    }
    if storage_driver:
        cfg["storage-driver"] = storage_driver
    return cfg


def overlaps(block: str, routes: list[str]) -> list[str]:
    """The host routes (destinations, ``default`` ignored) that overlap ``block``."""
    net = ipaddress.ip_network(block)
    out = []
    for r in routes:
        try:
            if net.overlaps(ipaddress.ip_network(r, strict=False)):
                out.append(r)
        except ValueError:
            continue
    return out
