"""Minimal CoAP-over-UDP codec and client for the wot-device tests (RFC 7252 subset).

The client answers separate CON responses with an empty ACK, as the gateway emulator must.
"""
import os
import socket
import struct
import time

CON, NON, ACK, RST = 0, 1, 2, 3
GET, POST, PUT, DELETE = 1, 2, 3, 4
OPT_URI_PATH = 11


def code_str(code: int) -> str:
    return f"{code >> 5}.{code & 31:02d}"


def encode(mtype: int, code: int, mid: int, token: bytes = b"", path: str = "",
           payload: bytes = b"") -> bytes:
    out = bytearray([0x40 | (mtype << 4) | len(token), code]) + struct.pack("!H", mid) + token
    last = 0
    for seg in [s for s in path.split("/") if s]:
        val = seg.encode()
        delta, last = OPT_URI_PATH - last, OPT_URI_PATH
        ln = len(val)
        dn, de = (delta, b"") if delta < 13 else (13, bytes([delta - 13]))
        if ln < 13:
            lnn, le = ln, b""
        elif ln < 269:
            lnn, le = 13, bytes([ln - 13])
        else:
            lnn, le = 14, struct.pack("!H", ln - 269)
        out += bytes([(dn << 4) | lnn]) + de + le + val
    if payload:
        out += b"\xff" + payload
    return bytes(out)


def decode(data: bytes) -> dict:
    """Header, token and payload of a datagram (options are skipped)."""
    if len(data) < 4:
        raise ValueError("short")
    tkl = data[0] & 0x0F
    msg = {"type": (data[0] >> 4) & 3, "code": data[1], "mid": struct.unpack("!H", data[2:4])[0],
           "token": data[4:4 + tkl], "payload": b""}
    i = 4 + tkl
    while i < len(data):
        if data[i] == 0xFF:
            msg["payload"] = data[i + 1:]
            break
        d, ln = data[i] >> 4, data[i] & 15
        i += 1
        for v in (d, ln):
            if v == 13:
                i += 1
            elif v == 14:
                i += 2
        if ln == 13:
            ln = data[i - 1] + 13
        elif ln == 14:
            ln = struct.unpack("!H", data[i - 2:i])[0] + 269
        i += ln
    return msg


class Client:
    """One UDP socket; requests carry an 8-byte token; responses matched by token."""

    def __init__(self, addr: tuple[str, int]):
        self.addr = addr
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.mid = int.from_bytes(os.urandom(2), "big")
        self.pending: dict[bytes, int] = {}     # token -> send time (ns)
        self.sent_tokens: list[bytes] = []      # in send order
        self.results: dict[bytes, dict] = {}    # token -> response + times
        self.acks = 0          # ACKs we sent for separate CON responses
        self.empty_acks = 0    # empty ACKs received (request accepted, answer later)

    def close(self):
        self.sock.close()

    def send(self, code: int, path: str, mtype: int = CON, payload: bytes = b"") -> bytes:
        self.mid = (self.mid + 1) & 0xFFFF
        token = os.urandom(8)
        self.sent_tokens.append(token)
        self.pending[token] = time.monotonic_ns()
        self.sock.sendto(encode(mtype, code, self.mid, token, path, payload), self.addr)
        return token

    def poll(self, timeout: float) -> None:
        """Receives datagrams until timeout or nothing is pending."""
        deadline = time.monotonic() + timeout
        while self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(2048)
            except socket.timeout:
                return
            now = time.monotonic_ns()
            m = decode(data)
            if m["type"] == CON:  # separate response: acknowledge it
                self.sock.sendto(encode(ACK, 0, m["mid"]), self.addr)
                self.acks += 1
            if m["type"] == ACK and m["code"] == 0:
                self.empty_acks += 1
                continue  # empty ACK of a request answered later
            tok = m["token"]
            if tok in self.pending and m["code"] != 0:
                m["sent_ns"] = self.pending.pop(tok)
                m["recv_ns"] = now
                m["rt_ns"] = now - m["sent_ns"]
                self.results[tok] = m

    def request(self, code: int, path: str, mtype: int = CON, payload: bytes = b"",
                timeout: float = 5.0) -> dict | None:
        tok = self.send(code, path, mtype, payload)
        self.poll(timeout)
        return self.results.pop(tok, None)


def ping(addr: tuple[str, int], timeout: float = 0.2) -> bool:
    """Empty CON; True when an RST with the same message ID comes back."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        mid = int.from_bytes(os.urandom(2), "big")
        s.sendto(encode(CON, 0, mid), addr)
        try:
            m = decode(s.recv(2048))
        except (socket.timeout, ConnectionRefusedError, ValueError):
            return False
        return m["type"] == RST and m["mid"] == mid
