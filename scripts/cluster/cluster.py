#!/usr/bin/env python3
"""An emulated Docker Swarm for WoTbench on one host (``make cluster-up N=3``,
``make cluster-status``, ``make cluster-down``; docs/CLUSTER.md).

up: N dockerd in their own network namespaces on a private link bridge, a Swarm of them (the
first node manages), WoTbench's node labels, and WoTbench's images loaded into every node
from ``docker save``. A failed or interrupted up removes what it created. down: removes
everything (idempotent). status: what is up, per node. images: carry the images again
(after a code change: the cell agent's image holds the project's code).

Run as root with the project's Python (.venv/bin/python: the images are built by wotbench).
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # wotbench (images)

import carry
import daemon
import netns
import swarm
import teardown
from layout import DEFAULT_BLOCK, DEFAULT_ROOT, Cluster, load, overlaps, plan
from shell import ClusterError, docker, run

TOOLS = ("ip", "nsenter", "unshare", "dockerd", "docker", "umount")


def log(msg: str) -> None:
    print(f"cluster: {msg}", flush=True)


def preflight(root: Path, block: str, n: int) -> None:
    """Stop before creating anything: not root, a missing tool, remains of a cluster, an
    address block the host already routes."""
    if os.geteuid() != 0:
        raise ClusterError("network namespaces and daemons need root: run as root "
                           "(sudo make cluster-up N=...)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise ClusterError(f"missing {', '.join(missing)}: apt-get install iproute2 util-linux "
                           "docker.io")
    left = teardown.leftovers(root)
    if left:
        raise ClusterError(f"a cluster (or what a killed one left) is here: "
                           f"{json.dumps(left)}; run make cluster-down first")
    routes = [r.get("dst", "") for r in json.loads(run(["ip", "-4", "-j", "route"]).stdout)]
    clash = overlaps(block, [r for r in routes if r != "default"])
    if clash:
        raise ClusterError(f"address block {block} overlaps this host's route(s) "
                           f"{', '.join(clash)}: choose another, e.g. BLOCK=10.214.0.0/16")


def host_storage_driver() -> str | None:
    """The host daemon's storage driver (the nodes keep their data on the same file system;
    what the host daemon needed there, they need too); None: let dockerd choose."""
    r = run(["docker", "info", "--format", "{{.Driver}}"], check=False, timeout=30)
    return r.stdout.strip() or None if r.returncode == 0 else None


def up(root: Path, block: str, n: int) -> Cluster:
    preflight(root, block, n)
    cluster = plan(time.strftime("%Y%m%d%H%M%S"), root, block, n)
    cluster.storage_driver = host_storage_driver()
    cluster.save()
    try:
        log(f"link bridge in network namespace {netns.SWITCH_NS}; {n} node namespace(s)")
        netns.create_switch()
        for node in cluster.nodes:
            netns.attach(node, block)
        for node in cluster.nodes:
            node.pid = daemon.start(node, cluster.cluster_id, cluster.storage_driver)
            cluster.save()
        for node in cluster.nodes:
            def restart(node=node) -> None:
                node.pid = daemon.start(node, cluster.cluster_id, cluster.storage_driver)
                cluster.save()
            version = daemon.start_ready(node, restart, log)
            log(f"{node.name}: dockerd {version} (pid {node.pid}) at {node.address}, "
                f"socket {node.socket}")
        swarm.form(cluster)
        cluster.save()
        log(f"Swarm formed: manager {cluster.manager}, labels wotbench.cell=true on every node")
        carry_images(root, cluster)
        cluster.status = "up"
        cluster.save()
        return cluster
    except BaseException as e:
        log(f"cluster-up failed ({type(e).__name__}: {e}); removing what it created")
        cluster.status = "failed"
        cluster.save()
        left = teardown.down(root, log=lambda m: None)
        if left:
            log(f"could not remove: {json.dumps(left)}")
        raise


def carry_images(root: Path, cluster: Cluster) -> None:
    """Build WoTbench's images (the cell agent's too) on this host and load them into every
    node: after cluster-up, and again after the code changed (make cluster-images)."""
    cluster.images = carry.build_on_host(log)
    cluster.save()
    tar = root / "images.tar"
    try:
        carry.save(cluster.images, tar)
        for node in cluster.nodes:
            carry.load(node, tar, cluster.images)
    finally:
        tar.unlink(missing_ok=True)
    log(f"images on every node: {', '.join(cluster.images)}")


def status(root: Path) -> int:
    """Print the cluster per node; 0 when every node's daemon answers, is a ready Swarm node
    with WoTbench's labels and has the images, else 1."""
    cluster = load(root)
    if cluster is None:
        left = teardown.leftovers(root)
        print(f"no cluster at {root}" + (f"; remains: {json.dumps(left)} (make cluster-down)"
                                         if left else ""))
        return 1
    manager = next((x for x in cluster.nodes if x.name == cluster.manager), None)
    seen = swarm.nodes(manager) if manager and daemon.alive(manager.pid, manager) else {}
    ok = cluster.status == "up"
    print(f"cluster {cluster.cluster_id} ({cluster.status}) at {root}, block {cluster.block}, "
          f"manager {cluster.manager}")
    print(f"{'node':8} {'address':12} {'dockerd':14} {'swarm':20} {'labels':40} "
          f"{'images':8} containers")
    for node in cluster.nodes:
        up_ = daemon.alive(node.pid, node)
        sw = seen.get(node.name, {})
        miss = carry.missing_images(node, cluster.images) if up_ else cluster.images
        ctrs = docker(str(node.socket), "ps", "-q", check=False).stdout.split() if up_ else []
        good = up_ and sw.get("status") == "ready" and not miss and \
            sw.get("labels", {}).get("wotbench.cell") == "true"
        ok &= good
        labels = ",".join(f"{k}={v}" for k, v in sorted(sw.get("labels", {}).items()))
        print(f"{node.name:8} {node.address:12} {('pid ' + str(node.pid)) if up_ else 'down':14} "
              f"{(sw.get('role', '-') + '/' + sw.get('status', '-')):20} {labels or '-':40} "
              f"{'all' if not miss else str(len(miss)) + ' missing':8} {len(ctrs)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("verb", choices=("up", "down", "status", "images"))
    ap.add_argument("--nodes", "-n", type=int, default=3, help="nodes (up), default 3")
    ap.add_argument("--root", type=Path, default=Path(os.environ.get("WBC_ROOT", DEFAULT_ROOT)),
                    help=f"state directory (default {DEFAULT_ROOT})")
    ap.add_argument("--block", default=DEFAULT_BLOCK,
                    help=f"private IPv4 /16 for every address (default {DEFAULT_BLOCK})")
    a = ap.parse_args(argv)
    try:
        ipaddress.ip_network(a.block)
        if a.verb == "up":
            up(a.root, a.block, a.nodes)
            return status(a.root)
        if a.verb == "status":
            return status(a.root)
        if a.verb == "images":
            cluster = load(a.root)
            if cluster is None or cluster.status != "up":
                raise ClusterError(f"no cluster up at {a.root}: make cluster-up N=3 first")
            carry_images(a.root, cluster)
            return status(a.root)
        left = teardown.down(a.root, log)
        if left:
            log(f"still here (remove by hand, or reboot): {json.dumps(left, indent=1)}")
            return 1
        log("nothing of the cluster is left")
        return 0
    except (ClusterError, ValueError) as e:
        print(f"cluster: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
