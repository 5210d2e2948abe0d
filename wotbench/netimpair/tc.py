"""tc(8) command construction and the generic, idempotent qdisc removal.

Egress: one root qdisc on the device's interface (``tc qdisc add dev eth0 root netem ...``).
Ingress: tc can only shape what it sends, so incoming packets are redirected to an ifb device
in the same namespace and shaped on its egress:

    ip link add wbifb0 type ifb ; ip link set dev wbifb0 up
    tc qdisc add dev eth0 handle ffff: ingress
    tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev wbifb0
    tc qdisc add dev wbifb0 root netem ...

Every command runs inside the device's network namespace: ``nsenter -t PID -n`` (a container)
or ``ip netns exec NAME`` (a named namespace: the probe and the tests).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional, Sequence

from wotbench.netimpair.cmdrun import CommandRunner, Result
from wotbench.netimpair.model import Impairment, fmt_num

IFB_DEV = "wbifb0"


def tc_time(ms: float) -> str:
    """40 -> '40ms', 0.5 -> '500us' (tc takes both; µs keeps it exact)."""
    if float(ms).is_integer():
        return f"{int(ms)}ms"
    return f"{int(round(ms * 1000))}us"


def pct(x: float) -> str:
    return f"{fmt_num(x)}%"


def netem_args(imp: Impairment) -> list[str]:
    """The netem option list for one impairment, all kinds in one qdisc, per tc-netem(8):
    ``delay TIME [JITTER [CORR]] [distribution D] loss random P [CORR] | loss gemodel p r 1-h 1-k
    rate RATE duplicate P [CORR] corrupt P [CORR]``.

    ``distribution uniform`` is not passed: iproute2 has no uniform.dist table ("No distribution
    data for uniform"); without a distribution the kernel draws the jitter uniformly.
    """
    a: list[str] = []
    if imp.delay:
        d = imp.delay
        a += ["delay", tc_time(d.time_ms)]
        if d.jitter_ms:
            a.append(tc_time(d.jitter_ms))
            if d.correlation:
                a.append(pct(d.correlation))
            if d.distribution and d.distribution != "uniform":
                a += ["distribution", d.distribution]
    if imp.loss:
        lo = imp.loss
        if lo.gilbert_elliott:
            g = lo.gilbert_elliott
            a += ["loss", "gemodel", pct(g.p), pct(g.r), pct(g.one_minus_h), pct(g.one_minus_k)]
        else:
            a += ["loss", "random", pct(lo.percent)]
            if lo.correlation:
                a.append(pct(lo.correlation))
    if imp.rate:
        a += ["rate", imp.rate]
    for kind in ("duplicate", "corrupt"):
        v = getattr(imp, kind)
        if v:
            a += [kind, pct(v.percent)]
            if v.correlation:
                a.append(pct(v.correlation))
    return a


@dataclass(frozen=True)
class NetnsRef:
    """Where a device's network stack lives: a process (container) or a named netns."""
    pid: Optional[int] = None
    name: Optional[str] = None
    ns_inode: Optional[int] = None   # /proc/PID/ns/net inode seen at apply (guards against PID reuse)

    def prefix(self) -> list[str]:
        if self.pid is not None:
            return ["nsenter", "-t", str(self.pid), "-n"]
        if self.name:
            return ["ip", "netns", "exec", self.name]
        raise ValueError("NetnsRef needs a pid or a name")

    def describe(self) -> str:
        return f"pid {self.pid}" if self.pid is not None else f"netns {self.name}"

    @staticmethod
    def for_pid(pid: int) -> "NetnsRef":
        try:
            ino = os.stat(f"/proc/{pid}/ns/net").st_ino
        except OSError:
            ino = None
        return NetnsRef(pid=pid, ns_inode=ino)

    def still_same(self) -> bool:
        """False when the process is gone or its PID now belongs to another namespace."""
        if self.pid is None:
            return True
        try:
            ino = os.stat(f"/proc/{self.pid}/ns/net").st_ino
        except OSError:
            return False
        return self.ns_inode is None or ino == self.ns_inode


def apply_commands(ref: NetnsRef, dev: str, direction: str, qdisc: Sequence[str]) -> list[list[str]]:
    """Commands installing ``qdisc`` (e.g. ``["netem", "delay", "20ms"]``) for a direction."""
    p = ref.prefix()
    cmds: list[list[str]] = []
    if direction in ("egress", "both"):
        cmds.append(p + ["tc", "qdisc", "add", "dev", dev, "root", *qdisc])
    if direction in ("ingress", "both"):
        cmds += [
            p + ["ip", "link", "add", IFB_DEV, "type", "ifb"],
            p + ["ip", "link", "set", "dev", IFB_DEV, "up"],
            p + ["tc", "qdisc", "add", "dev", dev, "handle", "ffff:", "ingress"],
            p + ["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "u32",
                 "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", IFB_DEV],
            p + ["tc", "qdisc", "add", "dev", IFB_DEV, "root", *qdisc],
        ]
    return cmds


def remove_commands(ref: NetnsRef, dev: str) -> list[list[str]]:
    """Generic removal: whatever root and ingress qdisc ``dev`` has, and the ifb device
    (deleting it drops its qdisc). Each may find nothing; see is_absent()."""
    p = ref.prefix()
    return [
        p + ["tc", "qdisc", "del", "dev", dev, "root"],
        p + ["tc", "qdisc", "del", "dev", dev, "ingress"],
        p + ["ip", "link", "del", IFB_DEV],
    ]


# What tc / ip / nsenter say when there is nothing to remove (iproute2 6.1 and older wording).
_ABSENT = (
    "cannot delete qdisc with handle of zero",   # root is the default qdisc
    "invalid handle",                            # no ingress qdisc
    "cannot find specified qdisc",
    "cannot find device",                        # no ifb / interface gone
    "no such file or directory",                 # old RTNETLINK wording; nsenter: process gone
    "no such device",
    "does not exist",
)


def is_absent(r: Result) -> bool:
    t = r.text().lower()
    return r.ok or any(s in t for s in _ABSENT)


def remove_all(runner: CommandRunner, ref: NetnsRef, dev: str) -> dict:
    """Idempotent removal of our qdiscs in one namespace. Never raises.
    Returns ``{"commands": [...], "errors": [...], "skipped": reason|None}``."""
    from wotbench.netimpair.cmdrun import shell_join
    out: dict = {"target": ref.describe(), "commands": [], "errors": [], "skipped": None}
    if not ref.still_same():
        out["skipped"] = f"{ref.describe()}: process gone or namespace changed; its qdiscs went with it"
        return out
    for argv in remove_commands(ref, dev):
        r = runner.run(argv)
        out["commands"].append(shell_join(argv))
        if not is_absent(r):
            out["errors"].append(f"{shell_join(argv)}: {r.text() or f'exit {r.rc}'}")
    return out


def leftover_qdiscs(runner: CommandRunner, ref: NetnsRef, dev: str) -> list[str]:
    """Non-default qdiscs still on ``dev`` or an ifb left behind (empty list = clean)."""
    p = ref.prefix()
    left: list[str] = []
    r = runner.run(p + ["tc", "-j", "qdisc", "show", "dev", dev])
    if r.ok and r.stdout.strip():
        try:
            for q in json.loads(r.stdout):
                if q.get("kind") not in ("noqueue", "pfifo_fast", "mq", "fq_codel") or q.get("handle") not in ("0:",):
                    left.append(f"{dev}: {q.get('kind')} {q.get('handle')}")
        except ValueError:
            left.append(f"{dev}: unparsable tc output {r.stdout[:80]!r}")
    r = runner.run(p + ["ip", "link", "show", IFB_DEV])
    if r.ok:
        left.append(f"{IFB_DEV} still exists")
    return left
