"""What of an emulated cluster is on this host: mounts, processes, cgroups (for cluster-down
and for the check that it left nothing). The parsers are pure and unit-tested."""
from __future__ import annotations

import os
import re
from pathlib import Path

from layout import PREFIX

CGROUP_ROOT = Path("/sys/fs/cgroup")
_NODE_CGROUP = re.compile(rf"^{PREFIX}-n\d+$")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(root: Path, mountinfo: str) -> list[str]:
    """Mount points at or below ``root`` in a /proc/self/mountinfo text, deepest first (the
    order to unmount them), each once."""
    base = str(root).rstrip("/")
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        mp = _unescape(fields[4])
        if (mp == base or mp.startswith(base + "/")) and mp not in found:
            found.append(mp)
    return sorted(found, key=lambda p: (-p.count("/"), p))


def references(cmdline: str, root: Path) -> bool:
    """Does a process's command line name a path under ``root``."""
    base = str(root).rstrip("/")
    return any(arg == base or base + "/" in arg for arg in cmdline.split("\0") if arg)


def processes_under(root: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line names a path under ``root``:
    the nodes' dockerd, containerd, shims and fuse-overlayfs."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if references(cmd, root):
            out.append((int(d.name), cmd.replace("\0", " ").strip()))
    return out


def node_cgroups(cgroup_root: Path = CGROUP_ROOT) -> list[Path]:
    """The nodes' cgroup parents (``wbc-n<i>``) in every hierarchy (v1 controllers, v2)."""
    found = []
    for base in [cgroup_root, *sorted(p for p in cgroup_root.iterdir() if p.is_dir())]:
        try:
            found += [p for p in base.iterdir() if p.is_dir() and _NODE_CGROUP.match(p.name)]
        except OSError:
            continue
    return sorted(set(found))


def cgroup_tree(top: Path) -> list[Path]:
    """``top`` and every cgroup below it, deepest first (the order to remove them)."""
    dirs = [Path(d) for d, _, _ in os.walk(top)]
    return sorted(dirs, key=lambda p: -len(p.parts))


def cgroup_pids(top: Path) -> set[int]:
    pids: set[int] = set()
    for d in cgroup_tree(top):
        try:
            pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return pids
