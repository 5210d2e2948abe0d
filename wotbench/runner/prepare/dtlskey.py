"""The run's DTLS credentials as the programs take them (docs/CONTRACTS.md §2, §3 "DTLS"):
the key goes into a file of the run directory that the backends mount read-only, and only
its path, the identity and the session mode go on the command lines. Never argv, env or
the container config: ``docker inspect`` shows a bind mount and a path.

File modes: ``secrets/`` is 0700. As root the key file is owned by the programs' uid 65534
with mode 0400; without root it cannot be given away, so it is 0400 for local processes
(same uid) and 0444 for containers (uid 65534 reads it through the bind mount; on the host
the 0700 directory still keeps other users out). :func:`remove` deletes it at cleanup.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from wotbench.config import dtls as dtls_spec
from wotbench.errors import ConfigError
from wotbench.rundir import RunDir
from wotbench.labels import NOBODY

KEY_IN = "/dtls-psk.key"    # in-container path of the bind mount


@dataclass(frozen=True)
class DtlsCreds:
    identity: str
    key_file: Path          # host path
    sessions: str           # reuse | per-request (the GE's --dtls-sessions)

    def device_args(self, key_path: str) -> list[str]:
        return ["--dtls-psk-identity", self.identity, "--dtls-psk-key-file", key_path]

    def ge_args(self, key_path: str) -> list[str]:
        return self.device_args(key_path) + ["--dtls-sessions", self.sessions]


def write(rd: RunDir, spec: dtls_spec.Dtls, for_containers: bool) -> Optional[DtlsCreds]:
    """Writes the key file (None when DTLS is off)."""
    if not spec.enabled:
        return None
    try:
        key = dtls_spec.key_bytes(spec)
    except ValueError as e:   # the file changed since the config was checked
        raise ConfigError(f"{dtls_spec.KEY_FILE}: {e}") from None
    rd.secrets_dir.mkdir(mode=0o700, exist_ok=True)
    rd.secrets_dir.chmod(0o700)
    path = rd.dtls_key_file
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, key)
        if os.geteuid() == 0:
            os.fchown(fd, NOBODY, NOBODY)
            os.fchmod(fd, 0o400)
        else:
            os.fchmod(fd, 0o444 if for_containers else 0o400)
    finally:
        os.close(fd)
    return DtlsCreds(spec.psk_identity, path, spec.sessions)


def remove(rd: RunDir) -> None:
    """The key does not outlive the run (the run directory is a report to share)."""
    try:
        rd.dtls_key_file.unlink()
    except FileNotFoundError:
        pass
    try:
        rd.secrets_dir.rmdir()
    except OSError:
        pass
