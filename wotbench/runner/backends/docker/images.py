"""The FROM scratch images that wrap the static binaries (:mod:`wotbench.runner.prepare.binaries`).

Images are built locally through the Docker SDK from an in-memory tar context, so no registry
is needed or used. The tag is a hash of the binary and the Dockerfile, so an unchanged binary
never triggers a rebuild. Images carry ``wotbench.image`` labels (not ``wotbench.run``): they
are a cache shared by runs and are not removed by ``wotbench clean``.
"""
from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import Callable

from wotbench.errors import EnvironmentProblem
from wotbench.runner.prepare.binaries import is_static
from wotbench.labels import IMAGE_LABEL

def dockerfile(program: str) -> str:
    return (f"FROM scratch\nCOPY {program} /{program}\nUSER 65534:65534\n"
            f'ENTRYPOINT ["/{program}"]\n')


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
    if not is_static(binary):
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
