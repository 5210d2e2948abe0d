"""app backend: the impairment is emulated inside wot-device itself (no kernel support needed).

Proposed wot-device flags (CONTRACTS.md §3, "app-level impairments (issue 5)"):

    --impair "dir=egress,delay=40ms,jitter=5ms,dist=normal,loss=2%,rate=250kbit"
    --impair-ge "p=1%,r=30%,1-h=100%,1-k=0%"
    --impair-seed 1234567

``--impair`` keys (comma-separated key=value, every key optional except dir, order free):
    dir=egress|ingress|both     egress = responses, ingress = requests
    delay=T  jitter=T           T = <int>ms or <int>us
    delay-corr=P%  dist=uniform|normal|pareto|paretonormal   (only with jitter)
    loss=P%  loss-corr=P%       random (Bernoulli) loss; exclusive with --impair-ge
    rate=N<unit>                unit bit|kbit|mbit|gbit (bits/s) or bps|kbps|mbps|gbps (bytes/s)
    dup=P%  dup-corr=P%         duplicate the datagram
    corrupt=P%  corrupt-corr=P% flip one random bit in the datagram
``--impair-ge``: Gilbert-Elliott burst loss, tc-netem's p, r, 1-h, 1-k, all in percent.
``--impair-seed``: seed of the impairment random stream (derived from config seed and device name).
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional, Sequence

from wotbench.netimpair.cmdrun import CommandRunner
from wotbench.netimpair.model import Impairment
from wotbench.netimpair.plan import ImpairmentPlan
from wotbench.netimpair.tc import pct, tc_time
from wotbench.netimpair.backends.base import Backend, DeviceTarget


def impair_spec(imp: Impairment) -> str:
    kv = [f"dir={imp.direction}"]
    if imp.delay:
        d = imp.delay
        kv.append(f"delay={tc_time(d.time_ms)}")
        if d.jitter_ms:
            kv.append(f"jitter={tc_time(d.jitter_ms)}")
            if d.correlation:
                kv.append(f"delay-corr={pct(d.correlation)}")
            kv.append(f"dist={d.distribution or 'uniform'}")
    if imp.loss and imp.loss.percent is not None:
        kv.append(f"loss={pct(imp.loss.percent)}")
        if imp.loss.correlation:
            kv.append(f"loss-corr={pct(imp.loss.correlation)}")
    if imp.rate:
        kv.append(f"rate={imp.rate}")
    for kind, short in (("duplicate", "dup"), ("corrupt", "corrupt")):
        v = getattr(imp, kind)
        if v:
            kv.append(f"{short}={pct(v.percent)}")
            if v.correlation:
                kv.append(f"{short}-corr={pct(v.correlation)}")
    return ",".join(kv)


def ge_spec(imp: Impairment) -> Optional[str]:
    if not (imp.loss and imp.loss.gilbert_elliott):
        return None
    g = imp.loss.gilbert_elliott
    return f"p={pct(g.p)},r={pct(g.r)},1-h={pct(g.one_minus_h)},1-k={pct(g.one_minus_k)}"


def device_seed(seed: int, device: str) -> int:
    """Stable 63-bit seed per device (independent of Python's hash randomisation)."""
    h = hashlib.sha256(f"{seed}/{device}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def app_args(imp: Impairment, seed: int, device: str) -> list[str]:
    args = ["--impair", impair_spec(imp)]
    ge = ge_spec(imp)
    if ge:
        args += ["--impair-ge", ge]
    return args + ["--impair-seed", str(device_seed(seed, device))]


class AppBackend(Backend):
    name = "app"

    def __init__(self, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None, seed: int = 1):
        super().__init__(plan, runner)
        self.seed = seed

    def available(self) -> tuple[bool, str]:
        return True, "wot-device emulates the impairments itself (--impair)"

    def device_args(self, device: str) -> list[str]:
        d = self.plan.get(device)
        return app_args(d.impairment, self.seed, device) if d else []

    def apply(self, targets: Sequence[DeviceTarget] = (), duration_s: float = 0.0) -> dict[str, Any]:
        """Nothing to do at run time: the arguments went onto the command lines. Records them."""
        for d in self.plan:
            self.applied[d.device] = {"applied": self.device_args(d.device)}
        return self.record()

    def remove(self) -> dict[str, Any]:
        self.removed = True
        return {"removed": True, "devices": []}
