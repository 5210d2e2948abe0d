"""Debian's nginx on loopback with a config of our own in a temporary directory (never the
system service): for the GE's HTTP tests, the HTTP bench and the examples."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

# everything but the server's locations (testkit/nchan.py serves others)
HEAD = """worker_processes {workers};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
"""
CONF = HEAD + """  server {{
    listen {host}:{port} backlog=4096;
    root {d}/html;
    location / {{ }}
    location /echo {{ client_max_body_size 2m; return 200 "ok"; }}
  }}
}}
"""


def nginx_path() -> str | None:
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def free_tcp_port(host: str) -> int:
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nginx:
    """nginx -c <dir>/nginx.conf, serving <dir>/html (index.html: `body` bytes) and /echo.
    <dir> is a fresh world-readable directory (started as root, nginx's workers run as
    nobody and must read the files), removed on exit."""

    conf = CONF   # a subclass serves other locations (testkit/nchan.py)

    def __init__(self, host: str = "127.0.0.1", workers: int = 1,
                 body: bytes = b"hello world\n", cpu: int | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="wb-nginx-"))
        os.chmod(self.dir, 0o755)
        self.host, self.workers, self.cpu = host, workers, cpu
        self.port = free_tcp_port(host)
        self.body = body
        self.proc: subprocess.Popen | None = None

    def uri(self, path: str = "index.html") -> str:
        return f"http://{self.host}:{self.port}/{path}"

    def __enter__(self):
        exe = nginx_path()
        if not exe:
            raise FileNotFoundError("nginx is not installed (apt-get install nginx)")
        (self.dir / "html").mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(exist_ok=True)
        (self.dir / "html" / "index.html").write_bytes(self.body)
        conf = self.dir / "nginx.conf"
        conf.write_text(self.conf.format(d=self.dir, host=self.host, port=self.port,
                                    workers=self.workers))
        argv = [exe, "-c", str(conf), "-p", str(self.dir)]
        if self.cpu is not None:
            argv = ["taskset", "-c", str(self.cpu)] + argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited: {self.proc.stderr.read().decode()[-500:]}")
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("nginx did not listen within 5 s")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()   # the master stops its workers
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
