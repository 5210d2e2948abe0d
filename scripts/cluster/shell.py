"""Run a host command for the emulated cluster; a failure names the command and its output."""
from __future__ import annotations

import subprocess
from typing import Optional, Sequence


class ClusterError(Exception):
    """A step of cluster-up/down failed; the message names the step and the fix."""


def run(argv: Sequence[str], *, check: bool = True, stdin: Optional[str] = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """``argv`` with its output captured; ClusterError (with the output's tail) when it fails
    and ``check`` is set, or when it does not end within ``timeout`` seconds."""
    try:
        r = subprocess.run(list(argv), capture_output=True, text=True, input=stdin,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    except FileNotFoundError:
        raise ClusterError(f"`{argv[0]}` is not installed (apt-get install iproute2 util-linux "
                           "docker.io)") from None
    if check and r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-6:])
        raise ClusterError(f"`{' '.join(argv)}` failed ({r.returncode}): {tail}")
    return r


def docker(sock: str, *args: str, check: bool = True, stdin: Optional[str] = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """The docker CLI against one node's daemon (``sock``: its unix socket path)."""
    return run(["docker", "-H", f"unix://{sock}", *args], check=check, stdin=stdin,
               timeout=timeout)
