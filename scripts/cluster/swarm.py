"""Form a Swarm of the emulated nodes: the first node is the manager, the others join as
workers; every node gets WoTbench's labels. No ingress network: the kernel has no IPVS, so
WoTbench services use ``--endpoint-mode dnsrr`` and no routing mesh (docs/CLUSTER.md)."""
from __future__ import annotations

import json
import time

from layout import CELL_LABEL, NODE_LABEL, Cluster, Node, overlay_pool
from shell import ClusterError, docker

JOIN_TIMEOUT_S = 60.0


def init(manager: Node, block: str) -> None:
    docker(str(manager.socket), "swarm", "init", "--advertise-addr", manager.address,
           "--listen-addr", f"{manager.address}:2377",
           "--default-addr-pool", overlay_pool(block), "--default-addr-pool-mask-length", "24")
    manager.swarm_id = node_id(manager)
    # the routing mesh needs IPVS, which this kind of host may lack; WoTbench does not use it
    docker(str(manager.socket), "network", "rm", "ingress", stdin="y\n", check=False)


def node_id(node: Node) -> str:
    r = docker(str(node.socket), "info", "--format", "{{.Swarm.NodeID}}")
    if not r.stdout.strip():
        raise ClusterError(f"{node.name} is not part of a Swarm after init/join")
    return r.stdout.strip()


def join(node: Node, manager: Node) -> None:
    token = docker(str(manager.socket), "swarm", "join-token", "-q", "worker").stdout.strip()
    docker(str(node.socket), "swarm", "join", "--token", token,
           "--advertise-addr", node.address, "--listen-addr", f"{node.address}:2377",
           f"{manager.address}:2377")
    node.swarm_id = node_id(node)


def label(node: Node, manager: Node) -> None:
    docker(str(manager.socket), "node", "update", "--label-add", f"{CELL_LABEL}=true",
           "--label-add", f"{NODE_LABEL}={node.name}", node.swarm_id)


def nodes(manager: Node) -> dict[str, dict]:
    """The manager's view: node hostname -> {status, availability, role, labels}."""
    ids = docker(str(manager.socket), "node", "ls", "-q").stdout.split()
    out = {}
    for i in ids:
        r = docker(str(manager.socket), "node", "inspect", "--format",
                   "{{.Description.Hostname}}\t{{.Status.State}}\t{{.Spec.Availability}}\t"
                   "{{.Spec.Role}}\t{{json .Spec.Labels}}", i)
        host, state, avail, role, labels = r.stdout.rstrip("\n").split("\t")
        out[host] = {"status": state, "availability": avail, "role": role,
                     "labels": json.loads(labels) or {}}
    return out


def wait_ready(cluster: Cluster, manager: Node, timeout: float = JOIN_TIMEOUT_S) -> None:
    """Wait until the manager sees every node ready."""
    deadline = time.monotonic() + timeout
    seen: dict[str, dict] = {}
    while time.monotonic() < deadline:
        seen = nodes(manager)
        if all(seen.get(n.name, {}).get("status") == "ready" for n in cluster.nodes):
            return
        time.sleep(0.5)
    missing = [n.name for n in cluster.nodes if seen.get(n.name, {}).get("status") != "ready"]
    raise ClusterError(f"Swarm nodes not ready after {timeout:.0f} s: {', '.join(missing)} "
                       f"(manager sees {seen}); check 2377/7946/4789 between the nodes")


def form(cluster: Cluster) -> None:
    manager, *workers = cluster.nodes
    init(manager, cluster.block)
    cluster.manager = manager.name
    cluster.save()
    for w in workers:
        join(w, manager)
        cluster.save()
    wait_ready(cluster, manager)
    for n in cluster.nodes:
        label(n, manager)
