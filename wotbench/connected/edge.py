"""The edge server under test of a connected run (``edge_server``): its config rendered from
the template (fields {address} {port} {name} {scratch} {workers} {worker_connections}
{worker_nofile}; every other brace is the server's), checked with its own checker before
anything starts (a refusal names the template), started unprivileged (uid/gid 65534 when
WoTbench runs as root) on loopback, ready when its port accepts, stopped with SIGTERM."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

from wotbench.config.connected import EdgeServer
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir.layout import EDGE_STDERR
from wotbench.runner.deployment import thirdparty

NOBODY = 65534
READY_TIMEOUT_S = 20
CHECK_TIMEOUT_S = 30
_FIELD = re.compile(r"\{(address|port|name|scratch|workers|worker_connections|worker_nofile)\}")


def render(template: str, values: dict[str, str]) -> str:
    return _FIELD.sub(lambda m: values[m.group(1)], template)


def _ensure_compiled_temp_dirs(exe: str) -> None:
    """nginx with a module loaded (nchan) still creates its compiled-in temp directories
    (``nginx -V``: --http-*-temp-path=/var/lib/nginx/...) at start and at ``-t``, though the
    template points every temp path at {scratch}; unprivileged, that mkdir fails unless they
    exist. Create them as root (nginx's own first start would); nothing is written there."""
    if os.getuid() != 0 or Path(exe).name != "nginx":
        return
    r = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    for path in re.findall(r"--http-[a-z-]+-temp-path=(\S+)", r.stdout + r.stderr):
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)


def _drop_privileges() -> None:
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


class Edge:
    def __init__(self, spec: EdgeServer, directory: Path, address: str, workers: int,
                 worker_connections: int, worker_nofile: int):
        self.spec, self.dir, self.address = spec, directory, address
        # the server's files live where its unprivileged user can reach them (a run directory
        # may sit below a 0700 directory); the run directory keeps a copy of the config
        self.work = Path(tempfile.mkdtemp(prefix="wb-edge-"))
        self.work.chmod(0o755)
        self.scratch = self.work / "scratch"
        self.values = {"address": address, "port": str(spec.port), "name": "edge",
                       "scratch": str(self.scratch), "workers": str(workers),
                       "worker_connections": str(worker_connections),
                       "worker_nofile": str(worker_nofile)}
        self.proc: Optional[subprocess.Popen] = None
        self.config: Optional[Path] = None

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.spec.port}"

    def _argv(self, argv: list[str]) -> list[str]:
        fields = {**self.values, "config": str(self.config)}
        out = [a.format(**{k: fields.get(k, "") for k in ("address", "port", "name", "config",
                                                          "scratch")}) for a in argv]
        exe = thirdparty.find_command("edge_server.command", self.spec.model_copy(
            update={"command": out[:1]}))
        return [str(exe)] + out[1:]

    def prepare(self) -> None:
        """Render the config into the run directory and run ``check`` on it (ConfigError with
        the checker's output and the template's name)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        if os.getuid() == 0:
            os.chown(self.scratch, NOBODY, NOBODY)
        if self.spec.config_template:
            template = Path(self.spec.config_template)
            self.config = self.work / template.name
            text = render(template.read_text(), self.values)
            self.config.write_text(text)
            self.config.chmod(0o644)
            (self.dir / template.name).write_text(text)
        _ensure_compiled_temp_dirs(self._argv(self.spec.command or ["true"])[0])
        if self.spec.check:
            r = subprocess.run(self._argv(self.spec.check), capture_output=True, text=True,
                               timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL,
                               preexec_fn=_drop_privileges)
            if r.returncode != 0:
                out = (r.stdout + r.stderr).replace(str(self.config),
                                                    str(self.spec.config_template)).strip()
                raise ConfigError([f"edge_server.config_template: refused by "
                                   f"`{' '.join(self.spec.check)}` (exit {r.returncode}):\n    "
                                   + "\n    ".join(out.splitlines()[-12:])])

    def start(self) -> None:
        self.log = open(self.dir / EDGE_STDERR, "wb")
        self.proc = subprocess.Popen(self._argv(self.spec.command or []), stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_drop_privileges, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection((self.address, self.spec.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        tail = (self.dir / EDGE_STDERR).read_text(errors="replace")[-1500:]
        raise EnvironmentProblem(f"edge_server did not accept on {self.endpoint} within "
                                 f"{READY_TIMEOUT_S} s: {tail}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        if not self.proc:
            return []
        out = [self.proc.pid]
        try:
            out += [int(x) for x in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
                    .read_text().split()]
        except OSError:
            pass
        return out

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def remove(self) -> None:
        """Its working files (the copy of its config stays in the run directory)."""
        shutil.rmtree(self.work, ignore_errors=True)
