"""``wotbench clean --cluster`` (on a manager, or DOCKER_HOST at one): what runs across hosts
left, on every labelled node.

1. Agent services of runs whose coordinator is gone (its address no longer answers) are
   removed; their tasks stop their cells, whose runners remove what they created.
2. A one-shot global service on the labelled nodes (the agent image, ``clean``: see
   ``wotbench.distributed.nodeclean``) removes, on each node's own Engine, the cells' objects whose
   lease lapsed and cell harness containers whose service is gone; it prints what it removed
   per node. A node that is down now is cleaned the same way by the next ``clean --cluster``.
"""
from __future__ import annotations

import socket
import time

from wotbench.distributed import agentimage
from wotbench.distributed.launcher import CELL_LABEL
from wotbench.distributed import service

TASK_WAIT_S = 240.0


def _coordinator_alive(svc) -> bool:
    env = svc.attrs["Spec"]["TaskTemplate"]["ContainerSpec"].get("Env") or []
    addr = next((e.split("=", 1)[1] for e in env if e.startswith("WB_COORD=")), "")
    if ":" not in addr:
        return False
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return True
    except OSError:
        return False


def main(force: bool = False) -> int:
    import docker
    from docker.types import Mount, RestartPolicy, ServiceMode
    client = docker.from_env(timeout=120)
    service.manager(client)
    nodes = service.cell_nodes_any(client)
    reachable = [n for n in nodes if n.state == "ready"]   # a down node gets no task now
    live = []
    for svc in client.services.list(filters={"label": CELL_LABEL}):
        run = svc.attrs["Spec"].get("Labels", {}).get(CELL_LABEL, "")
        if not force and _coordinator_alive(svc):
            print(f"run {run}: its coordinator still runs; left alone (--force removes it)")
            live.append(run)
            continue
        print(f"run {run}: its coordinator is gone; removing its agent service {svc.name}")
        left = service.remove(client, run)
        if left:
            print(f"  {left}")
    name = f"wb-clean-{time.strftime('%Y%m%d%H%M%S')}"
    image = agentimage.tag()
    env = ["WB_NODE={{.Node.Hostname}}", f"WB_WORK={service.CELL_ROOT}",
           f"WB_FORCE={'1' if force else '0'}", f"WB_LIVE={','.join(live)}"]
    svc = client.services.create(
        image, args=["clean"], name=name, env=env, mode=ServiceMode("global"),
        constraints=[f"node.labels.{service.CELL_NODE_LABEL}==true"],
        restart_policy=RestartPolicy(condition="none"), labels={"wotbench.clean": "1"},
        mounts=[Mount("/var/run/docker.sock", service.NODE_SOCKET, type="bind"),
                Mount(service.CELL_ROOT, service.CELL_ROOT, type="bind")])
    status = 0
    try:
        deadline = time.monotonic() + TASK_WAIT_S
        states: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            states = {t["NodeID"]: (t["Status"]["State"], t["Status"].get("Err", ""))
                      for t in svc.tasks()}
            if len(states) >= len(reachable) and all(s in service.ABANDONED_TASK
                                                 for s, _ in states.values()):
                break
            time.sleep(1)
        print(b"".join(svc.logs(stdout=True, stderr=True)).decode(errors="replace").strip())
        for n in nodes:
            st, err = states.get(n.id, ("no task", ""))
            if "bind source path does not exist" in err:
                print(f"{n.hostname}: no cell ever ran here (no {service.CELL_ROOT}): nothing "
                      "to clean")
            elif n not in reachable or st != "complete":
                st = st if n in reachable else f"node {n.state}"
                status = 1
                print(f"{n.hostname}: not cleaned ({st}{': ' + err if err else ''}); fix: "
                      f"bring it back (docker node ls), then wotbench clean --cluster again"
                      + ("; carry the agent image to it" if "No such image" in err else ""))
    finally:
        svc.remove()
    return status
