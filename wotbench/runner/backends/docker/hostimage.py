"""Pack a dynamically linked program of this host into a FROM scratch image.

No registry is reachable, so a third-party server (Debian's ``coap-server-notls``, a user's
build) is put into an image from the host's own files: the program, every shared library
``ldd`` lists and the dynamic loader, each at its host path. The image runs the program as
uid 65534 and holds nothing else (no shell, no package manager). The tag is a hash of the
packed files, so an unchanged program is packed once; the image carries ``wotbench.image``
like WoTbench's own (a cache: ``wotbench clean`` leaves it).

``pack_program(client, "/usr/bin/coap-server-notls")`` -> ``"wotbench/host-coap-server-notls:<hash>"``
"""
from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from pathlib import Path

from wotbench.errors import EnvironmentProblem
from wotbench.runner.backends.docker.images import add_bytes, build_once
from wotbench.labels import IMAGE_LABEL, NOBODY

# "libcoap-3-notls.so.3 => /lib/x86_64-linux-gnu/libcoap-3-notls.so.3 (0x...)" and
# "/lib64/ld-linux-x86-64.so.2 (0x...)"; "linux-vdso.so.1 (0x...)" has no file
_LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$")


def shared_files(program: Path) -> list[Path]:
    """The program's shared libraries and loader as ``ldd`` lists them (empty for a static
    program); EnvironmentProblem when a library is missing."""
    try:
        r = subprocess.run(["ldd", str(program)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentProblem(f"ldd {program} failed ({e}); install libc-bin") from None
    text = r.stdout + r.stderr
    if "not a dynamic executable" in text or "statically linked" in text:
        return []
    missing = [ln.split("=>")[0].strip() for ln in text.splitlines() if "not found" in ln]
    if missing:
        raise EnvironmentProblem(f"{program} needs shared libraries this host lacks: "
                                 f"{', '.join(missing)} (ldd {program})")
    return [Path(m.group(1)) for ln in text.splitlines() if (m := _LDD_LINE.match(ln))]


def dockerfile(program: Path) -> str:
    return (f"FROM scratch\nCOPY rootfs/ /\nUSER {NOBODY}:{NOBODY}\n"
            f'ENTRYPOINT ["{program}"]\n')


def _context(program: Path, files: list[Path]) -> tuple[bytes, str]:
    """(tar build context, content hash): Dockerfile + rootfs/<host path> of every file."""
    h = hashlib.sha256(dockerfile(program).encode())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        add_bytes(tar, "Dockerfile", dockerfile(program).encode())
        for f in [program, *files]:
            data = f.resolve().read_bytes()     # a symlinked library goes in under its link name
            h.update(str(f).encode() + b"\0" + hashlib.sha256(data).digest())
            add_bytes(tar, f"rootfs{f}", data, 0o755)
    return buf.getvalue(), h.hexdigest()[:16]


def pack_program(client, program: str | Path, log=print) -> str:
    """Build (or reuse) the FROM scratch image of ``program`` (an absolute path); its tag."""
    program = Path(program)
    files = shared_files(program)
    ctx, digest = _context(program, files)
    tag = f"wotbench/host-{re.sub(r'[^a-z0-9_.-]', '-', program.name.lower())}:{digest}"
    return build_once(client, tag, lambda: ctx,
                      {IMAGE_LABEL: f"host:{program}", "wotbench.source-sha": digest},
                      f"packing {program} with {len(files)} shared file(s) into image {tag}", log)
