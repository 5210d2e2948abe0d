"""WoTbench's images (and the cell agent's) onto every node without a registry: built on this host's Docker (the
same FROM scratch images, same content-hash tags as a run builds), ``docker save`` once, then
each node's ``docker load``."""
from __future__ import annotations

from pathlib import Path

from layout import Node
from shell import ClusterError, docker, run


def build_on_host(log=print) -> list[str]:
    """The image tags of the project's binaries (built with make when stale; the images are
    reused when unchanged). Needs this host's Docker daemon."""
    from wotbench.errors import WotbenchError
    from wotbench.runner.prepare import binaries
    from wotbench.runner.backends.docker import images
    from wotbench.runner.backends.docker.backend import docker_client
    try:
        client = docker_client()
    except Exception as e:  # noqa: BLE001 - the SDK raises many kinds
        raise ClusterError(f"this host's Docker daemon does not answer ({e}): the images are "
                           "built there (start it: systemctl start docker)") from None
    from wotbench.distributed import agentimage
    try:
        tags = images.ensure_images(client, binaries.ensure_binaries(log, hog=True, fleet=True), log)
        agent = agentimage.ensure(client, log)   # backend: swarm's cell agent
    except WotbenchError as e:
        raise ClusterError(f"building WoTbench's images failed: {e}") from None
    return sorted([*tags.values(), agent])


def save(tags: list[str], tar: Path) -> None:
    run(["docker", "save", "-o", str(tar), *tags], timeout=300)


def load(node: Node, tar: Path, tags: list[str]) -> None:
    docker(str(node.socket), "load", "-q", "-i", str(tar), timeout=300)
    missing = missing_images(node, tags)
    if missing:
        raise ClusterError(f"{node.name} lacks {', '.join(missing)} after docker load")


def missing_images(node: Node, tags: list[str]) -> list[str]:
    return [t for t in tags
            if docker(str(node.socket), "image", "inspect", "--format", "{{.Id}}", t,
                      check=False).returncode != 0]
