"""What a run deploys, independent of the backend: devices (incl. the CD node) and gateway
emulators (main GEs and the CD-GE), with their command lines (contract §2, §3)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

COAP_PORT = 5683


@dataclass
class DeviceRun:
    name: str
    id: int
    group: str
    role: str                   # device | cd-node
    address: str
    cpuset: str
    resources: Path             # host path of the resource file
    log_dir: Path               # host path: devices/<name>/
    threads: int = 1
    port: int = COAP_PORT
    cpu_quota: float | None = None
    memory_mb: int | None = None
    impair: list[str] = field(default_factory=list)   # app-level impairment flags (never cd-node)

    def args(self, resources: str, log_dir: str, listen: str | None) -> list[str]:
        a = ["--resources", resources, "--log-dir", log_dir, "--threads", str(self.threads),
             "--name", self.name]
        return a + (["--listen", listen] if listen else []) + self.impair

    def record(self, run_dir: Path) -> dict:
        """run.json ``devices[]``."""
        return {"name": self.name, "id": self.id, "address": self.address, "port": self.port,
                "group": self.group, "role": self.role,
                "resources": str(self.resources.relative_to(run_dir)), "cpuset": self.cpuset,
                "threads": self.threads, "cpu_quota": self.cpu_quota,
                "memory_mb": self.memory_mb, "log_dir": str(self.log_dir.relative_to(run_dir))}


@dataclass
class GeRun:
    name: str                   # ge-0, ge-1, ... | cd-ge
    role: str                   # ge | cd-ge
    cpu: int
    trace: Path                 # host path
    out_dir: Path               # host path: ge/<id>/ or cd-ge/
    wait: str = "hybrid"
    msg_type: str = "con"
    timeout_ms: int = 10000
    retransmit: bool = False
    start_at: int | None = None  # absolute CLOCK_MONOTONIC ns
    extra: list[str] = field(default_factory=list)

    def args(self, trace: str, out_dir: str) -> list[str]:
        a = ["--trace", trace, "--out", out_dir, "--wait", self.wait, "--type", self.msg_type,
             "--timeout-ms", str(self.timeout_ms), "--cpu", str(self.cpu), "--label", self.name]
        if self.start_at is not None:
            a += ["--start-at", str(self.start_at)]
        if self.retransmit:
            a.append("--retransmit")
        return a + self.extra

    def record(self, run_dir: Path) -> dict:
        return {"id": self.name, "dir": str(self.out_dir.relative_to(run_dir)), "cpu": self.cpu,
                "trace": str(self.trace.relative_to(run_dir)), "wait": self.wait,
                "start_at_mono_ns": self.start_at}
