"""The control connection between the coordinator and a cell agent: typed messages, one per
frame (4-byte big-endian length, then the message's JSON), over one TCP connection that the
agent opens to the coordinator. Requests never cross it: only control, clock stamps and, at
the end, the cell's run directory (a tar stream, in ``chunk`` messages).

The agent dials out (not the coordinator in), so the coordinator needs no route into the
nodes' container networks: it listens on its own node's Swarm address, which every node
reaches already (docs/CLUSTER.md, "Design of backend: swarm").
"""
from __future__ import annotations

import base64
import io
import socket
import struct
import tarfile
import threading
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, Field, RootModel, TypeAdapter

MAX_FRAME = 64 << 20
CHUNK = 1 << 20


class Hello(BaseModel):
    """The agent's first message: what its node offers."""
    kind: Literal["hello"] = "hello"
    node: str
    cores: list[int]                  # usable cores (the cell container's affinity)
    max_devices: Optional[int] = None  # what the node's limits carry (None: no limit known)
    docker: str = ""
    missing_images: list[str] = []


class ConnectedShare(BaseModel):
    """A connected run's cell (docs/CONNECTED.md "Cells on a cluster"): its devices as ranges
    of each connected group, its applications' ids, and the one edge server's address."""
    groups: dict[int, tuple[int, int]]   # device group index -> (offset in it, count)
    first_app: int = 0
    apps: int = 0                         # 0: this cell runs no applications
    endpoint: str                         # the edge server, address:port
    cells: int = 1                        # how many cells attach at once (the attach rate)
    index: int = 0                        # this cell's place: its reply shards (connected_routes)


class ConnectedSplit(RootModel[dict[str, ConnectedShare]]):
    """A connected run's ``connected-split.json`` (MergedRunDir): node -> its cell's share,
    written by the coordinator before T0."""


class Share(BaseModel):
    """The coordinator's answer: the config and this cell's devices."""
    kind: Literal["share"] = "share"
    run_id: str
    config_yaml: str
    config_name: str                  # file name, for messages
    devices: list[str]                # global device names of this cell
    # trace: (a recorded trace) the lines of this cell's devices, global ids kept, and every
    # resource file (name -> text); None for a generated workload (wotbench.distributed.tracesplit)
    trace_csv: Optional[str] = None
    resources: dict[str, str] = {}
    # the main GEs this cell runs: its part of the config's gateways.count
    # (wotbench.distributed.cellges); None: the config's count (an older coordinator)
    gateways: Optional[int] = None
    connected: Optional[ConnectedShare] = None   # a connected run: wotbench.distributed.connected_cell


class Deployed(BaseModel):
    """The cell's devices answer; it needs ``lead_s`` between T0's arrival and T0."""
    kind: Literal["deployed"] = "deployed"
    lead_s: float
    run_dir: str


class Ping(BaseModel):
    kind: Literal["ping"] = "ping"
    t1_ns: int


class Pong(BaseModel):
    kind: Literal["pong"] = "pong"
    t1_ns: int
    t2_ns: int
    t3_ns: int


class Start(BaseModel):
    kind: Literal["start"] = "start"
    t0_wall_ns: int                   # the coordinator's wall clock
    offset_ns: float                  # the cell's clock minus the coordinator's (before)


class Abort(BaseModel):
    kind: Literal["abort"] = "abort"
    why: str


class Beat(BaseModel):
    """The agent is alive (once a second while its cell runs)."""
    kind: Literal["beat"] = "beat"
    phase: str = ""


class Done(BaseModel):
    kind: Literal["done"] = "done"
    ok: bool                          # the runner ended without error (the verdict is later)
    why: Optional[str] = None
    exit_hint: Optional[int] = None   # 2: bad input, 1: environment (the cell's own words in why)


class SendDir(BaseModel):
    kind: Literal["senddir"] = "senddir"


class Chunk(BaseModel):
    kind: Literal["chunk"] = "chunk"
    data: str                         # base64 of the next part of the tar stream ("" : end)


class Bye(BaseModel):
    kind: Literal["bye"] = "bye"


Message = Annotated[Union[Hello, Share, Deployed, Ping, Pong, Start, Abort, Beat, Done, SendDir,
                          Chunk, Bye], Field(discriminator="kind")]
_ADAPTER = TypeAdapter(Message)


class Closed(ConnectionError):
    """The other side closed the connection (or it broke)."""


class Conn:
    """One control connection; ``send`` may be called from two threads (the agent's beats)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._wlock = threading.Lock()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, msg: BaseModel) -> None:
        data = msg.model_dump_json().encode()
        with self._wlock:
            try:
                self.sock.sendall(struct.pack(">I", len(data)) + data)
            except OSError as e:
                raise Closed(str(e)) from None

    def recv(self, timeout: Optional[float] = None):
        """The next message; socket.timeout when none came in ``timeout`` s; Closed at EOF."""
        self.sock.settimeout(timeout)
        (n,) = struct.unpack(">I", self._exact(4))
        if n > MAX_FRAME:
            raise Closed(f"frame of {n} bytes (a stray connection?)")
        return _ADAPTER.validate_json(self._exact(n))

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                part = self.sock.recv(n - len(buf))
            except socket.timeout:
                if buf:   # mid-frame: the peer stalled; a frame is never left half read
                    raise Closed("the connection stalled mid-message") from None
                raise
            except OSError as e:
                raise Closed(str(e)) from None
            if not part:
                raise Closed("connection closed")
            buf += part
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def send_dir(conn: Conn, path: Path) -> None:
    """The directory as a gzip tar stream in Chunk messages, then an empty Chunk."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(path), arcname=".")
    data = buf.getvalue()
    for k in range(0, len(data), CHUNK):
        conn.send(Chunk(data=base64.b64encode(data[k:k + CHUNK]).decode()))
    conn.send(Chunk(data=""))


def recv_dir(conn: Conn, dest: Path, timeout: float) -> int:
    """Unpack the stream of ``send_dir`` into ``dest``; its size in bytes."""
    buf = io.BytesIO()
    while True:
        m = conn.recv(timeout)
        if isinstance(m, Beat):
            continue
        if not isinstance(m, Chunk):
            raise Closed(f"expected the run directory, got {m.kind}")
        if not m.data:
            break
        buf.write(base64.b64decode(m.data))
    buf.seek(0)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=buf, mode="r:gz") as tar:
        tar.extractall(dest, filter="data")   # no absolute paths, no links out of dest
    return buf.getbuffer().nbytes
