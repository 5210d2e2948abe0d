"""The nodes' network: a link bridge in its own namespace, one veth pair per node namespace."""
from __future__ import annotations

from layout import BRIDGE, NETNS_DIR, PREFIX, SWITCH_NS, Node, link_subnet
from shell import run


def existing() -> list[str]:
    """Network namespaces of an emulated cluster (``wbc-sw``, ``wbc-n<i>``) on this host."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(f"{PREFIX}-"))


def create_switch() -> None:
    run(["ip", "netns", "add", SWITCH_NS])
    run(["ip", "-n", SWITCH_NS, "link", "set", "lo", "up"])
    run(["ip", "-n", SWITCH_NS, "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "-n", SWITCH_NS, "link", "set", BRIDGE, "up"])


def attach(node: Node, block: str) -> None:
    """The node's namespace with ``eth0`` at its address, plugged into the link bridge. The
    pair is created inside the namespaces, never in the host's."""
    prefix = link_subnet(block).prefixlen
    run(["ip", "netns", "add", node.name])
    run(["ip", "-n", SWITCH_NS, "link", "add", node.name, "type", "veth",
         "peer", "name", "eth0", "netns", node.name])
    run(["ip", "-n", SWITCH_NS, "link", "set", node.name, "master", BRIDGE, "up"])
    run(["ip", "-n", node.name, "addr", "add", f"{node.address}/{prefix}", "dev", "eth0"])
    run(["ip", "-n", node.name, "link", "set", "eth0", "up"])
    run(["ip", "-n", node.name, "link", "set", "lo", "up"])


def delete(name: str) -> bool:
    """Remove a namespace (its veth ends go with it); False when it was not there."""
    if not (NETNS_DIR / name).exists():
        return False
    run(["ip", "netns", "del", name])
    return True
