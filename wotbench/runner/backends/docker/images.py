"""Static binaries (built with make when stale) and the FROM scratch images that wrap them.

Images are built locally through the Docker SDK from an in-memory tar context, so no registry
is needed or used. The tag is a hash of the binary and the Dockerfile, so an unchanged binary
never triggers a rebuild. Images carry ``wotbench.image`` labels (not ``wotbench.run``): they
are a cache shared by runs and are not removed by ``wotbench clean``.
"""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from wotbench.errors import EnvironmentProblem
from wotbench.runner.labels import IMAGE_LABEL

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Component:
    name: str        # program name: gateway-emulator | wot-device | hog
    env_var: str     # overrides the binary path (tests, custom builds); disables make
    source: str = ""  # source directory under the repository, default: the program name

    @property
    def source_dir(self) -> Path:
        return REPO_ROOT / (self.source or self.name)

    def binary(self) -> Path:
        override = os.environ.get(self.env_var)
        return Path(override) if override else self.source_dir / "build" / self.name


GE = Component("gateway-emulator", "WOTBENCH_GE_BIN")
DEVICE = Component("wot-device", "WOTBENCH_DEVICE_BIN")
HOG = Component("hog", "WOTBENCH_HOG_BIN", source="contention-injector")
COMPONENTS = (GE, DEVICE)   # every run needs these; the hog only runs with contention episodes


def _newest_source_mtime(src: Path) -> float:
    """Newest source of a program, including the headers all three share (common/)."""
    newest = 0.0
    for pattern in ("Makefile", "*.c", "*.h", "src/**/*.c", "src/**/*.h", "include/**/*.h"):
        for p in src.glob(pattern):
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
    return binary.stat().st_mtime < _newest_source_mtime(comp.source_dir)


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


def ensure_binaries(log=print, hog: bool = False) -> dict[str, Path]:
    """The binaries a run needs (built when stale): program name -> path; ``hog``: the run has
    contention episodes."""
    return {comp.name: ensure_binary(comp, log) for comp in COMPONENTS + ((HOG,) if hog else ())}


def dockerfile(program: str) -> str:
    return (f"FROM scratch\nCOPY {program} /{program}\nUSER 65534:65534\n"
            f'ENTRYPOINT ["/{program}"]\n')


def _is_static(binary: Path) -> bool:
    """A FROM scratch image has no dynamic loader: reject binaries with a PT_INTERP header."""
    with open(binary, "rb") as f:
        head = f.read(1 << 16)
    return head[:4] == b"\x7fELF" and b"/lib64/ld-linux" not in head and b"/lib/ld-" not in head


def image_tag(program: str, binary: Path) -> str:
    h = hashlib.sha256(dockerfile(program).encode())
    with open(binary, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"wotbench/{program}:{h.hexdigest()[:16]}"


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    """Add a file with ``data`` to a build context."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def ensure_image(client, program: str, binary: Path, log=print) -> str:
    """Build (or reuse) the FROM scratch image for ``binary``; return its tag."""
    if not binary.exists():
        raise EnvironmentProblem(f"{binary} does not exist")
    if not _is_static(binary):
        raise EnvironmentProblem(f"{binary} is not a static ELF binary; a FROM scratch image "
                                 "needs one (link with -static)")
    tag = image_tag(program, binary)

    def context() -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            add_bytes(tar, "Dockerfile", dockerfile(program).encode())
            info = tar.gettarinfo(str(binary), arcname=program)
            info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "root", "root"
            with open(binary, "rb") as f:
                tar.addfile(info, f)
        return buf.getvalue()
    return build_once(client, tag, context,
                      {IMAGE_LABEL: program, "wotbench.source-sha": tag.rsplit(":", 1)[1]},
                      f"building image {tag}", log)


def build_once(client, tag: str, context: Callable[[], bytes], labels: dict[str, str],
               what: str, log=print) -> str:
    """Reuse the image ``tag`` when it exists, else build it from the tar that ``context``
    makes (only then: a binary is read once per new image; no pull: there is no registry);
    ``what`` names the step in the log and in a failure."""
    import docker.errors

    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    log(what)
    try:
        client.images.build(fileobj=io.BytesIO(context()), custom_context=True, tag=tag, rm=True,
                            forcerm=True, pull=False, labels=labels)
    except (docker.errors.BuildError, docker.errors.APIError) as e:
        raise EnvironmentProblem(f"{what} failed: {e}") from e
    return tag


def ensure_images(client, binaries: dict[str, Path], log=print) -> dict[str, str]:
    return {name: ensure_image(client, name, path, log) for name, path in binaries.items()}
