"""The coordinator's side of the cells' control connections: accept the agents, talk to all
of them at once, the clock exchange, the end of each cell (done, lost or failed).

Every wait has a deadline and every failure names the node: a task Swarm could not start
(rejected: no image), an agent that never called, a cell whose beats stopped.
"""
from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel

from wotbench.distributed import clock, wire
from wotbench.errors import EnvironmentProblem

BEAT_TIMEOUT_S = 10.0    # a cell silent this long is lost (it beats every second)
EXCHANGES = 16


class Agent:
    def __init__(self, conn: wire.Conn, hello: wire.Hello):
        self.conn, self.hello, self.node = conn, hello, hello.node
        self.deployed: Optional[wire.Deployed] = None
        self.done: Optional[wire.Done] = None
        self.lost: Optional[str] = None     # why the cell is lost (None: it is not)
        self.phase = ""                     # what its last beat said it was doing


class Lost(BaseModel):
    node: str
    why: str


def accept(listener: socket.socket, expected: list[str], timeout_s: float,
           task_problems: Callable[[], dict[str, str]]) -> dict[str, Agent]:
    """Every expected node's agent, by node; EnvironmentProblem naming the nodes whose agent
    did not call (with what Swarm says of their task) or whose task failed."""
    agents: dict[str, Agent] = {}
    deadline = time.monotonic() + timeout_s
    listener.settimeout(1.0)
    while set(agents) != set(expected) and time.monotonic() < deadline:
        bad = {n: why for n, why in task_problems().items() if n not in agents}
        if bad:
            raise EnvironmentProblem(_task_failure(bad))
        try:
            sock, _ = listener.accept()
        except socket.timeout:
            continue
        conn = wire.Conn(sock)
        try:
            m = conn.recv(30)
        except (wire.Closed, socket.timeout, ValueError):
            conn.close()
            continue
        if isinstance(m, wire.Hello) and m.node in expected:
            agents[m.node] = Agent(conn, m)
        else:
            conn.close()
    missing = [n for n in expected if n not in agents]
    if missing:
        problems = task_problems()
        raise EnvironmentProblem(
            f"no cell agent called from {', '.join(missing)} within {timeout_s:.0f} s"
            + "".join(f"; {n}: {problems[n]}" for n in missing if n in problems)
            + ". Fix: docker service ps --no-trunc <the agent service> on a manager; the node "
              "must reach this coordinator's port (firewall), and have the agent image")
    return agents


def _task_failure(bad: dict[str, str]) -> str:
    parts = []
    for node, why in sorted(bad.items()):
        fix = (f"carry the image to {node} without a registry: docker save TAG | ssh {node} "
               "docker load (the emulated cluster: make cluster-images)"
               if "No such image" in why
               else "see docker service ps --no-trunc on a manager")
        parts.append(f"{node}: the cell agent's task could not start ({why}); fix: {fix}")
    return "; ".join(parts)


def each(agents: list[Agent], fn: Callable[[Agent], None]) -> None:
    """``fn`` on every agent at once (one thread each); exceptions re-raised after all end."""
    if not agents:
        return
    with ThreadPoolExecutor(max_workers=len(agents)) as pool:
        futures = [pool.submit(fn, a) for a in agents]
    for f in futures:
        f.result()


def wait_deployed(a: Agent, timeout_s: float) -> None:
    """Until the cell says it is deployed (or failed: ``a.done``); beats keep it waiting."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = _recv(a, BEAT_TIMEOUT_S)
        if m is None:
            return
        if isinstance(m, wire.Beat):
            a.phase = m.phase
        if isinstance(m, wire.Deployed):
            a.deployed = m
            return
        if isinstance(m, wire.Done):
            a.done = m
            return
    a.lost = f"it did not deploy within {timeout_s:.0f} s" + (
        f" (its last beat: {a.phase})" if a.phase else "")


def exchange(a: Agent, n: int = EXCHANGES) -> Optional[clock.Estimate]:
    """``n`` ping/pong exchanges (the agent's beats in between are skipped); None when the
    agent went away."""
    stamps = []
    for _ in range(n):
        t1 = time.time_ns()
        try:
            a.conn.send(wire.Ping(t1_ns=t1))
            while True:
                m = a.conn.recv(BEAT_TIMEOUT_S)
                if isinstance(m, wire.Pong) and m.t1_ns == t1:
                    break
        except (wire.Closed, socket.timeout) as e:
            a.lost = a.lost or f"its connection broke during the clock exchange ({e})"
            return None
        stamps.append(clock.Exchange(t1_ns=t1, t2_ns=m.t2_ns, t3_ns=m.t3_ns,
                                     t4_ns=time.time_ns()))
    return clock.estimate(stamps)


def wait_done(a: Agent, deadline_mono: float, seen: Callable[[str], str]) -> None:
    """Until the cell's Done; lost when it stays silent BEAT_TIMEOUT_S (what Swarm says of its
    task is added by ``seen``) or runs past the deadline."""
    while a.done is None and a.lost is None:
        left = deadline_mono - time.monotonic()
        if left <= 0:
            a.lost = "it did not finish before the run's deadline"
            return
        m = _recv(a, BEAT_TIMEOUT_S)
        if isinstance(m, wire.Done):
            a.done = m
    if a.lost:
        a.lost += seen(a.node)


def _recv(a: Agent, silence_s: float):
    """The next message (a beat included); None, with ``a.lost`` set, when the agent stayed
    silent ``silence_s`` or its connection broke."""
    try:
        return a.conn.recv(silence_s)
    except socket.timeout:
        a.lost = (f"its agent fell silent at {time.strftime('%H:%M:%S')} (no beat for "
                  f"{silence_s:.0f} s)")
    except (wire.Closed, ValueError) as e:
        a.lost = f"its agent's connection broke at {time.strftime('%H:%M:%S')} ({e})"
    return None


def fetch_dir(a: Agent, dest: Path) -> int:
    a.conn.send(wire.SendDir())
    return wire.recv_dir(a.conn, dest, 120)


def bye(a: Agent) -> None:
    try:
        a.conn.send(wire.Bye())
    except wire.Closed:
        pass
    a.conn.close()
