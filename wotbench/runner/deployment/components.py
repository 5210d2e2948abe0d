"""What a run deploys, independent of the backend: devices (incl. the CD node) and gateway
emulators (main GEs and the CD-GE), with their command lines (contract §2, §3)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING, Optional

from wotbench.deploy.addressing import COAP_PORT
from wotbench.rundir import DeviceRecord, GeRecord, RunDir
from wotbench.rundir.layout import GE_BODY_TEMPLATE, PUSH_SCHEDULE

if TYPE_CHECKING:
    from wotbench.config.byo import Program
    from wotbench.runner.prepare.dtlskey import DtlsCreds
    from wotbench.runner.deployment.serverfiles import ServerFiles


@dataclass
class DeviceRun:
    name: str
    id: int
    group: str
    role: str                   # device | cd-node | proxy | external (not started)
    address: str
    cpuset: str
    resources: Optional[Path]   # host path of the resource file (None: not a wot-device)
    log_dir: Path               # host path: devices/<name>/
    stdout: Path                # its stdout + stderr when a local process (process backend)
    threads: int = 1
    response: str = "auto"      # wot-device --response
    port: int = COAP_PORT
    cpu_quota: float | None = None
    memory_mb: int | None = None
    impair: list[str] = field(default_factory=list)   # app-level impairment flags (never cd-node)
    # a third-party program instead of wot-device (wotbench.config.byo), and its config key
    program: Optional["Program"] = None
    program_key: str = ""
    dtls: Optional["DtlsCreds"] = None   # coaps:// (never the CD node)
    container: str = ""         # its container (wotbench.deploy.pods): its pod's name, else its own
    push_timeout_ms: Optional[int] = None   # devices[].push: its schedule is in its log dir
    protocol: str = "coap"      # devices[].protocol: how readiness is probed (coap | http)
    probe_path: str = ""        # http: the path the readiness GET asks for
    files: Optional["ServerFiles"] = None   # its rendered config_template (runner/serverconf.py)
    # an HTTP Thing group (wotbench.things.http_thing): one process serves several devices;
    # the first one's process gets ``--instance NAME=HOST:PORT`` for each of ``hosts``, the
    # others name it in ``hosted_by`` and have no process of their own (process backend)
    hosts: list[tuple[str, str]] = field(default_factory=list)
    hosted_by: str = ""

    def __post_init__(self) -> None:
        self.container = self.container or self.name

    @property
    def endpoint(self) -> str:
        """HOST:PORT (an IPv6 host in brackets)."""
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"

    @property
    def started(self) -> bool:
        """WoTbench runs it (an external endpoint it only talks to)."""
        return self.role != "external"

    @property
    def emulated(self) -> bool:
        """A wot-device (it writes a device log and a ready file)."""
        return self.program is None and self.started

    def program_args(self, use_image: bool, listen: str, in_container: bool = False) -> list[str]:
        """The third-party program's arguments (``use_image``) or whole command line;
        ``in_container``: {config}/{scratch} as a container sees them."""
        f = self.files
        return self.program.argv(use_image=use_image, address=listen, port=self.port,
                                 name=self.name, config=f.config_in(in_container) if f else "",
                                 scratch=f.scratch_in(in_container) if f else "") \
            + [a for n, ep in self.hosts for a in ("--instance", f"{n}={ep}")]

    def describe_program(self) -> Optional[str]:
        if self.role == "external":
            return f"external endpoint {self.address}:{self.port}"
        p = self.program
        if p is None:
            return None
        return f"image {p.image}" if p.image else "command " + " ".join(p.command or [])

    def args(self, resources: str, log_dir: str, listen: str | None,
             key_file: str = "") -> list[str]:
        """wot-device's arguments; ``key_file``: where it reads the DTLS key (its own view)."""
        a = ["--resources", resources, "--log-dir", log_dir, "--threads", str(self.threads),
             "--name", self.name, "--response", self.response]
        a += (["--listen", listen] if listen else []) + self.impair
        if self.push_timeout_ms is not None:
            a += ["--push", f"{log_dir}/{PUSH_SCHEDULE}", "--push-id", str(self.id),
                  "--push-timeout-ms", str(self.push_timeout_ms)]
        return a + (self.dtls.device_args(key_file) if self.dtls else [])

    def record(self, rd: RunDir) -> DeviceRecord:
        """run.json ``devices[]`` / ``cd_node``."""
        return DeviceRecord(name=self.name, id=self.id, address=self.address, port=self.port,
                            group=self.group, role=self.role,
                            resources=rd.rel(self.resources) if self.resources else None,
                            cpuset=self.cpuset, threads=self.threads, response=self.response,
                            cpu_quota=self.cpu_quota,
                            memory_mb=self.memory_mb, log_dir=rd.rel(self.log_dir),
                            server=self.describe_program(),
                            container=None if self.container == self.name else self.container)


@dataclass
class GeRun:
    name: str                   # ge-0, ge-1, ... | cd-ge
    role: str                   # ge | cd-ge
    cpu: int
    trace: Path                 # host path
    out_dir: Path               # host path: ge/<id>/ or cd-ge/
    stdout: Path                # its stdout + stderr when a local process (process backend)
    wait: str = "hybrid"
    spin_us: Optional[int] = None   # --spin-us (hybrid); None: the GE's default
    msg_type: str = "con"
    timeout_ms: int = 10000
    retransmit: bool = False
    start_at: int | None = None  # absolute CLOCK_MONOTONIC ns
    warmup_ms: int = 0           # readiness pings before the start (0: none)
    host_network: bool = False   # in the host's network namespace (to reach external endpoints)
    extra: list[str] = field(default_factory=list)
    dtls: Optional["DtlsCreds"] = None   # main GEs with dtls.enabled (never the CD-GE)
    journal: Optional[Path] = None       # host path of its journal (runner/deployment/journal.py)
    http_body_template: bool = False     # --http-body-template <out dir>/HTTP body template file

    def args(self, trace: str, out_dir: str, key_file: str = "",
             journal: Optional[str] = None) -> list[str]:
        """Its command line; ``journal``: the journal's path as the GE sees it."""
        a = ["--trace", trace, "--out", out_dir, "--wait", self.wait, "--type", self.msg_type,
             "--timeout-ms", str(self.timeout_ms), "--cpu", str(self.cpu), "--label", self.name]
        if self.spin_us is not None:
            a += ["--spin-us", str(self.spin_us)]
        if journal:
            a += ["--journal", journal]
        if self.start_at is not None:
            a += ["--start-at", str(self.start_at)]
        if self.retransmit:
            a.append("--retransmit")
        if self.warmup_ms:
            a += ["--warmup-ms", str(self.warmup_ms)]
        if self.http_body_template:
            a += ["--http-body-template", f"{out_dir}/{GE_BODY_TEMPLATE}"]
        return a + self.extra + (self.dtls.ge_args(key_file) if self.dtls else [])

    def record(self, rd: RunDir) -> GeRecord:
        """run.json ``ges[]`` / ``cd_ge``."""
        return GeRecord(id=self.name, dir=rd.rel(self.out_dir), cpu=self.cpu,
                        trace=rd.rel(self.trace), wait=self.wait, start_at_mono_ns=self.start_at)
