"""Where a third-party server's rendered config and scratch directory are, on the host and as
the program sees them (``{config}``, ``{scratch}``; rendered by :mod:`wotbench.runner.serverconf`).
In a container the config is mounted read-only below :data:`CONFIG_IN` and the scratch
directory is a small tmpfs at :data:`SCRATCH_IN`, the root file system staying read-only."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONFIG_IN = "/.wb/config"          # the rendered file's directory inside a container
SCRATCH_IN = "/.wb/scratch"        # the container's writable tmpfs
SCRATCH_TMPFS = "rw,nosuid,nodev,noexec,size=16m,mode=1777"


@dataclass(frozen=True)
class ServerFiles:
    """A device's rendered config (host path) and its scratch directory (host path)."""
    config: Path
    scratch: Path

    def config_in(self, in_container: bool) -> str:
        return f"{CONFIG_IN}/{self.config.name}" if in_container else str(self.config)

    def scratch_in(self, in_container: bool) -> str:
        return SCRATCH_IN if in_container else str(self.scratch)
