"""A third-party server's own configuration file (``devices[].server.config_template``, e.g.
nginx.conf): rendered per device into its run directory before anything starts, checked with
the server's own checker (``server.check``, e.g. ``nginx -t``) so a config error stops the run
with the template's file:line, and the paths the program sees (``{config}``, ``{scratch}``).

In a container the rendered file is mounted read-only and ``{scratch}`` is a small tmpfs (the
root file system stays read-only; :mod:`wotbench.runner.deployment.serverfiles`); a local process (process
backend) gets the host paths, its scratch directory writable by the unprivileged user.
"""
from __future__ import annotations

import re
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from wotbench.config.byo import Program
from wotbench.errors import ConfigError
from wotbench.runner.deployment import thirdparty
from wotbench.runner.deployment.serverfiles import ServerFiles

if TYPE_CHECKING:
    from wotbench.runner.deployment.components import DeviceRun

CHECK_TIMEOUT_S = 30
CHECK_ADDRESS = "127.0.0.1"
# only these are replaced in a template: every other brace is the server's syntax
_FIELD = re.compile(r"\{(address|port|name|scratch)\}")


def render_text(template: str, address: str, port: int, name: str, scratch: str) -> str:
    values = {"address": address, "port": str(port), "name": name, "scratch": scratch}
    return _FIELD.sub(lambda m: values[m.group(1)], template)


def prepare(d: "DeviceRun", in_container: bool, scratch: Path) -> None:
    """Render ``d``'s config template into its log directory (as the program will see its
    scratch directory) and set ``d.files``; ``scratch``: a host directory the program's user
    may write (the process backend's). Nothing without a template."""
    p = d.program
    if p is None or p.config_template is None:
        return
    template = Path(p.config_template)
    config = d.log_dir / template.name
    files = ServerFiles(config, scratch)
    config.write_text(render_text(template.read_text(), d.address, d.port, d.name,
                                  files.scratch_in(in_container)))
    config.chmod(0o644)
    d.files = files


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind((CHECK_ADDRESS, 0))
        return s.getsockname()[1]


def check_program(key: str, p: Program, name: str) -> None:
    """Run ``p.check`` (the server's own checker, ``nginx -t``) on ``p.config_template`` as
    rendered for this host: a scratch directory and a loopback address of the host's (the
    device's address exists only inside the run's network, and a checker may bind what the
    config listens on: nginx -t does). ConfigError with the checker's output, the template's
    path in it; ``key``: the program's config key (``devices[0].server``), ``name``: a device
    of it."""
    if not p.check or p.config_template is None:
        return
    template = Path(p.config_template)
    port = _free_loopback_port()
    # its own scratch directory: what the checker leaves (nginx -t: an empty pid file, as root)
    # must not be in the server's way
    with tempfile.TemporaryDirectory(prefix="wb-check-") as tmp:
        host_config = Path(tmp) / template.name
        host_config.write_text(render_text(template.read_text(), CHECK_ADDRESS, port, name, tmp))
        argv = [a.format(address=CHECK_ADDRESS, port=port, name=name, config=str(host_config),
                         scratch=tmp) for a in p.check]
        exe = thirdparty.find_command(f"{key}.check", Program(command=argv[:1]))
        try:
            r = subprocess.run([str(exe)] + argv[1:], capture_output=True, text=True,
                               timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ConfigError([f"{key}.check: {' '.join(p.check)} did not finish within "
                               f"{CHECK_TIMEOUT_S} s"]) from None
    if r.returncode != 0:
        # the rendered file has the template's lines: name the template, not our copy
        out = (r.stdout + r.stderr).replace(str(host_config), str(template)).strip()
        lines = "\n    ".join(out.splitlines()[-12:]) or "(no output)"
        raise ConfigError([f"{key}.config_template: {template} was refused by "
                           f"`{' '.join(p.check)}` (exit {r.returncode}):\n    "
                           f"{lines}\n  fix the template (its file:line above) and run again"])
