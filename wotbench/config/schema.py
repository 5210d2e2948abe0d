"""The WoTbench configuration schema (YAML, docs/CONFIG.md): one pydantic model per block.

Field rules live here; rules that span blocks (duplicate groups, addresses the devices need,
pods, proxies with Observe, ...) are in :mod:`wotbench.configfile.checks`, and reading a file in
:mod:`wotbench.configfile.yaml_loader` (both above :mod:`wotbench.deploy` and
:mod:`wotbench.things`, which they use). Each block with rules of its own has its module beside
this one (``byo``, ``dtls``, ``hog_episodes``, ``slo``, ``distributions``; the ``network:`` block is
:mod:`wotbench.netimpair.model`). What depends on the host sits above: :mod:`wotbench.deploy.plan`
(core placement), :mod:`wotbench.deploy.resolve` (``auto`` values, device addresses).
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, field_validator,
                      model_validator)

from wotbench.config import byo
from wotbench.config import connected as connected_spec
from wotbench.config.hog_episodes import ContentionEpisode
from wotbench.config.distributions import DISTS, DistSpec  # noqa: F401 (DistSpec: re-exported)
from wotbench.config import dtls as dtls_spec
from wotbench.config.http_spec import HTTP_PORT, HttpClient
from wotbench.config.push_spec import PushOp
from wotbench.config.notify import Notify
from wotbench.config.sut_faults import SutFault
from wotbench.config.rate_profile import RateProfile
from wotbench.netimpair.model import NetworkImpairment
from wotbench.config.slo_spec import Slo
from wotbench.config.things_spec import DirectorySpec, ThingSpec

Mode = Literal["sleep", "busy"]
# how a device answers (wot-device --response; wot-device/README.md "Response path")
Response = Literal["auto", "piggyback", "separate"]
Method = Literal["GET", "PUT", "POST", "DELETE"]
METHODS = ("GET", "PUT", "POST", "DELETE")
HTTP_METHODS = METHODS + ("PATCH",)   # PATCH: protocol http only (wotbench.config.http_spec)
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


def device_name(group: str, index: int) -> str:
    """The name of device ``index`` (0-based) of ``group``: ``<group>-<index>``."""
    return f"{group}-{index}"
MAX_DATAGRAM_PAYLOAD = 1024     # larger bodies go block-wise (RFC 7959)
MAX_PAYLOAD_BYTES = 1048576     # gateway-emulator and wot-device limit with block-wise transfer
MAX_PER_CONTAINER = 64          # devices in one pod: one wot-device per port, each with its threads
MAX_FLEET_PER_CONTAINER = 55000  # engine devices on one container address: one port each from 5683
MAX_CLIENTS = 60000             # GE client endpoints: its socket index is 16 bits (wotbench.config.loadloop)
THINK_DISTS = ("deterministic", "exponential", "uniform")   # think times the GE samples itself


class _Model(BaseModel):
    # inf/nan are never meaningful here and would only fail later, deep in the trace generator
    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)


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
    resources: int = Field(1, ge=1, description="the first N resources of the group are observable")
    period_ms: Optional[float] = Field(
        None, gt=0, description="notify every period_ms (± jitter_ms); or give `interval`")
    jitter_ms: float = Field(0.0, ge=0, description="uniform ± jitter on period_ms, ms")
    interval: Optional[DistSpec] = Field(
        None, description="instead of period_ms: the time between notifications, a distribution "
                          "(ms; dist deterministic | uniform | exponential | normal)")
    service_time_ms: float = Field(
        0.0, ge=0, description="sensor read before each notification, ms (the group's sleep|busy "
                               "mode)")
    type: Literal["con", "non"] = Field("con", description="notifications sent CON or NON")
    max_age_s: int = Field(60, ge=0, le=2**32 - 1, description="the Max-Age option of notifications")
    observers: int = Field(
        1, ge=1, le=1000, description="observers per device; observer k observes observable "
                                      "resource k mod `resources`")
    register_within_s: float = Field(
        1.0, ge=0, description="each observer registers at a uniform instant in [0, this) of "
                               "the test")
    hold: Optional[DistSpec] = Field(
        None, description="how long an observer stays registered (a distribution, ms); null: "
                          "until the end of the test")


class DeviceGroup(_Model):
    group: Annotated[str, Field(pattern=NAME_PATTERN, max_length=40,
                                description="group name; devices are named `<group>-<i>`")]
    count: int = Field(1, ge=1, description="number of devices (with `external`: one per endpoint)")
    threads: int = Field(1, ge=1, le=1024,
                         description="worker threads per device (1 = a single-server queue)")
    mode: Mode = Field("busy", description="`busy` burns CPU time (stretches when the core is "
                                           "contended); `sleep` waits (sensor-bound)")
    response: Response = Field(
        "auto", description="how the device answers (wot-device --response): `piggyback` (served "
        "by the I/O thread, answer in the ACK), `separate` (a worker serves it: empty ACK, then a "
        "separate response; `threads`/queue/5.03 apply), `auto` = piggyback for resources with "
        "S ≤ 1 ms, separate above (wot-device/README.md \"Response path\")")
    service_time: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=5.0),
                                   description="distribution of the service time S, ms")
    rit: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=200.0),
                          description="request inter-arrival time per device, ms")
    rate_profile: Optional[RateProfile] = Field(
        None, description="the devices' request rate over the test (steps, ramp, burst, sine; "
        "req/s per device, wotbench.config.rate_profile) instead of rit's steady one; rit keeps "
        "its shape (exponential: a non-homogeneous Poisson process)")
    resources: int = Field(10, ge=1, le=100000,
                           description="synthetic resources per device; their service times are "
                                       "chosen so the request-weighted distribution matches "
                                       "`service_time`")
    methods: dict[str, float] = Field(default_factory=lambda: {"GET": 1.0},
                                      description="method mix: weights of GET/PUT/POST/DELETE "
                                                  "(and PATCH with protocol: http)")
    protocol: Literal["coap", "http", "websocket", "chunked", "chunked-post"] = Field(
        "coap", description="what the devices speak: `coap`, or `http` (HTTP/1.1: a `server` or "
        "`external` endpoints only; the run's groups all speak one protocol; "
        "`gateways.http`, docs/HTTP.md). A server of an http group listens on port 8080 unless "
        "`server.port` says otherwise. `websocket` / `chunked` / `chunked-post` (the study's "
        "attach: one POST held open both ways): connected devices that hold a connection to "
        "`edge_server` (wot-fleet engines, `connection`, docs/CONNECTED.md)")
    connection: Optional[connected_spec.Connection] = Field(
        None, description="protocol websocket/chunked: what each device does on its connection "
        "(wotbench.config.connected, docs/CONNECTED.md)")
    payload_bytes: int = Field(16, ge=0, le=MAX_PAYLOAD_BYTES,
                               description="response payload, bytes; above 1024 the body moves "
                                           "block-wise (`gateways.block_size`, default 1024)")
    request_payload_bytes: int = Field(0, ge=0, le=MAX_PAYLOAD_BYTES,
                                       description="PUT/POST payload, bytes (block-wise above 1024)")
    cpu_quota: Optional[float] = Field(None, gt=0,
                                       description="fraction of one core, e.g. 0.5 (heterogeneous "
                                                   "devices); Docker only")
    memory_mb: int = Field(32, ge=4, description="memory limit per device (a pod's limit is the "
                                                 "sum of its devices')")
    network: Optional[NetworkImpairment] = Field(
        None, description="per-group network impairments (docs/NETWORK-IMPAIRMENTS.md), or null")
    requests: bool = Field(True, description="false: no request workload for this group (e.g. "
                                             "only observations)")
    observe: Optional[Observe] = Field(
        None, description="observable resources and observers (RFC 7641), or null")
    per_container: Any = Field(
        "auto", description="devices per container (\"pods\": one process, port and log each, "
        "sharing the pod's address on ports 5683, 5684, ...): `auto` = one per container up to "
        "128 devices in the run, then packed so the run needs about 128 containers (a container "
        "costs the runtime ≈ 0.27 CPU-s to start, docs/SCALE.md); or 1..64. Always 1 for "
        "`server`/`external` groups and for groups whose `network` impairments tc applies "
        "(`pumba`/`netem`: a pod's devices would share one link); an explicit N > 1 there is "
        "refused. With `engine: fleet`: devices per engine, 1..55 000 (one port each on "
        "Docker); `auto` = as many as one process may open sockets on this host "
        "(RLIMIT_NOFILE hard limit; dockerd's on Docker), at most 55 000")

    engine: Literal["auto", "process", "fleet"] = Field(
        "auto", description="how the group's devices run: `process` (one wot-device process "
        "each, alone or in pods), `fleet` (thousands of devices per wot-fleet event-driven "
        "engine process, each its own UDP endpoint: docs/FLEET.md), `auto` = fleet when the run "
        "has more devices than the process form carries on one host and the group uses only "
        "what the engine supports (wotbench.deploy.fleet), else process")

    # bring your own system under test (wotbench.config.byo)
    server: Optional[byo.ServerSpec] = Field(
        None, description="every device of the group runs this CoAP server instead of wot-device "
                          "(docs/BYO.md)")
    external: Optional[list[str]] = Field(
        None, description="`[HOST:PORT, ...]`: endpoints WoTbench does not start (a board on the "
        "LAN, a server on this host's loopback); one device per endpoint. The GE reaches them "
        "from the host's network namespace")
    push: Optional[list[PushOp]] = Field(
        None, min_length=1, description="requests the devices send themselves (client devices, "
        "wotbench.config.push_spec): setup (e.g. registration) before T0, an open-loop schedule "
        "during the test, teardown after it; each device sends from its own address")
    paths: Optional[list[str]] = Field(
        None, min_length=1, description="the resource paths the trace may request (uniformly) of a "
        "`server` or `external` endpoint, e.g. `[time]`; required with them, refused otherwise")
    thing: Optional[int] = Field(
        None, ge=0, description="set by WoTbench, not by hand: the `things:` entry this group was "
        "made from (its resources and workload come from that TD, docs/WOT.md)")
    directory: bool = Field(
        False, description="set by WoTbench, not by hand: this group is the `directory:` (its "
        "trace: registrations, verification, updates, queries, deregistrations, docs/WOT.md)")

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
        if self.protocol == "http" and self.server is not None \
                and "port" not in self.server.model_fields_set:
            self.server.port = HTTP_PORT   # a non-root server cannot bind 80
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
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_FLEET_PER_CONTAINER:
            raise ValueError(f"must be 'auto' or an integer 1..{MAX_PER_CONTAINER} (with engine: "
                             f"fleet 1..{MAX_FLEET_PER_CONTAINER}), got {v!r}")
        return v

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError(f"must be a mapping of method to weight, e.g. {{GET: 0.8, PUT: 0.2}}, got {v!r}")
        bad = [k for k in v if k not in HTTP_METHODS]
        if bad:
            raise ValueError(f"unknown method {bad[0]!r}, expected one of {', '.join(METHODS)} "
                             "(or PATCH with protocol: http)")
        for k, w in v.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise ValueError(f"weight of {k} must be a number >= 0, got {w!r}")
        if sum(v.values()) <= 0:
            raise ValueError("the weights must not all be 0")
        return v


class Gateways(_Model):
    count: int = Field(1, ge=1, le=64, description="gateway emulators; devices are split among them")
    wait: Literal["busy", "hybrid", "auto"] = Field(
        "auto", description="`busy` (spin, for a dedicated core), `hybrid` (sleep then spin), "
                            "`auto` (the planner decides)")
    spin_us: Optional[int] = Field(
        None, ge=0, le=10000, description="hybrid wait: each GE spins this long before a send "
        "instead of sleeping (gateway-emulator --spin-us); null: the planner picks (docs/FLEET.md)")
    message_type: Literal["con", "non"] = Field("con", description="CoAP message type of requests")
    timeout_ms: int = Field(10000, gt=0, description="no answer by then = lost (timeout)")
    retransmit: bool = Field(False, description="RFC 7252 CON retransmission")
    proxy: Optional[byo.ProxySpec] = Field(
        None, description="every main-GE request goes through this CoAP forward proxy "
                          "(docs/BYO.md), or null; the CD's probes go to its node directly")
    http: Optional[HttpClient] = Field(
        None, description="HTTP/1.1 client settings for `protocol: http` device groups "
        "(wotbench.config.http_spec, docs/HTTP.md); null: keep-alive, one connection per target, "
        "no extra headers")
    payload_template: Optional[str] = Field(
        None, description="CoAP runs: the payload of every PUT and POST request, with the "
        "placeholders of gateways.http.body_template ({{index}} {{device}} {{method}} {{path}} "
        "{{payload}} and the per-request values {{seq}} {{client}} {{rand}} {{time_ms}} "
        "{{time_ns}}, docs/PLATFORMS.md); at most one datagram (1024 bytes); null: "
        "request_payload_bytes of filler")
    block_size: Optional[int] = Field(
        None, description="block-wise transfer (RFC 7959): block size in bytes, a power of two "
        "16..1024; null = 1024 when a body exceeds one datagram (1024 bytes), else no block-wise "
        "transfer")

    loop: Literal["open", "closed"] = Field(
        "open", description="`open`: requests leave on the trace's schedule whatever the answers "
        "(no coordinated omission); `closed`: `clients` virtual clients, each sending its next "
        "request a `think` time after the previous answer (or timeout), for `duration_s` "
        "(docs/CLOSED-LOOP.md). The contention detector's probes stay open loop")
    clients: Optional[int] = Field(
        None, ge=1, le=MAX_CLIENTS, description="client endpoints (each its own UDP "
        "source port): required with `loop: closed` (the virtual clients); with `loop: open`, "
        "each trace request leaves from one of N endpoints in turn (null: the per-device "
        "port pool). Checked against the file-descriptor limit and the ephemeral port range "
        "before the run starts")
    think: Optional[DistSpec] = Field(
        None, description="closed loop: think time between an answer and the client's next "
        "request, ms (dist deterministic | exponential | uniform); null = 0")
    target: Literal["round_robin", "one", "random"] = Field(
        "round_robin", description="closed loop: which target (device and resource) a client's "
        "next request goes to: `round_robin` over all targets (client k starts at target k), "
        "`one` (the first device's first resource), `random` (uniform)")
    warmup_s: float = Field(
        0.0, ge=0, description="closed loop: requests sent in the first warmup_s are recorded "
        "(requests.csv phase `warmup`) but not counted")
    cooldown_s: float = Field(
        0.0, ge=0, description="closed loop: requests sent in the last cooldown_s are recorded "
        "(phase `cooldown`) but not counted")
    requests_per_client: Optional[int] = Field(
        None, ge=1, le=1_000_000_000, description="closed loop: each client stops after this "
        "many requests (JMeter's thread group: N clients x M requests); the run ends when every "
        "client has, or at duration_s, whichever is first (null: no budget, duration_s)")
    ramp_up_s: float = Field(
        0.0, ge=0, description="closed loop: the clients start one after another over this "
        "many seconds (client k at k/N of it), not all at the start")

    @model_validator(mode="after")
    def _loop(self) -> "Gateways":
        if self.loop == "closed" and self.clients is None:
            raise ValueError("loop: closed needs clients: N (the virtual clients)")
        if self.loop == "open":
            # set to something but the default (a resolved config dumps every key)
            extra = [k for k, dflt in (("think", None), ("warmup_s", 0.0), ("cooldown_s", 0.0),
                                       ("requests_per_client", None), ("ramp_up_s", 0.0),
                                       ("target", "round_robin")) if getattr(self, k) != dflt]
            if extra:
                raise ValueError(f"{extra[0]} is a closed-loop key, expected loop: closed with it")
        if self.think is not None:
            if self.think.dist not in THINK_DISTS:
                raise ValueError(f"think.dist {self.think.dist!r}, expected one of "
                                 f"{', '.join(THINK_DISTS)} (what the GE samples)")
            if self.think.mean is None:
                raise ValueError("think.mean is required (ms)")
            if self.think.dist == "uniform" and not 0 <= (self.think.cv or 0) <= 1 / 3 ** 0.5:
                raise ValueError("think.cv must be 0..0.577 for uniform")
        return self

    @field_validator("block_size")
    @classmethod
    def _block_size(cls, v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or v not in (16, 32, 64, 128, 256, 512, 1024)):
            raise ValueError(f"must be a power of two in 16..1024 (SZX 0..6), got {v!r}")
        return v


class ContentionDetector(_Model):
    enabled: bool = Field(True, description="deploy the CD node and its GE")
    service_time_ms: Any = Field(
        "auto", description="the CD node's service time: `auto` (the request-weighted mean device "
                            "service time) or a number > 0")
    mode: Literal["auto", "sleep", "busy"] = Field(
        "auto", description="busy/sleep; `auto` = the devices' predominant mode")
    response: Response = Field(
        "piggyback", description="the CD node's response path (as `devices[].response`); "
        "piggyback, the answer in the ACK: the lean path for its one-at-a-time probes")
    interval_s: float = Field(
        0.5, gt=0, description="one probe per interval, sequential (0.5 s: 20 probes per 10 s "
        "contention window; evidence: docs/VALIDATION.md \"Detector defaults\")")
    calibration_s: float = Field(
        20.0, ge=0, description="the CD alone before the test: the baseline (40 samples at 0.5 s)")

    @field_validator("service_time_ms")
    @classmethod
    def _st(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"must be 'auto' or a number > 0, got {v!r}")
        return float(v)


class VerdictSpec(_Model):
    tolerance: Any = Field(
        0.05, description="how much the testbed may add to a response time, per request: a "
        "share of the window's mean R (`0.05`, `5 %`) or milliseconds (`0.5 ms`); a window is "
        "beyond it when the lower confidence bound of the added latency is "
        "(docs/DETECTOR.md \"The host's share\")")
    confidence: float = Field(0.95, gt=0.5, lt=1.0,
                              description="one-sided confidence of that bound")

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, v: Any) -> Any:
        from cd_module.tolerance import parse_tolerance
        parse_tolerance(v)
        return v


class Placement(_Model):
    cpus: Any = Field("all", description="cores to use: `all` or a list of core ids")
    reserved_os_cores: int = Field(
        1, ge=0, description="cores kept for the OS and the harness (core 0 first)")
    affinity: Literal["pinned", "shared"] = Field(
        "pinned", description="`pinned` (devices round-robin on the device cores) or `shared`")
    isolate_cores: bool = Field(
        False, description="for the run, keep the host's own work off the GE and device cores "
        "(root): the unbound workqueues' cpumask set to the OS cores and every movable task "
        "(dockerd, containerd, other users' processes, unbound kernel threads) narrowed to "
        "them, all restored at the run's end or by the next run / `wotbench clean` after a "
        "killed one; `wotbench run --isolate-cores` sets it (docs/FLEET.md)")
    isolate_except: list[str] = Field(
        default_factory=list, description="with `isolate_cores`: command names (a process's "
        "/proc/PID/comm, e.g. a host agent that must keep its cores) whose processes the "
        "isolation leaves where they are")

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
    subnet: str = Field("172.28.0.0/16",
                        description="IPv4 subnet (at most /28) of the run's internal bridge "
                                    "network(s); a default subnet in use moves to a free one")
    backend: Literal["auto", "pumba", "netem", "app"] = Field(
        "auto", description="how per-device impairments (`devices[].network`) are applied: "
        "`pumba`, `netem`, `app` (inside the emulators) or `auto` (docs/NETWORK-IMPAIRMENTS.md)")

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
    enabled: bool = Field(True, description="collectl + per-container cgroup sampling")
    interval_s: float = Field(1.0, gt=0, description="sampling interval")


class Report(_Model):
    enabled: bool = Field(True, description="write report.html")


# The clock bound of a run across hosts (docs/CLUSTER.md#clocks). Below 1 µs no exchange over
# a network can vouch for an offset; above 1 s the cells' start skew would be a sizeable part
# of a short test, so the bound would no longer mean "the cells start together".
CLOCK_BOUND_MIN_MS = 0.001
CLOCK_BOUND_MAX_MS = 1000.0


class Cluster(_Model):
    clock_bound_ms: float = Field(
        1.0, ge=CLOCK_BOUND_MIN_MS, le=CLOCK_BOUND_MAX_MS,
        description="`backend: swarm`: the run is refused before T0 when a node's clock offset "
                    "(± its measurement error) exceeds this, and flagged when it drifts beyond "
                    "it during the run; `wotbench run --clock-bound-ms` overrides it")


class TraceSource(_Model):
    """A recorded trace used instead of a generated one."""
    file: str = Field(description="the recorded `trace.csv` (relative to the config file)")
    resources: Optional[str] = Field(
        None, description="directory of its resource files, one `<device>.csv` each; null: "
                          "`<dir of file>/resources`")

    @property
    def resources_dir(self) -> Path:
        return Path(self.resources) if self.resources else Path(self.file).parent / "resources"


class Config(_Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=60,
                               description="test name; the run directory is "
                                           "`reports/<name>-<UTC time>/`")]
    duration_s: float = Field(60.0, gt=0, description="test length, after calibration")
    seed: int = Field(1, ge=0, description="random seed: same seed, same trace")
    backend: Literal["docker", "process", "auto", "swarm"] = Field(
        "docker", description="`docker`, `process` (the same binaries as local processes pinned "
                              "to cores on 127.0.x.y), `auto` (Docker when its daemon answers) "
                              "or `swarm` (one cell per labelled Docker Swarm node, "
                              "docs/CLUSTER.md; sweeps and capacity searches: each point a run across hosts)")
    trace: Optional[TraceSource] = Field(
        None, description="a recorded trace instead of a generated one: `PATH` or "
                          "`{file, resources}`")
    devices: list[DeviceGroup] = Field(min_length=1, description="device groups (with "
                                       "`things:`, its groups are added here)")
    things: Optional[list[ThingSpec]] = Field(
        None, description="Things emulated from W3C Thing Descriptions or Thing Models and their "
        "workload per affordance (wotbench.config.things_spec, docs/WOT.md); each entry becomes a "
        "device group")
    directory: Optional[DirectorySpec] = Field(
        None, description="instead of emulating the `things:`, register them with this Thing "
        "Description Directory and query it under load (wotbench.things.directory, docs/WOT.md)")
    gateways: Gateways = Field(default_factory=Gateways, description="the gateway emulators")
    contention_detector: ContentionDetector = Field(default_factory=ContentionDetector,
                                                    description="the contention detector")
    verdict: VerdictSpec = Field(default_factory=VerdictSpec,
                                 description="how much the testbed may add (the graded verdict)")
    placement: Placement = Field(default_factory=Placement, description="the cores")
    network: Network = Field(default_factory=Network, description="the run's networks")
    monitor: Monitor = Field(default_factory=Monitor, description="the resource monitor")
    report: Report = Field(default_factory=Report, description="the HTML report")
    cluster: Cluster = Field(default_factory=Cluster,
                             description="a run across hosts (`backend: swarm`)")
    contention: Optional[list[ContentionEpisode]] = Field(
        None, description="deliberate contention episodes, to validate the detector "
                          "(wotbench.config.hog_episodes)")
    sut_faults: Optional[list[SutFault]] = Field(
        None, description="faults in the system under test at given seconds: pause or kill a "
        "started server (wotbench.config.sut_faults, docs/PLATFORMS.md)")
    notify: Optional[Notify] = Field(
        None, description="the notification sink: subscribers whose notifications are matched "
        "to the updates that caused them (wotbench.config.notify, docs/PLATFORMS.md)")
    slo: Optional[Slo] = Field(
        None, description="service-level objectives the run is judged on (wotbench.config.slo_spec; "
                          "exit code 4 when missed)")
    dtls: dtls_spec.Dtls = Field(
        default_factory=dtls_spec.Dtls,
        description="DTLS-PSK between the gateway emulators and the wot-devices "
                    "(wotbench.config.dtls)")
    applications: Optional[connected_spec.Applications] = Field(
        None, description="applications sending RPCs to connected devices through "
                          "`edge_server` (wot-rpcapp, docs/CONNECTED.md), or null")
    edge_server: Optional[connected_spec.EdgeServer] = Field(
        None, description="the server under test that connected devices attach to (e.g. nginx "
                          "+ nchan, docs/CONNECTED.md), or null")

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
        big = max([trace_max_payload] + [max(g.payload_bytes, g.request_payload_bytes)
                                         for g in self.devices if g.protocol == "coap"])
        return MAX_DATAGRAM_PAYLOAD if big > MAX_DATAGRAM_PAYLOAD else None

    def device_names(self) -> list[str]:
        return [device_name(g.group, i) for g in self.devices for i in range(g.count)]
