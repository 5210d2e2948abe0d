"""Helpers for the gateway-emulator tests: a scriptable Python CoAP responder on loopback,
trace writing, running the GE and reading its outputs."""
import csv
import json
import random
import socket
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

REQ_HEADER = ("index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,"
              "retransmissions,received_kernel_ns,client,phase")
SUMMARY_KEYS = {"label", "trace", "requests", "outcomes", "start_mono_ns", "end_mono_ns",
                "duration_s", "offered_rate", "achieved_rate", "send_lag_us", "wait", "type",
                "timeout_ms", "retransmit", "ports_per_device", "interrupted", "warmup", "token_salt",
                "rx_stamps", "clock_map_bracket_ns", "memory_locked", "clients"}
OPTIONAL_KEYS = {"dtls", "closed_loop", "http"}   # only with coaps:// / --clients / http://
OUTCOMES = {"ok", "error", "timeout", "reset", "unsent"}
CON, NON, ACK, RST = 0, 1, 2, 3


def loopback_addr() -> str:
    """A random 127.0.x.y address so parallel tests do not collide."""
    return f"127.{random.randint(1, 254)}.{random.randint(0, 254)}.{random.randint(2, 254)}"


def free_port(host: str) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def parse(msg: bytes):
    """(type, code, mid, token) of a CoAP datagram."""
    b0, code, mid = struct.unpack("!BBH", msg[:4])
    tkl = b0 & 0x0F
    return (b0 >> 4) & 3, code, mid, msg[4:4 + tkl]


def build(mtype: int, code: int, mid: int, token: bytes = b"", payload: bytes = b"") -> bytes:
    m = struct.pack("!BBH", 0x40 | mtype << 4 | len(token), code, mid) + token
    return m + (b"\xff" + payload if payload else b"")


class Responder:
    """UDP CoAP responder in a thread. mode:
    ok        piggybacked 2.05 in an ACK (NON request -> NON 2.05)
    rst       RST for every request
    drop_first  ignore the first copy of every (port, MID), answer later copies
    separate  empty ACK now, CON 2.05 response after `delay` s (records the GE's ACKs)
    delayed   piggybacked 2.05 sent `delay` s after arrival
    silent    record, never answer
    Records every request as (arrival monotonic ns, src port, type, mid, token)."""

    def __init__(self, mode: str = "ok", delay: float = 0.0, host: str | None = None):
        self.mode, self.delay = mode, delay
        self.host = host or loopback_addr()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((self.host, 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.05)
        self.requests: list[tuple[int, int, int, int, bytes]] = []
        self.acks: list[tuple[int, int]] = []  # (type, mid) of empty ACK/RST from the GE
        self.pings = 0                          # empty CONs (CoAP pings), answered with RST
        self.seen: set[tuple[int, int]] = set()
        self.first_reply_ns: int | None = None
        self._pending: list[tuple[float, bytes, tuple]] = []
        self._mid = random.randint(0, 65535)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def uri(self, path: str = "r") -> str:
        return f"coap://{self.host}:{self.port}/{path}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _send(self, data: bytes, addr):
        if self.first_reply_ns is None:
            self.first_reply_ns = time.monotonic_ns()
        self.sock.sendto(data, addr)

    def _flush(self):
        now = time.monotonic()
        due = [p for p in self._pending if p[0] <= now]
        self._pending = [p for p in self._pending if p[0] > now]
        for _, data, addr in due:
            self._send(data, addr)

    def _run(self):
        while not self._stop.is_set():
            self._flush()
            try:
                data, addr = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            t = time.monotonic_ns()
            mtype, code, mid, tok = parse(data)
            if code == 0 and mtype == CON:   # CoAP ping (RFC 7252 §4.3): RST
                self.pings += 1
                self._send(build(RST, 0, mid), addr)
                continue
            if code == 0:
                self.acks.append((mtype, mid))
                continue
            self.requests.append((t, addr[1], mtype, mid, tok))
            self._answer(mtype, mid, tok, addr)

    def _answer(self, mtype, mid, tok, addr):
        reply_type = ACK if mtype == CON else NON
        ok = build(reply_type, 0x45, mid if mtype == CON else self._next_mid(), tok, b"hi")
        if self.mode == "ok":
            self._send(ok, addr)
        elif self.mode == "rst":
            self._send(build(RST, 0, mid), addr)
        elif self.mode == "drop_first":
            if (addr[1], mid) in self.seen:
                self._send(ok, addr)
            self.seen.add((addr[1], mid))
        elif self.mode == "delayed":
            self._pending.append((time.monotonic() + self.delay, ok, addr))
        elif self.mode == "separate":
            if mtype == CON:
                self._send(build(ACK, 0, mid), addr)
            resp = build(CON, 0x45, self._next_mid(), tok, b"late")
            self._pending.append((time.monotonic() + self.delay, resp, addr))

    def _next_mid(self) -> int:
        self._mid = (self._mid + 1) & 0xFFFF
        return self._mid


@contextmanager
def libcoap_dynamic_server():
    """libcoap's coap-server-notls with dynamic resources (-d): a PUT to a new path creates a
    resource holding the PUT's payload and listed in /.well-known/core; yields its base URI."""
    host = loopback_addr()
    port = free_port(host)
    srv = subprocess.Popen(["coap-server-notls", "-A", host, "-p", str(port), "-d", "1000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        yield f"coap://{host}:{port}"
    finally:
        srv.terminate()
        srv.wait(timeout=5)


def write_trace(path: Path, rows, header: bool = True) -> Path:
    lines = ["device_id,send_time_us,method,uri"] if header else []
    lines += [",".join(str(x) for x in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_ge(binary: Path, trace: Path, out: Path, *args: str, timeout: float = 60):
    return subprocess.run([str(binary), "--trace", str(trace), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout)


def read_requests(out: Path) -> list[dict]:
    with open(out / "requests.csv", newline="") as f:
        assert f.readline().rstrip("\n") == REQ_HEADER
        f.seek(0)
        return list(csv.DictReader(f))


def read_summary(out: Path) -> dict:
    """summary.json as a dict, checked against its model (every key the GE writes, no other)."""
    from wotbench.rundir.ge_files import GeSummary
    data = json.loads((out / "summary.json").read_text())
    GeSummary.model_validate(data)
    return data


def check_consistent(out: Path, n: int) -> tuple[list[dict], dict]:
    """Schema of both files, one outcome per request, counts add up; returns (rows, summary)."""
    rows = read_requests(out)
    s = read_summary(out)
    assert set(s) - OPTIONAL_KEYS == SUMMARY_KEYS
    assert set(s["outcomes"]) == OUTCOMES
    assert set(s["send_lag_us"]) == {"p50", "p90", "p99", "p999", "max"}
    assert s["requests"] == n == len(rows)
    assert sum(s["outcomes"].values()) == n
    assert [int(r["index"]) for r in rows] == list(range(n))
    for o in OUTCOMES:
        assert s["outcomes"][o] == sum(r["outcome"] == o for r in rows)
    for r in rows:
        assert r["outcome"] in OUTCOMES
        if r["outcome"] == "ok":   # CoAP 2.xx, HTTP 2xx
            assert r["code"][:2] in ("2.", "20") and r["received_ns"] and r["sent_ns"]
            assert int(r["received_ns"]) > int(r["sent_ns"]) >= 0
            assert s["rx_stamps"] != "kernel" or r["received_kernel_ns"]
        if r["received_kernel_ns"]:  # the kernel stamp lies between the send and the read
            assert r["received_ns"] and r["sent_ns"]
            assert int(r["sent_ns"]) <= int(r["received_kernel_ns"]) <= int(r["received_ns"])
        if r["outcome"] in ("timeout", "unsent"):
            assert r["code"] == "" and r["received_ns"] == ""
        if r["outcome"] == "unsent":
            assert r["sent_ns"] == ""
    return rows, s
