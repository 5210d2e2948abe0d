"""Can this kernel do netem (and ifb)? Tried in a throw-away network namespace, once per process."""
from __future__ import annotations

import os
import shutil
from typing import Optional

from wotbench.netimpair.cmdrun import CommandRunner, SubprocessRunner

_cache: dict[str, tuple[bool, str]] = {}

NO_NETEM_HINT = "use network.backend: app or load the sch_netem module (modprobe sch_netem)"


def _explain_netem(err: str) -> str:
    low = err.lower()
    if "qdisc kind is unknown" in low or "unknown qdisc" in low:
        return "this kernel has no sch_netem (tc: qdisc kind is unknown)"
    if "operation not permitted" in low:
        return f"not allowed to configure tc (run as root or with CAP_NET_ADMIN): {err}"
    return f"tc netem failed: {err}"


def _with_probe_netns(runner: CommandRunner, tag: str, steps) -> tuple[bool, str]:
    if shutil.which("ip") is None and isinstance(runner, SubprocessRunner):
        return False, "the ip command (iproute2) is not installed"
    ns = f"wotbench-probe-{tag}-{os.getpid()}"
    r = runner.run(["ip", "netns", "add", ns])
    if not r.ok:
        return False, f"cannot create a network namespace for the probe (ip netns add: {r.text()})"
    try:
        return steps(ns)
    finally:
        runner.run(["ip", "netns", "del", ns])


def probe_netem(runner: Optional[CommandRunner] = None, refresh: bool = False) -> tuple[bool, str]:
    """(True, "...") when ``tc qdisc add dev lo root netem delay 1ms`` works in a fresh netns,
    else (False, reason). The namespace is deleted on every path. Cached per process."""
    if "netem" in _cache and not refresh and runner is None:
        return _cache["netem"]
    run = runner or SubprocessRunner()

    def steps(ns: str) -> tuple[bool, str]:
        r = run.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        if r.ok:
            return True, "tc netem works (probe: netem delay 1ms on lo in a throw-away namespace)"
        return False, _explain_netem(r.text() or f"exit {r.rc}")

    res = _with_probe_netns(run, "netem", steps)
    if runner is None:
        _cache["netem"] = res
    return res


def probe_ifb(runner: Optional[CommandRunner] = None, refresh: bool = False) -> tuple[bool, str]:
    """(True, ...) when an ifb device can be created in a namespace (needed for ingress)."""
    if "ifb" in _cache and not refresh and runner is None:
        return _cache["ifb"]
    run = runner or SubprocessRunner()

    def steps(ns: str) -> tuple[bool, str]:
        r = run.run(["ip", "netns", "exec", ns, "ip", "link", "add", "wbprobe0", "type", "ifb"])
        if r.ok:
            return True, "ifb devices work"
        return False, (f"ingress impairment needs an ifb device, and this kernel cannot create one "
                       f"({r.text() or f'exit {r.rc}'}); load the ifb module or use direction: egress")

    res = _with_probe_netns(run, "ifb", steps)
    if runner is None:
        _cache["ifb"] = res
    return res
