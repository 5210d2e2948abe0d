"""One cell of a run across hosts: the single-host runner on this node's Docker Engine, for
the share of devices the coordinator assigns, starting at the coordinator's T0.

Runs in the cell container the launcher starts on its node (``launcher.py``: host pid and
network namespaces, the node's Docker socket, cgroup and /dev/shm, a work directory at the
same path as on the node, so every path the runner hands the node's dockerd is the node's).
The conversation (``wire.py``): hello (this node's cores, limits, images) -> share -> the
runner plans, writes its slice of the trace and deploys -> deployed (the lead it needs) ->
pings answered (the clock exchange) -> start (T0) -> the test -> done -> pings (the clock
again) -> the run directory, sent back. A beat every second tells the coordinator the cell
is alive.
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Optional

from wotbench.distributed import cellges, targets, tracesplit, wire
from wotbench.distributed.clock import t0_mono_ns
from wotbench.configfile.yaml_loader import load_config
from wotbench.config.schema import Config
from wotbench.errors import EnvironmentProblem, WotbenchError
from wotbench.runner.main import Runner
from wotbench.runner.stages import CellSeat

CONNECT_S = 60.0
BEAT_S = 1.0
# after its Done, how long a cell waits for the coordinator's next word: it fetches and analyses
# the cells' run directories one after another (at 10^6 devices over 2 minutes each: the cells
# waiting 120 s left before theirs were fetched); a coordinator that dies closes the connection
AFTER_S = 3600.0


def log(msg: str) -> None:
    print(f"cell: {msg}", flush=True)


def dial(addr: str, timeout: float = CONNECT_S) -> wire.Conn:
    host, port = addr.rsplit(":", 1)
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            return wire.Conn(socket.create_connection((host, int(port)), timeout=5))
        except OSError as e:
            last = e
            time.sleep(0.5)
    raise EnvironmentProblem(f"the coordinator at {addr} does not answer ({last}): is "
                             "`wotbench run --backend swarm` still running there, and is its "
                             "port open between the nodes?")


def node_limit() -> Optional[int]:
    """How many devices this node's limits carry (the smallest), None when none is known."""
    from wotbench.runner.backends.docker.scalelimits import host_limits
    from wotbench.runner.prepare.hostlimits import supported_devices
    found = [lim.devices for lim in host_limits()] + [supported_devices()]
    found = [f for f in found if f is not None]
    return min(found) if found else None


def missing_images(client) -> list[str]:
    """The tags of the run's images (hashes of the binaries packed with this agent) that this
    node's Engine lacks."""
    import docker.errors
    from wotbench.runner.prepare import binaries
    from wotbench.runner.backends.docker.images import image_tag
    out = []
    for comp in (binaries.GE, binaries.DEVICE, binaries.HOG, binaries.FLEET):
        t = image_tag(comp.name, comp.binary())
        try:
            client.images.get(t)
        except docker.errors.ImageNotFound:
            out.append(t)
    return out


def hello(node: str) -> wire.Hello:
    from wotbench.runner.backends.docker.backend import docker_client
    client = docker_client()
    return wire.Hello(node=node, cores=sorted(os.sched_getaffinity(0)),
                      max_devices=node_limit(), docker=client.version().get("Version", ""),
                      missing_images=missing_images(client))


class Cell:
    def __init__(self, conn: wire.Conn, node: str, work: Path):
        self.conn, self.node, self.work = conn, node, work
        self.phase = "deploy"
        self._stop = threading.Event()
        self._since = self._last = time.monotonic()   # the share's arrival, the last stage

    def progress(self, done: str) -> None:
        """A preparation stage ended: one line in the agent's log (what, how long it took, how
        long since the share), and the beats carry it to the coordinator (its timeout names
        the last stage a cell reached)."""
        now = time.monotonic()
        log(f"{done} (+{now - self._last:.1f} s, {now - self._since:.1f} s since the share)")
        self._last = now
        self.phase = f"deploy: {done}"

    def _beat(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self.conn.send(wire.Beat(phase=self.phase))
            except wire.Closed:
                return

    def t0(self, run_dir: Path, lead: float) -> int:
        """The runner's T0 hook: say we are deployed, answer the clock exchange, take T0."""
        self.conn.send(wire.Deployed(lead_s=lead, run_dir=str(run_dir)))
        while True:
            m = self.conn.recv(None)
            if isinstance(m, wire.Ping):
                self.pong(m)
            elif isinstance(m, wire.Start):
                wall, mono = time.time_ns(), time.monotonic_ns()
                self.phase = "test"
                return t0_mono_ns(m.t0_wall_ns, m.offset_ns, wall, mono)
            elif isinstance(m, wire.Abort):
                raise EnvironmentProblem(f"the coordinator stopped the run before T0: {m.why}")

    def preflight(self, cfg: Config, devices: frozenset[str]) -> Optional[str]:
        """Whether this node reaches its share's external endpoints and holds its server
        images (``targets.preflight``); None, or why not (node, key, target, fix)."""
        import docker.errors
        from wotbench.runner.backends.docker.backend import docker_client
        client = docker_client()

        def has_image(tag: str) -> bool:
            try:
                client.images.get(tag)
                return True
            except docker.errors.ImageNotFound:
                return False
        return targets.preflight(cfg, devices, self.node, has_image)

    def pong(self, m: wire.Ping) -> None:
        t2 = time.time_ns()
        self.conn.send(wire.Pong(t1_ns=m.t1_ns, t2_ns=t2, t3_ns=time.time_ns()))

    def run(self, share: wire.Share) -> None:
        out = self.work / share.run_id / self.node
        out.mkdir(parents=True, exist_ok=True)
        config = out / share.config_name
        text = share.config_yaml
        if share.trace_csv is not None:   # a recorded trace: this cell's lines, on this node
            text = tracesplit.localise(text, out / "recorded", share.trace_csv, share.resources)
        config.write_text(text)
        self.progress(f"config written ({len(share.devices)} device(s) in the share)")
        beats = threading.Thread(target=self._beat, name="cell-beat", daemon=True)
        beats.start()   # from here on: the checks below take seconds
        try:
            try:   # read once: the checks below and the runner use it
                cfg, problem = load_config(config), None
            except WotbenchError as e:
                cfg, problem = None, f"{self.node}: the cell's config does not load there ({e})"
            if cfg is not None:
                self.progress(f"config loaded ({cfg.total_devices} device(s) in the run)")
            if cfg is not None and share.gateways not in (None, cfg.gateways.count):
                # its part of the run's GEs: its trace is split over these (device id mod count)
                self.progress(f"{share.gateways} of the run's {cfg.gateways.count} gateway "
                              "emulator(s) run here (the share's part)")
                cfg = cellges.with_gateways(cfg, share.gateways)
            mine = frozenset(share.devices)   # one set: every membership test below uses it
            problem = problem or self.preflight(cfg, mine)
            if problem:   # before the deploy: the coordinator stops every cell before T0
                log(problem)
                self.conn.send(wire.Done(ok=False, why=problem, exit_hint=1))
                return
            self.progress("the share's targets and server images checked")
            _host_visible_warden(out)
            seat = CellSeat(node=self.node, devices=mine, t0=self.t0,
                            progress=self.progress)
            outcome = Runner(config, out_root=out, backend="docker", cell=seat,
                             cfg=cfg).execute()
        finally:
            self._stop.set()
        err = outcome.error
        why = (str(err) if err else f"interrupted ({outcome.interrupted})"
               if outcome.interrupted else "a component failed" if outcome.aborted else None)
        code = getattr(err, "exit_code", None) if isinstance(err, WotbenchError) else None
        self.conn.send(wire.Done(ok=why is None, why=why, exit_hint=code or outcome.exit_hint))
        self.after(outcome.run_dir)

    def after(self, run_dir: Optional[Path]) -> None:
        """Answer the clock exchange after the run, then send the run directory."""
        while True:
            try:
                m = self.conn.recv(AFTER_S)
            except (wire.Closed, socket.timeout):
                return
            if isinstance(m, wire.Ping):
                self.pong(m)
            elif isinstance(m, wire.SendDir):
                if run_dir is None:
                    self.conn.send(wire.Chunk(data=""))
                else:
                    wire.send_dir(self.conn, run_dir)
            elif isinstance(m, wire.Bye):
                return


def _host_visible_warden(out: Path) -> None:
    """The warden is bind-mounted into every component from a path of the *node*: copy the
    image's into the work directory (the same path on the node) and point the runner at it."""
    src = Path(os.environ.get("WOTBENCH_WARDEN_IN", "/opt/wotbench/bin/wb-warden"))
    dst = out / "wb-warden"
    shutil.copy2(src, dst)
    dst.chmod(0o755)
    os.environ["WOTBENCH_WARDEN_BIN"] = str(dst)


def main(coordinator: str, node: str, work: Path) -> int:
    conn = dial(coordinator)
    try:
        conn.send(hello(node))
        m = conn.recv(600)
        if isinstance(m, wire.Abort):
            log(f"the coordinator stopped the run: {m.why}")
            return 0
        if not isinstance(m, wire.Share):
            raise EnvironmentProblem(f"unexpected {m.kind} from the coordinator")
        log(f"run {m.run_id}: {len(m.devices)} device(s) on {node}")
        if m.connected is not None:   # devices that stay connected: their own cell timeline
            from wotbench.distributed.connected_cell import run_share
            run_share(Cell(conn, node, work), m)
            return 0
        Cell(conn, node, work).run(m)
        return 0
    except (wire.Closed, socket.timeout) as e:
        log(f"the coordinator went away ({e})")
        return 1
    finally:
        conn.close()
