"""A scripted edge server for wire tests of connected devices and wot-rpcapp
(docs/CONNECTED.md): it records every request as it arrived on the wire (method, target,
header lines, body) and every WebSocket message a client sent, and lets a test answer: a
WebSocket Upgrade gets its 101 (Sec-WebSocket-Accept computed), a GET a chunked 200 held open,
a POST `post_status` with an empty body, and a POST with a chunked body (the study's attach,
held open both ways) a chunked 200 at once while its body's chunks are read as they come, each
recorded in `up_chunks`. `on_open(conn)` runs once a WebSocket, chunked subscription or held-open
POST is open, `on_post(request)` for every POST with a Content-Length; `conn.send(text)` pushes
a message down (an unmasked text frame, or a chunk), `conn.close()` ends the connection.
Every data frame a WebSocket client sent is also in `ws_frames` (`WsFrame`: the connection's
target, whether it was masked, its opcode and text), and `on_ws_message(conn, text)` runs for
each: e.g. an application's own WebSocket whose RPC frames the server answers (acks) and
relays."""
from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from testkit.nginx import free_tcp_port

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@dataclass
class Request:
    method: str
    target: str
    head: str                                   # the request line and header lines as sent
    headers: dict[str, str]                     # lower-case names
    body: bytes = b""


@dataclass
class WsFrame:
    target: str                                 # the WebSocket's Upgrade target
    masked: bool                                # RFC 6455: every client frame is masked
    opcode: int
    text: str


@dataclass
class Conn:
    sock: socket.socket
    kind: str                                   # "ws" | "chunked"
    request: Request
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, text: str, opcode: int = 0x1) -> None:
        """A message down: a WebSocket frame of `opcode` (text; 0x9 a ping), or a chunk."""
        data = text.encode()
        if self.kind == "ws":
            n, b0 = len(data), 0x80 | opcode
            head = (bytes([b0, n]) if n < 126 else bytes([b0, 126]) + struct.pack("!H", n))
            out = head + data
        else:
            out = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        with self.lock:
            self.sock.sendall(out)

    def close(self) -> None:
        """The server ends the connection (a FIN; the serving thread then sees EOF)."""
        with self.lock:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Reader:
    def __init__(self, sock: socket.socket, stop: threading.Event):
        self.sock, self.stop, self.buf = sock, stop, b""

    def _more(self) -> None:
        while not self.stop.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise EOFError
            self.buf += data
            return
        raise EOFError

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self) -> str:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        return head.decode("latin-1")

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._more()
        out, _, self.buf = self.buf.partition(b"\r\n")
        return out

    def chunk(self) -> Optional[bytes]:
        """One chunk of a chunked body (its data; None for the last, empty, chunk)."""
        size = int(self.line().split(b";")[0], 16)
        data = self.take(size)
        if self.take(2) != b"\r\n":
            raise ValueError("a chunk's data not followed by CRLF")
        return data if size else None

    def frame(self) -> tuple[int, bytes]:
        """One client frame: (opcode, unmasked payload); `last_masked` says whether it was."""
        b0, b1 = self.take(2)
        self.last_masked = bool(b1 & 0x80)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self.take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self.take(8))[0]
        mask = self.take(4) if b1 & 0x80 else b"\0\0\0\0"
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(self.take(n)))
        return b0 & 0x0F, data


def parse_head(head: str) -> Request:
    lines = head.split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return Request(method, target, head, headers)


class ScriptedEdge:
    def __init__(self, on_open: Optional[Callable[[Conn], None]] = None,
                 on_post: Optional[Callable[[Request], None]] = None, post_status: int = 200,
                 first_frames: bytes = b"", held_status: int = 200, read_held: bool = True,
                 on_ws_message: Optional[Callable[[Conn, str], None]] = None):
        self.on_open, self.on_post, self.post_status = on_open, on_post, post_status
        self.on_ws_message = on_ws_message
        # a held-open POST: the status of its answer (a non-200 one has an empty body and the
        # connection is closed), and whether its body is read (False: a server that stalls)
        self.held_status, self.read_held = held_status, read_held
        self.first_frames = first_frames    # sent in the same segment as a 101
        self.port = free_tcp_port("127.0.0.1")
        self.requests: list[Request] = []
        self.ws_messages: list[str] = []
        self.ws_frames: list[WsFrame] = []
        self.up_chunks: list[str] = []           # chunks of held-open POSTs' bodies
        self.conns: list[Conn] = []
        self.errors: list[str] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_for(self, cond: Callable[[], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(0.02)
        return cond()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(0.2)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, sock: socket.socket) -> None:
        r = _Reader(sock, self.stop)
        try:
            with sock:
                while True:
                    req = parse_head(r.head())
                    if req.headers.get("upgrade", "").lower() == "websocket":
                        self._websocket(sock, r, req)
                        return
                    if req.headers.get("transfer-encoding", "").lower() == "chunked":
                        self._held_post(sock, r, req)
                        return
                    req.body = r.take(int(req.headers.get("content-length", "0")))
                    self.requests.append(req)
                    if req.method == "GET":
                        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n")
                        self._opened(Conn(sock, "chunked", req))
                        while True:           # held open until the client ends it
                            r.take(1)
                    if self.on_post:
                        self.on_post(req)
                    sock.sendall(f"HTTP/1.1 {self.post_status} X\r\nContent-Length: 0\r\n\r\n"
                                 .encode())
        except (EOFError, OSError):
            return
        except Exception as e:                # a failed check in a callback: the test reads it
            self.errors.append(repr(e))

    def _held_post(self, sock: socket.socket, r: _Reader, req: Request) -> None:
        self.requests.append(req)
        if self.held_status != 200:
            sock.sendall(f"HTTP/1.1 {self.held_status} X\r\nContent-Length: 0\r\n\r\n".encode())
            return
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        self._opened(Conn(sock, "chunked", req))
        while not self.read_held and not self.stop.is_set():
            time.sleep(0.05)
        while (data := r.chunk()) is not None:
            self.up_chunks.append(data.decode("utf-8", "replace"))

    def _opened(self, c: Conn) -> None:
        self.conns.append(c)
        if self.on_open:
            self.on_open(c)

    def _websocket(self, sock: socket.socket, r: _Reader, req: Request) -> None:
        self.requests.append(req)
        accept = base64.b64encode(hashlib.sha1(
            (req.headers["sec-websocket-key"] + GUID).encode()).digest()).decode()
        sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept.encode()
                     + b"\r\n\r\n" + self.first_frames)
        c = Conn(sock, "ws", req)
        self._opened(c)
        while not self.read_held and not self.stop.is_set():   # a server that stopped reading
            time.sleep(0.05)
        while True:
            op, data = r.frame()
            if op == 0x8:
                return
            if op == 0x9:                     # ping: pong with the same payload
                with c.lock:
                    sock.sendall(bytes([0x8A, len(data)]) + data)
            elif op == 0xA:                   # a pong: recorded, not a message
                self.ws_frames.append(WsFrame(req.target, r.last_masked, op,
                                              data.decode("utf-8", "replace")))
            elif op in (0x1, 0x2):
                text = data.decode("utf-8", "replace")
                self.ws_messages.append(text)
                self.ws_frames.append(WsFrame(req.target, r.last_masked, op, text))
                if self.on_ws_message:
                    self.on_ws_message(c, text)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(2)
        self.sock.close()

    def __enter__(self) -> "ScriptedEdge":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
