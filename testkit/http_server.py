"""A tiny scriptable HTTP/1.1 server on loopback for the GE's HTTP tests: one thread per
connection, every request recorded, the answer chosen by `mode`:

length     200 with Content-Length, the body written in two pieces
chunked    200 chunked, split across writes, with a trailer
eof        200 without length: the body ends when the server closes
close      200 with Content-Length and "Connection: close", then closes
status:N   status N (e.g. status:503) with a short body
reset      reads the request, then resets the connection (RST)
slow       answers after `delay` seconds
silent     reads, never answers
"""
import socket
import struct
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Seen:
    conn: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    at_ns: int = field(default_factory=time.monotonic_ns)


class HttpServer:
    def __init__(self, mode: str = "length", delay: float = 0.0, host: str = "127.0.0.1"):
        self.mode, self.delay = mode, delay
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(512)
        self.host, self.port = self.sock.getsockname()
        self.seen: list[Seen] = []
        self.conns = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def uri(self, path: str = "r") -> str:
        return f"http://{self.host}:{self.port}/{path}"

    def __enter__(self):
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.sock.close()
        for t in self._threads:
            t.join(timeout=2)

    def _accept(self):
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self.conns += 1
                cid = self.conns
            t = threading.Thread(target=self._serve, args=(c, cid), daemon=True)
            t.start()
            self._threads.append(t)

    def _read_request(self, c, buf: bytes):
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return None, buf
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            d = c.recv(65536)
            if not d:
                return None, b""
            rest += d
        return (method, target, headers, rest[:n]), rest[n:]

    def _serve(self, c, cid):
        c.settimeout(0.05)
        buf = b""
        while not self._stop.is_set():
            try:
                req, buf = self._read_request(c, buf)
            except socket.timeout:
                continue
            except OSError:
                break
            if req is None:
                break
            with self._lock:
                self.seen.append(Seen(cid, *req))
            if not self._answer(c, req):
                break
        c.close()

    def _answer(self, c, req) -> bool:
        mode = self.mode
        if mode == "silent":
            self._stop.wait(30)
            return False
        if mode == "reset":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if mode == "slow":
            time.sleep(self.delay)
        body = b"hello from the test server"
        if mode.startswith("status:"):
            code = int(mode.split(":")[1])
            c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: 3\r\n\r\nno!" % code)
        elif mode in ("length", "slow"):
            head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
            c.sendall(head + body[:5])
            time.sleep(0.002)
            c.sendall(body[5:])
        elif mode == "chunked":
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
            time.sleep(0.002)
            c.sendall(b"lo\r\n1A;ext=1\r\n" + b"y" * 26 + b"\r\n0\r\nX-Trailer: 1\r\n\r\n")
        elif mode == "eof":
            c.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + body)
            return False
        elif mode == "close":
            c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
            return False
        return True
