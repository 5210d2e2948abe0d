"""The third-party programs a run starts, checked before anything is created: each program is
on this host (``command``) or a local image (``image``, Docker), a host program can be packed
into an image (Docker: the shared libraries ``ldd`` lists), the input files its command names
are there (e.g. the HTTP->CoAP proxy's jar), and its rendered config passes its own ``check:``
command (``nginx -t``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from wotbench.config.schema import Config
from wotbench.config.schema import device_name
from wotbench.deploy.resolve import proxy_address
from wotbench.errors import EnvironmentProblem
from wotbench.runner import serverconf
from wotbench.runner.deployment import thirdparty
from wotbench.runner.backends.interface import BackendKind
from wotbench.runner.backends.docker import hostimage


def _device_of(cfg: Config, key: str) -> str:
    """A device name for the key's ``{name}`` placeholder (its first device, or the proxy)."""
    if key == thirdparty.PROXY_KEY:
        return proxy_address(cfg).name
    i = int(key.split("[", 1)[1].split("]", 1)[0])
    return device_name(cfg.devices[i].group, 0)


def check(cfg: Config, kind: BackendKind, connection: Optional[Any],
          cwd: Optional[Path] = None) -> list[str]:
    """Raise on the first program that cannot start; the keys checked."""
    cwd = cwd or Path.cwd()
    keys = []
    http_things = [i for i, g in enumerate(cfg.devices) if g.thing is not None and g.server]
    if kind.needs_docker and http_things:   # (the config's backend: its things expansion says)
        i = http_things[0]
        raise EnvironmentProblem(
            f"devices[{i}] (things[{cfg.devices[i].thing}]) is an HTTP Thing, a Python program "
            "of this host (wotbench.things.http_thing) that a FROM scratch image cannot carry, "
            "expected --backend process (docs/WOT.md \"HTTP Things\")")
    for key, p in thirdparty.programs(cfg).items():
        if kind.needs_docker and p.image:
            thirdparty.check_image(connection, key, p.image)
        else:
            path = thirdparty.find_command(key, p)
            if kind.needs_docker:
                hostimage.shared_files(path)     # packable into a FROM scratch image
            else:
                missing = thirdparty.missing_files(key, p, cwd)
                if missing:
                    raise EnvironmentProblem(
                        "a third-party program's files are missing on this host:\n  "
                        + "\n  ".join(missing) + "\n  the program would stop at its start; "
                        "put the files there (the config's comments or docs/HTTP-PROXY.md say "
                        "where they come from) or fix the paths (the config itself is valid "
                        "if `wotbench check --offline` passes)")
        serverconf.check_program(key, p, _device_of(cfg, key))
        keys.append(key)
    return keys

