"""Connected devices for tests and benches (docs/CONNECTED.md): nginx with Debian's nchan module
as the edge server on loopback, a wot-fleet engine holding WebSocket / chunked device
connections (CONTRACTS §3c), and wot-rpcapp sending RPCs through the server (§3d)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from testkit.nginx import free_tcp_port, nginx_path
from wotbench.config.connected import CONNECTIONS_HEADER, EdgeServer
from wotbench.config.connected_wire import file_field, header_block, render
from wotbench.connected.edge import Edge

ROOT = Path(__file__).resolve().parents[1]
NCHAN_TEMPLATE = ROOT / "configs" / "attached-devices-nchan.conf"
NCHAN_MODULE = Path("/usr/lib/nginx/modules/ngx_nchan_module.so")
CONN_HEADER = CONNECTIONS_HEADER


def missing_prerequisite() -> str | None:
    """Why a connected-devices test cannot run here, or None."""
    if not nginx_path():
        return "nginx is not installed (apt-get install nginx)"
    if not NCHAN_MODULE.exists():
        return "nchan is not installed (apt-get install libnginx-mod-nchan; make build does)"
    if not Path("/usr/include/wslay/wslay.h").exists():
        return "wslay is not installed (apt-get install libwslay-dev; make build does)"
    return None


def build(directory: str, target: str) -> Path:
    r = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT / directory),
                        f"build/{target}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {target} failed:\n{r.stderr[-4000:]}")
    return ROOT / directory / "build" / target


class NchanServer:
    """nginx + nchan from configs/attached-devices-nchan.conf on host:<free port>, through the
    runner's own edge-server code (wotbench.connected.edge: rendered, checked with nginx -t,
    started unprivileged, ready when the port accepts); `workers` nginx workers."""

    def __init__(self, host: str = "127.0.0.1", workers: int = 1, worker_connections: int = 19000,
                 template: Path = NCHAN_TEMPLATE):
        self.dir = Path(tempfile.mkdtemp(prefix="wb-nchan-"))
        os.chmod(self.dir, 0o755)
        self.host, self.port = host, free_tcp_port(host)
        exe = nginx_path()
        base = ["-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
        spec = EdgeServer(command=[exe, *base], check=[exe, "-t", "-q", *base],
                          config_template=str(template), port=self.port)
        self.edge = Edge(spec, self.dir, host, workers, worker_connections,
                         resource.getrlimit(resource.RLIMIT_NOFILE)[1])

    @property
    def server(self) -> str:
        return self.edge.endpoint

    @property
    def proc(self):
        return self.edge.proc

    def start(self) -> "NchanServer":
        self.edge.prepare()
        self.edge.start()
        return self

    def pids(self) -> list[int]:
        return self.edge.pids()

    def stderr(self) -> str:
        return (self.dir / "edge-stderr.log").read_text(errors="replace")

    def stop(self) -> None:
        self.edge.stop()

    def __enter__(self):
        try:
            return self.start()
        except BaseException:        # __exit__ is not called when __enter__ raises
            self.__exit__()
            raise

    def __exit__(self, *exc):
        self.stop()
        self.edge.remove()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class ConnSpec:
    count: int
    protocol: str = "websocket"        # websocket | chunked | chunked-post
    first: int = 0
    shards: int = 1
    heartbeat_ms: int = 0
    event_ms: int = 0
    service_us: int = 1000
    reply_bytes: int = 256
    reconnect_ms: int = 0
    sources: tuple[str, ...] = ()      # source addresses, round-robin ('' = the kernel's)
    attach_headers: dict[str, str] | None = None   # {device}/{shard} filled per device
    attach_body: str | None = None
    path: str = "/dev/{device}/{shard}"
    reply_path: str = "/up/{device}/{shard}"       # chunked; may hold {id} (--reply-id path)
    delimiter: str | None = None       # chunked/chunked-post: ends every message (framing)


def write_connections(path: Path, server: str, specs: list[ConnSpec]) -> Path:
    framed = any(s.delimiter is not None for s in specs)
    lines = [CONN_HEADER + (",delimiter" if framed else "")]
    for s in specs:
        for i in range(s.first, s.first + s.count):
            fields = {"device": i, "shard": i % s.shards}
            p = render(s.path, fields)
            up = render(s.reply_path, fields) if s.protocol == "chunked" else ""
            src = s.sources[i % len(s.sources)] if s.sources else ""
            hdr = file_field(render(header_block(s.attach_headers or {}), fields))
            body = file_field(render(s.attach_body, fields)) if s.attach_body else ""
            lines.append(f"{i},c{i},{s.protocol},{server},{src},{p},{up},"
                         f"{s.heartbeat_ms},{s.event_ms},"
                         f"{s.service_us},{s.reply_bytes},{s.reconnect_ms},{hdr},{body}"
                         + (f",{file_field(s.delimiter or '')}" if framed else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


class ConnFleet:
    """wot-fleet --connections FILE; waits for DIR/attached (every device attached once)."""

    def __init__(self, binary: Path, directory: Path, server: str, specs: list[ConnSpec],
                 *args: str, name: str = "conn"):
        self.dir = directory / name
        self.out = self.dir / "out"
        self.out.mkdir(parents=True, exist_ok=True)
        self.file = write_connections(self.dir / "connections.csv", server, specs)
        self.cmd = [str(binary), "--connections", str(self.file), "--log-dir", str(self.out),
                    "--name", name, *args]
        self.proc: subprocess.Popen | None = None
        self.attached_s: float | None = None

    def start(self, attach_timeout: float = 60.0, wait: bool = True) -> "ConnFleet":
        self.err = open(self.dir / "stderr.txt", "wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self.err)
        if not wait:
            return self
        deadline = t0 + attach_timeout
        while time.monotonic() < deadline:
            if (self.out / "attached").exists():
                self.attached_s = time.monotonic() - t0
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"wot-fleet did not attach every device within {attach_timeout} s: "
                           f"{(self.dir / 'stderr.txt').read_text()[-2000:]}")

    def stop(self) -> dict:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        summary = self.out / "conn-summary.json"
        if not summary.exists():
            raise RuntimeError(f"wot-fleet exited {rc} without conn-summary.json: "
                               f"{(self.dir / 'stderr.txt').read_text()[-2000:]}")
        return json.loads(summary.read_text())

    def log_rows(self) -> list[dict]:
        import csv
        rows: list[dict] = []
        for f in sorted(self.out.glob("conn-log-*.csv")):
            with f.open() as fp:
                rows += list(csv.DictReader(fp))
        return rows


def run_rpcapp(binary: Path, out: Path, server: str, devices: tuple[int, int], apps: int,
               shards: int, duration_s: int, think_ms: tuple[int, int] = (1000, 3000),
               timeout_ms: int = 5000, warmup_s: int = 0, cpu: int | None = None,
               source: str | None = None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(binary), "--server", server, "--devices", f"{devices[0]}:{devices[1]}",
            "--log-dir", str(out), "--apps", str(apps), "--shards", str(shards),
            "--think-ms", f"{think_ms[0]}:{think_ms[1]}", "--timeout-ms", str(timeout_ms),
            "--duration-s", str(duration_s), "--warmup-s", str(warmup_s)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    if source:
        argv += ["--source", source]
    r = subprocess.run(argv, capture_output=True, text=True,
                       timeout=duration_s + timeout_ms / 1000 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"wot-rpcapp exit {r.returncode}: {r.stderr[-2000:]}")
    return json.loads((out / "rpc-summary.json").read_text())
