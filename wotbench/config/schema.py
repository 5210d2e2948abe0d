"""The WoTbench configuration schema (YAML, docs/CONFIG.md): one pydantic model per block.

Field rules live here; rules that span blocks (duplicate groups, addresses the devices need,
pods, proxies with Observe, ...) are in :mod:`wotbench.config.checks`, and reading a file in
:mod:`wotbench.config.load`. Each block with rules of its own has its module beside this one
(``byo``, ``dtls``, ``hog_episodes``, ``slo``, ``distributions``; the ``network:`` block is
:mod:`wotbench.netimpair.model`). What depends on the host sits above: :mod:`wotbench.deploy.plan`
(core placement), :mod:`wotbench.deploy.resolve` (``auto`` values, device addresses).
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, field_validator,
                      model_validator)

from wotbench.deploy.addressing import device_name
from wotbench.config import byo
from wotbench.config.hog_episodes import ContentionEpisode
from wotbench.config.distributions import DISTS
from wotbench.config import dtls as dtls_spec
from wotbench.netimpair.model import NetworkImpairment
from wotbench.config.slo import Slo

Mode = Literal["sleep", "busy"]
# how a device answers (wot-device --response; wot-device/README.md "Response path")
Response = Literal["auto", "piggyback", "separate"]
Method = Literal["GET", "PUT", "POST", "DELETE"]
METHODS = ("GET", "PUT", "POST", "DELETE")
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
MAX_DATAGRAM_PAYLOAD = 1024     # larger bodies go block-wise (RFC 7959)
MAX_PAYLOAD_BYTES = 1048576     # gateway-emulator and wot-device limit with block-wise transfer
MAX_PER_CONTAINER = 64          # devices in one pod: one wot-device per port, each with its threads


class _Model(BaseModel):
    # inf/nan are never meaningful here and would only fail later, deep in the trace generator
    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)


class DistSpec(_Model):
    """``{dist, mean, cv?, shape?, file?}``; all values in ms. See wotbench.config.distributions."""
    dist: Literal[DISTS]  # type: ignore[valid-type]
    mean: Optional[float] = Field(None, gt=0)
    cv: Optional[float] = Field(None, ge=0)
    shape: Optional[float] = Field(None, gt=0)
    file: Optional[str] = None


NOTIFY_DISTS = ("deterministic", "uniform", "exponential", "normal")   # what wot-device emulates


class Observe(_Model):
    """Observable resources (RFC 7641) of a device group and the observers the GE emulates.

    The first ``resources`` of the group's resources are observable. Each notifies on its own
    process: every ``period_ms`` ± ``jitter_ms`` (uniform) or ``interval`` (a distribution,
    ms: deterministic | uniform | exponential | normal), after a sensor read of
    ``service_time_ms`` (the group's sleep|busy mode). Per device, ``observers`` observers
    register (observer k on observable resource k mod ``resources``) at a uniform instant in
    ``[0, register_within_s)`` of the test and cancel after ``hold`` (a distribution, ms;
    null = at the end of the test)."""
    resources: int = Field(1, ge=1)
    period_ms: Optional[float] = Field(None, gt=0)
    jitter_ms: float = Field(0.0, ge=0)
    interval: Optional[DistSpec] = None
    service_time_ms: float = Field(0.0, ge=0)
    type: Literal["con", "non"] = "con"
    max_age_s: int = Field(60, ge=0, le=2**32 - 1)
    observers: int = Field(1, ge=1, le=1000)
    register_within_s: float = Field(1.0, ge=0)
    hold: Optional[DistSpec] = None


class DeviceGroup(_Model):
    group: Annotated[str, Field(pattern=NAME_PATTERN, max_length=40)]
    count: int = Field(1, ge=1)
    threads: int = Field(1, ge=1, le=1024)
    mode: Mode = "busy"
    response: Response = "auto"
    service_time: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=5.0))
    rit: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=200.0))
    resources: int = Field(10, ge=1, le=100000)
    methods: dict[str, float] = Field(default_factory=lambda: {"GET": 1.0})
    # above 1024 bytes the body moves block-wise (gateways.block_size, default 1024)
    payload_bytes: int = Field(16, ge=0, le=MAX_PAYLOAD_BYTES)
    request_payload_bytes: int = Field(0, ge=0, le=MAX_PAYLOAD_BYTES)
    cpu_quota: Optional[float] = Field(None, gt=0)
    memory_mb: int = Field(32, ge=4)
    # per-group network impairments (docs/NETWORK-IMPAIRMENTS.md), or null
    network: Optional[NetworkImpairment] = None
    # false: no request workload for this group (e.g. only observations)
    requests: bool = True
    # observable resources and observers (RFC 7641), or null
    observe: Optional[Observe] = None
    # devices per container (wotbench.deploy.pods): 'auto' = 1 up to 128 devices in the run, then
    # packed so the run needs about 128 containers; or a number 1..64
    per_container: Any = "auto"

    # bring your own system under test (wotbench.config.byo): a CoAP server WoTbench starts instead of
    # wot-device, or endpoints it does not start; the paths the trace requests of them
    server: Optional[byo.ServerSpec] = None
    external: Optional[list[str]] = None
    paths: Optional[list[str]] = Field(None, min_length=1)

    @field_validator("external", mode="before")
    @classmethod
    def _external(cls, v: Any) -> Any:
        return byo.ENDPOINTS_VALIDATOR(v)

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        if v is None:
            return v
        out = [p.lstrip("/") for p in v]
        bad = [p for p in v if any(c.isspace() or c in ",\"" for c in p)]
        if bad:
            raise ValueError(f"path {bad[0]!r}: expected a URI path such as 'time', '' (the root) or "
                             "'sensors/temp?unit=c' (no spaces, commas or quotes)")
        return out

    @model_validator(mode="after")
    def _external_count(self) -> "DeviceGroup":
        if self.external and "count" not in self.model_fields_set:
            self.count = len(self.external)
        return self

    @property
    def third_party(self) -> bool:
        """Not a wot-device: no resource file, no device log (R only)."""
        return self.server is not None or self.external is not None

    @field_validator("per_container")
    @classmethod
    def _per_container(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PER_CONTAINER:
            raise ValueError(f"must be 'auto' or an integer 1..{MAX_PER_CONTAINER}, got {v!r}")
        return v

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError(f"must be a mapping of method to weight, e.g. {{GET: 0.8, PUT: 0.2}}, got {v!r}")
        bad = [k for k in v if k not in METHODS]
        if bad:
            raise ValueError(f"unknown method {bad[0]!r}, expected one of {', '.join(METHODS)}")
        for k, w in v.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise ValueError(f"weight of {k} must be a number >= 0, got {w!r}")
        if sum(v.values()) <= 0:
            raise ValueError("the weights must not all be 0")
        return v


class Gateways(_Model):
    count: int = Field(1, ge=1, le=64)
    wait: Literal["busy", "hybrid", "auto"] = "auto"
    message_type: Literal["con", "non"] = "con"
    timeout_ms: int = Field(10000, gt=0)
    retransmit: bool = False
    # every main-GE request through a CoAP forward proxy (wotbench.config.byo.ProxySpec), or null
    proxy: Optional[byo.ProxySpec] = None
    # block-wise transfer (RFC 7959): block size in bytes, a power of two 16..1024; null = 1024
    # when a body exceeds one datagram (1024 bytes), else no block-wise transfer
    block_size: Optional[int] = None

    @field_validator("block_size")
    @classmethod
    def _block_size(cls, v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or v not in (16, 32, 64, 128, 256, 512, 1024)):
            raise ValueError(f"must be a power of two in 16..1024 (SZX 0..6), got {v!r}")
        return v


class ContentionDetector(_Model):
    enabled: bool = True
    service_time_ms: Any = "auto"   # 'auto' or a number > 0
    mode: Literal["auto", "sleep", "busy"] = "auto"
    # the CD node answers its probes in the ACK: one probe at a time, the lean path
    response: Response = "piggyback"
    # 0.5 s probes / 20 s calibration: 20 probes per 10 s contention window, 40 baseline samples
    # (evidence: docs/VALIDATION.md "Detector defaults")
    interval_s: float = Field(0.5, gt=0)
    calibration_s: float = Field(20.0, ge=0)

    @field_validator("service_time_ms")
    @classmethod
    def _st(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"must be 'auto' or a number > 0, got {v!r}")
        return float(v)


class Placement(_Model):
    cpus: Any = "all"               # 'all' or a list of core ids
    reserved_os_cores: int = Field(1, ge=0)
    affinity: Literal["pinned", "shared"] = "pinned"

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, v: Any) -> Any:
        if v == "all":
            return v
        if not isinstance(v, list) or not v or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in v):
            raise ValueError(f"must be 'all' or a non-empty list of core ids (integers >= 0), got {v!r}")
        if len(set(v)) != len(v):
            raise ValueError(f"core ids must be unique, got {v!r}")
        return sorted(v)


class Network(_Model):
    subnet: str = "172.28.0.0/16"
    # how per-device impairments (devices[].network) are applied; see docs/NETWORK-IMPAIRMENTS.md
    backend: Literal["auto", "pumba", "netem", "app"] = "auto"

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: str) -> str:
        try:
            net = ipaddress.ip_network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"must be an IPv4 network like 172.28.0.0/16, got {v!r} ({e})") from None
        if net.version != 4:
            raise ValueError(f"must be an IPv4 network, got {v!r}")
        if net.prefixlen > 28:
            raise ValueError(f"too small (at most /28), got {v!r}")
        return str(net)


class Monitor(_Model):
    enabled: bool = True
    interval_s: float = Field(1.0, gt=0)


class Report(_Model):
    enabled: bool = True


class TraceSource(_Model):
    """A recorded trace used instead of a generated one."""
    file: str
    resources: Optional[str] = None   # default: <dir of file>/resources

    @property
    def resources_dir(self) -> Path:
        return Path(self.resources) if self.resources else Path(self.file).parent / "resources"


class Config(_Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=60)]
    duration_s: float = Field(60.0, gt=0)
    seed: int = Field(1, ge=0)
    backend: Literal["docker", "process", "auto"] = "docker"
    trace: Optional[TraceSource] = None
    devices: list[DeviceGroup] = Field(min_length=1)
    gateways: Gateways = Field(default_factory=Gateways)
    contention_detector: ContentionDetector = Field(default_factory=ContentionDetector)
    placement: Placement = Field(default_factory=Placement)
    network: Network = Field(default_factory=Network)
    monitor: Monitor = Field(default_factory=Monitor)
    report: Report = Field(default_factory=Report)
    # deliberate contention episodes (wotbench.config.hog_episodes)
    contention: Optional[list[ContentionEpisode]] = None
    # service-level objectives the run is judged on (wotbench.config.slo; exit code 4 when missed)
    slo: Optional[Slo] = None
    # DTLS-PSK between the gateway emulators and the wot-devices (wotbench.config.dtls)
    dtls: dtls_spec.Dtls = Field(default_factory=dtls_spec.Dtls)

    @field_validator("trace", mode="before")
    @classmethod
    def _trace(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"file": v}
        return v

    _source: Optional[str] = PrivateAttr(None)   # the file it was loaded from

    # -- convenience -----------------------------------------------------------------
    @property
    def total_devices(self) -> int:
        return sum(g.count for g in self.devices)

    def ge_block_size(self, trace_max_payload: int = 0) -> Optional[int]:
        """The GE's --block-size: the configured one, or 1024 when a body (a generated payload or
        ``trace_max_payload`` of a recorded trace) exceeds one datagram; None: not block-wise."""
        if self.gateways.block_size is not None:
            return self.gateways.block_size
        big = max([trace_max_payload] + [max(g.payload_bytes, g.request_payload_bytes) for g in self.devices])
        return MAX_DATAGRAM_PAYLOAD if big > MAX_DATAGRAM_PAYLOAD else None

    def device_names(self) -> list[str]:
        return [device_name(g.group, i) for g in self.devices for i in range(g.count)]
