"""The cell agent's image, packed from this host's files (no registry, nothing pulled).

The agent *is* the single-host runner (``wotbench.runner.main.Runner``) plus a control
connection, so its image holds what that runner imports: this host's Python interpreter with
its shared libraries (``ldd``, as ``hostimage`` packs a program), the standard library
(without its tests, IDLE, Tk, ensurepip, lib2to3 and build config), the venv's packages the
runner needs (``KEEP``: numpy, pandas, scipy for a Weibull's shape, pydantic, the Docker SDK,
PyYAML ...; never matplotlib, pytest, pip: the coordinator analyses and reports), the
``wotbench`` package, and the static binaries (gateway emulator, device, hog, warden: the
same files whose hashes tag the node's images, so the cell finds them loaded). FROM scratch,
every file at its host path except the venv's packages and ``wotbench`` (``/opt/wotbench``).

Writing a small agent in C instead would mean a second runner: the planner, the trace slice,
the deploy, readiness, monitor and cleanup would all be re-implemented. Packing the one we have
keeps a cell identical to a single-host run. The tag is a hash of every packed file's path,
size and modification time (cheap to recompute: the coordinator names the tag it expects
without packing), so an unchanged tree is packed once.
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator

from wotbench.errors import EnvironmentProblem
from wotbench.labels import IMAGE_LABEL
from wotbench.runner.prepare import binaries

REPO = Path(__file__).resolve().parents[2]
CD_MODULE_DIR = "cd-module"     # holds the package cd_module (pyproject: packages.find)
OPT = "/opt/wotbench"
SITE_IN, SRC_IN, BIN_IN = f"{OPT}/site", f"{OPT}/src", f"{OPT}/bin"
REPO_NAME = "wotbench/cell-agent"
# what the runner imports (or imports lazily: scipy for a Weibull) of the venv's packages
KEEP = ("numpy", "numpy.libs", "pandas", "scipy", "scipy.libs", "pydantic", "pydantic_core",
        "annotated_types", "typing_extensions.py", "typing_inspection", "docker", "requests",
        "urllib3", "idna", "certifi", "charset_normalizer", "yaml", "_yaml", "dateutil",
        "tzdata", "rich", "pygments", "markdown_it", "mdurl", "packaging", "six.py", "pytz",
        # wotbench.things (the config's things: block, read by every run) validates with
        # jsonschema; without these the agent died at import (make test-cluster, 2026-11-27)
        "jsonschema", "jsonschema_specifications", "referencing", "rpds", "attr", "attrs")
STDLIB_SKIP = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip",
               "lib2to3", "__phello__"}
SKIP_DIRS = {"tests", "__pycache__"}    # a package's own tests; bytecode (recompiled on import)
PROGRAMS = (binaries.GE, binaries.DEVICE, binaries.HOG, binaries.WARDEN, binaries.FLEET)


def _walk(root: Path, skip: set[str]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and d not in SKIP_DIRS
                             and not d.startswith("config-"))
        for f in sorted(filenames):
            if not f.startswith("_tkinter"):   # Tk and X11: never used, 10 libraries
                yield Path(dirpath) / f


def files() -> list[tuple[Path, str]]:
    """(host file, path in the image) of everything the image holds."""
    from wotbench.runner.backends.docker.hostimage import shared_files
    exe = Path(sys.executable).resolve()
    out = [(exe, str(exe))] + [(f, str(f)) for f in shared_files(exe)]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out += [(f, str(f)) for f in _walk(stdlib, STDLIB_SKIP)]
    site = Path(sysconfig.get_paths()["purelib"])
    for name in KEEP:
        p = site / name
        if p.is_dir():
            out += [(f, f"{SITE_IN}/{f.relative_to(site)}") for f in _walk(p, set())]
        elif p.is_file():
            out.append((p, f"{SITE_IN}/{name}"))
    out += [(f, f"{SRC_IN}/{f.relative_to(REPO)}") for f in _walk(REPO / "wotbench", set())
            if f.suffix == ".py"]
    cd = REPO / CD_MODULE_DIR      # the contention detector: the runner sizes and deploys it
    out += [(f, f"{SRC_IN}/{f.relative_to(cd)}") for f in _walk(cd / "cd_module", set())
            if f.suffix == ".py"]
    out += [(lib, str(lib)) for lib in _libraries_of([f for f, _ in out], shared_files)]
    for comp in PROGRAMS:
        out.append((binaries.ensure_binary(comp, log=lambda m: None), f"{BIN_IN}/{comp.name}"))
    return out + _connected_programs(out, shared_files)


def _connected_programs(packed: list[tuple[Path, str]], shared_files) -> list[tuple[Path, str]]:
    """wot-fleet-conn and wot-rpcapp (a connected run's cells, docs/CONNECTED.md), where the
    packed ``wotbench.connected.procs`` looks for them, with the shared libraries they load
    (libwslay: Debian has no static one). Left out when not built (no connected cells)."""
    from wotbench.connected.procs import FLEET_BIN, RPCAPP_BIN
    have = {str(h) for h, _ in packed}
    out: list[tuple[Path, str]] = []
    for b in (FLEET_BIN, RPCAPP_BIN):
        if not b.exists():
            continue
        out.append((b, f"{SRC_IN}/{b.relative_to(REPO)}"))
        for lib in shared_files(b):
            if str(lib) not in have:
                have.add(str(lib))
                out.append((lib, str(lib)))
    return out


def _libraries_of(packed: list[Path], shared_files) -> list[Path]:
    """The host libraries that the packed extension modules load (libz for binascii, libssl,
    libffi ...) and that are not packed already."""
    have = {str(p) for p in packed}
    found: dict[str, Path] = {}
    for f in packed:
        if (f.suffix == ".so" or ".so." in f.name) and not f.parent.name.endswith(".libs"):
            try:   # (a wheel's own .libs find each other by $ORIGIN: packed already)
                libs = shared_files(f)
            except EnvironmentProblem:
                continue
            for lib in libs:
                if str(lib) not in have:
                    found[str(lib)] = lib
    return [found[k] for k in sorted(found)]


def dockerfile() -> str:
    exe = Path(sys.executable).resolve()
    return ("FROM scratch\nCOPY rootfs/ /\n"
            f"ENV PYTHONPATH={SRC_IN}:{SITE_IN} PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 "
            # every packed program by its variable: wot-fleet's and the warden's were packed
            # but unnamed, so a cell with an engine looked for the source tree's build/
            + " ".join(f"{c.env_var}={BIN_IN}/{c.name}" for c in PROGRAMS) + "\n"
            f'ENTRYPOINT ["{exe}", "-m", "wotbench.distributed.agent"]\n')


def tag(found: list[tuple[Path, str]] | None = None) -> str:
    """The image's tag: a hash of the Dockerfile and every file's path, size and mtime."""
    h = hashlib.sha256(dockerfile().encode())
    for host, inside in found if found is not None else files():
        st = host.stat()
        h.update(f"{inside}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return f"{REPO_NAME}:{h.hexdigest()[:16]}"


def ensure(client, log=print) -> str:
    """Build the image on ``client`` unless it has it; its tag."""
    import docker.errors
    found = files()
    t = tag(found)
    try:
        client.images.get(t)
        return t
    except docker.errors.ImageNotFound:
        pass
    log(f"packing the cell agent ({len(found)} files: Python, the runner, the binaries) "
        f"into image {t}")
    with tempfile.TemporaryFile() as ctx:
        with tarfile.open(fileobj=ctx, mode="w") as tar:
            data = dockerfile().encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for host, inside in found:
                ti = tar.gettarinfo(str(host.resolve()), arcname="rootfs" + inside)
                ti.uid = ti.gid = 0
                ti.uname = ti.gname = "root"
                with open(host, "rb") as f:
                    tar.addfile(ti, f)
        ctx.seek(0)
        client.images.build(fileobj=ctx, custom_context=True, tag=t, rm=True, forcerm=True,
                            pull=False, labels={IMAGE_LABEL: "cell-agent"}, timeout=600)
    return t
