"""The project's own static binaries (gateway-emulator, wot-device, the hog, wb-warden), built with make
when a source is newer than the binary. Both backends run them; the Docker backend wraps them
in FROM scratch images (:mod:`wotbench.runner.backends.docker.images`)."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from wotbench.errors import EnvironmentProblem

REPO_ROOT = Path(__file__).resolve().parents[3]   # wotbench/runner/prepare/ -> the checkout


@dataclass(frozen=True)
class Component:
    name: str        # program name: gateway-emulator | wot-device | hog
    env_var: str     # overrides the binary path (tests, custom builds); disables make
    source: str = ""  # source directory under the repository, default: the program name
    skip: str = ""    # a subdirectory of its sources another program is built from

    @property
    def source_dir(self) -> Path:
        return REPO_ROOT / (self.source or self.name)

    def binary(self) -> Path:
        override = os.environ.get(self.env_var)
        return Path(override) if override else self.source_dir / "build" / self.name


GE = Component("gateway-emulator", "WOTBENCH_GE_BIN")
DEVICE = Component("wot-device", "WOTBENCH_DEVICE_BIN", skip="src/fleet")
HOG = Component("hog", "WOTBENCH_HOG_BIN", source="contention-injector")
WARDEN = Component("wb-warden", "WOTBENCH_WARDEN_BIN", source="warden")   # runner/deployment/lease.py
FLEET = Component("wot-fleet", "WOTBENCH_FLEET_BIN", source="wot-device")  # CONTRACTS §3b
COMPONENTS = (GE, DEVICE, WARDEN)   # every run needs these; the hog only with contention
# episodes, wot-fleet only when a group runs in the engine (wotbench.deploy.fleet)


def _newest_source_mtime(src: Path, skip: str = "") -> float:
    """Newest source of a program, including the headers all three share (common/); not those
    under ``skip`` (wot-fleet's sources do not make wot-device stale)."""
    newest = 0.0
    skipped = src / skip if skip else None
    for pattern in ("Makefile", "*.c", "*.h", "src/**/*.c", "src/**/*.h", "include/**/*.h"):
        for p in src.glob(pattern):
            if skipped is None or not p.is_relative_to(skipped):
                newest = max(newest, p.stat().st_mtime)
    for p in (REPO_ROOT / "common").glob("*.h"):
        newest = max(newest, p.stat().st_mtime)
    return newest


def is_stale(comp: Component) -> bool:
    """True when the binary is missing or older than its sources (never with an override)."""
    binary = comp.binary()
    if os.environ.get(comp.env_var):
        return False
    if not binary.exists():
        return True
    return binary.stat().st_mtime < _newest_source_mtime(comp.source_dir, comp.skip)


def ensure_binary(comp: Component, log=print) -> Path:
    """Run ``make -C <source>`` when the binary is missing or stale; return its path."""
    if is_stale(comp):
        if not (comp.source_dir / "Makefile").exists():
            raise EnvironmentProblem(
                f"{comp.binary()} does not exist and {comp.source_dir}/Makefile is missing; "
                f"build it or point {comp.env_var} at a static {comp.name} binary")
        log(f"building {comp.name} (make -C {comp.source_dir})")
        res = subprocess.run(["make", "-C", str(comp.source_dir)], capture_output=True,
                             text=True)
        if res.returncode != 0 or not comp.binary().exists():
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-15:])
            raise EnvironmentProblem(f"make -C {comp.source_dir} failed:\n{tail}\n"
                                     "fix: run `wotbench doctor` (libcoap static library, gcc)")
    return comp.binary()


def ensure_binaries(log=print, hog: bool = False, fleet: bool = False) -> dict[str, Path]:
    """The binaries a run needs (built when stale): program name -> path; ``hog``: the run has
    contention episodes; ``fleet``: device groups run in the wot-fleet engine."""
    extra = ((HOG,) if hog else ()) + ((FLEET,) if fleet else ())
    return {comp.name: ensure_binary(comp, log) for comp in COMPONENTS + extra}



def is_static(binary: Path) -> bool:
    """A FROM scratch image has no dynamic loader: reject binaries with a PT_INTERP header."""
    with open(binary, "rb") as f:
        head = f.read(1 << 16)
    return head[:4] == b"\x7fELF" and b"/lib64/ld-linux" not in head and b"/lib/ld-" not in head
