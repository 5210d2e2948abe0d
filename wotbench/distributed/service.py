"""The Swarm side of ``backend: swarm``, through a manager's API (DOCKER_HOST): the labelled
nodes, the run's global agent service, its tasks' states, and removing it.

The service: mode global, placement ``node.labels.wotbench.cell==true``, the node's host
network (the agent dials the coordinator; no overlay, no ingress, no IPVS), restart
condition none (a lost cell is reported, not restarted mid-run), the node's Docker socket
bind-mounted (its path templated by ``{{.Node.Hostname}}`` on the emulated cluster) and the
cells' work directory at the same path as on the node. The image is never resolved against
a registry (the SDK does not; the CLI needs --no-resolve-image).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Optional

from pydantic import BaseModel

from wotbench.distributed.launcher import CELL_LABEL
from wotbench.errors import EnvironmentProblem

CELL_NODE_LABEL = "wotbench.cell"
NODE_SOCKET = os.environ.get("WOTBENCH_NODE_SOCKET", "/var/run/docker.sock")
CELL_ROOT = os.environ.get("WOTBENCH_CELL_ROOT", "/var/lib/wotbench/cells")
ABANDONED_TASK = ("failed", "rejected", "orphaned", "shutdown", "complete", "remove")
STARTING_TASK = ("new", "pending", "assigned", "accepted", "preparing", "ready", "starting")


class SwarmNode(BaseModel):
    id: str
    hostname: str
    addr: str
    state: str          # ready | down | unknown
    availability: str   # active | pause | drain
    labelled: bool


class TaskState(BaseModel):
    node: str
    state: str
    error: str = ""


def service_name(run_id: str) -> str:
    return f"wb-{run_id}-agent"[:63]


def manager(client) -> str:
    """This client's node address; EnvironmentProblem when it is not a Swarm manager."""
    info = client.info()
    sw = info.get("Swarm") or {}
    if not sw.get("ControlAvailable"):
        raise EnvironmentProblem(
            "backend: swarm needs a Swarm manager: this Docker Engine "
            f"({info.get('Name')}) is {sw.get('LocalNodeState') or 'not in a Swarm'}. Fix: run "
            "on a manager, or point DOCKER_HOST at one (docs/CLUSTER.md)")
    return sw.get("NodeAddr") or ""


def nodes(client) -> list[SwarmNode]:
    out = []
    for n in client.nodes.list():
        a = n.attrs
        out.append(SwarmNode(
            id=n.id, hostname=a["Description"]["Hostname"],
            addr=(a.get("Status") or {}).get("Addr", ""),
            state=(a.get("Status") or {}).get("State", "unknown"),
            availability=a["Spec"].get("Availability", ""),
            labelled=(a["Spec"].get("Labels") or {}).get(CELL_NODE_LABEL) == "true"))
    return sorted(out, key=lambda n: n.hostname)


def cell_nodes_any(client) -> list[SwarmNode]:
    """Every labelled node, whatever its state (clean names those it cannot reach)."""
    return [n for n in nodes(client) if n.labelled]


def cell_nodes(client) -> list[SwarmNode]:
    """The labelled nodes that can take a cell; EnvironmentProblem naming each labelled node
    that cannot (down, drained) and the fix, or none labelled."""
    every = nodes(client)
    labelled = [n for n in every if n.labelled]
    if not labelled:
        raise EnvironmentProblem(
            f"no node is labelled for WoTbench (nodes: {', '.join(n.hostname for n in every)}). "
            "Fix: docker node update --label-add wotbench.cell=true NODE, for each node that may "
            "run a cell")
    bad = [n for n in labelled if n.state != "ready" or n.availability != "active"]
    if bad:
        raise EnvironmentProblem(
            "labelled node(s) not ready: " + ", ".join(f"{n.hostname} ({n.state}, "
                                                        f"{n.availability})" for n in bad)
            + ". Fix: bring the node back (docker node ls), or remove its label "
              "(docker node update --label-rm wotbench.cell NODE)")
    return labelled


def create(client, run_id: str, image: str, coordinator: str) -> str:
    """The run's agent service; its id."""
    from docker.types import EndpointSpec, Mount, RestartPolicy, ServiceMode
    env = [f"WB_RUN={run_id}", "WB_NODE={{.Node.Hostname}}", f"WB_COORD={coordinator}",
           f"WB_WORK={CELL_ROOT}", f"WB_SOCK={NODE_SOCKET}", f"WB_IMAGE={image}"]
    svc = client.services.create(
        image, args=["launch"], name=service_name(run_id), env=env,
        mode=ServiceMode("global"), constraints=[f"node.labels.{CELL_NODE_LABEL}==true"],
        networks=["host"], endpoint_spec=EndpointSpec(mode="dnsrr"),
        restart_policy=RestartPolicy(condition="none"),
        mounts=[Mount("/var/run/docker.sock", NODE_SOCKET, type="bind")],
        labels={CELL_LABEL: run_id}, container_labels={CELL_LABEL: run_id},
        stop_grace_period=120 * 10**9)
    return svc.id


def tasks(client, run_id: str, names: dict[str, str]) -> list[TaskState]:
    """The service's tasks (node id -> hostname by ``names``), newest per node."""
    try:
        svc = client.services.get(service_name(run_id))
        found = svc.tasks()
    except Exception:  # noqa: BLE001 - the service is gone (removed, manager away)
        return []
    newest: dict[str, dict] = {}
    for t in found:
        nid = t.get("NodeID", "")
        if nid not in newest or t.get("CreatedAt", "") > newest[nid].get("CreatedAt", ""):
            newest[nid] = t
    return [TaskState(node=names.get(nid, nid), state=t["Status"]["State"],
                      error=t["Status"].get("Err", "") or t["Status"].get("Message", ""))
            for nid, t in newest.items()]


LOG_READ_S = 30.0   # how long the agents' logs are read before what came is kept


def _agent_logs(client, run_id: str, read_s: float = LOG_READ_S, **options) -> Optional[bytes]:
    """What the agents logged (``docker service logs``); None when there is none to read (the
    service is gone, a log driver without). Bounded: the SDK reads a log stream with no socket
    timeout, and Swarm's stream of a service with a task on a node that is down never ends
    (the coordinator once waited 900 s there after a node was lost), so the stream is read in
    a daemon thread for ``read_s`` and what came by then is kept, marked as cut."""
    chunks: list[bytes] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            for chunk in client.services.get(service_name(run_id)).logs(
                    stdout=True, stderr=True, **options):
                chunks.append(chunk)
        except Exception as e:  # noqa: BLE001 - see the docstring
            failed.append(e)
        finally:
            done.set()

    threading.Thread(target=read, name="agent-logs", daemon=True).start()
    if not done.wait(read_s):
        return b"".join(list(chunks)) + (f"wotbench: the agents' logs were cut after "
                                         f"{read_s:g} s (a node did not answer)\n").encode()
    return None if failed and not chunks else b"".join(chunks)


def last_words(client, run_id: str, tail: int = 6) -> str:
    """The last lines the agents logged, for a failure message."""
    out = _agent_logs(client, run_id, tail=tail)
    text = "" if out is None else out.decode(errors="replace").strip()
    return " | ".join(ln.strip() for ln in text.splitlines()[-tail:])


def save_logs(client, run_id: str, path: Path) -> bool:
    """Write everything the agents logged, timestamped, to ``path`` before the service goes,
    so a run whose cells failed keeps what they said."""
    out = _agent_logs(client, run_id, timestamps=True)
    if out is None:
        return False
    try:
        path.write_bytes(out)
    except OSError:   # a full disk: the service must still be removed after this
        return False
    return True


def remove(client, run_id: str, wait_s: float = 150.0) -> Optional[str]:
    """Remove the service (its tasks stop their cells first) and wait until its tasks are
    gone; None, or what is left."""
    try:
        client.services.get(service_name(run_id)).remove()
    except Exception:  # noqa: BLE001 - gone already
        return None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        left = [c for c in client.containers.list(filters={"label": f"{CELL_LABEL}={run_id}"})]
        if not left:
            return None
        time.sleep(1)
    return f"the agent's task on the manager still runs after {wait_s:.0f} s"
