"""WoTbench configuration (YAML, contract section 5).

``load_config(path) -> Config`` reads and validates a file; every problem becomes one
``"key.path: message"`` string in :class:`~wotbench.errors.ConfigError` ``.problems``
(e.g. ``devices[1].service_time.mean: must be > 0, got -5``). Unknown keys are rejected
with a did-you-mean. ``resolve(config)`` fills the ``auto`` values; ``dump_resolved``
writes ``config.resolved.yaml``.

Relative paths in the file (``trace``, empirical ``file``) are relative to the config
file's directory; ``load_config`` makes them absolute so a dumped config is self-contained.
"""
from __future__ import annotations

import difflib
import ipaddress
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from .addressing import describe_capacity, host_address
from .addressing import capacity as address_capacity
from .distributions import DISTS, validate_spec
from .errors import ConfigError, format_loc

Mode = Literal["sleep", "busy"]
Method = Literal["GET", "PUT", "POST", "DELETE"]
METHODS = ("GET", "PUT", "POST", "DELETE")
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
MAX_PAYLOAD_BYTES = 1024   # gateway-emulator and wot-device limit (one datagram, no block-wise)


class _Model(BaseModel):
    # inf/nan are never meaningful here and would only fail later, deep in the trace generator
    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)


class DistSpec(_Model):
    """``{dist, mean, cv?, shape?, file?}``; all values in ms. See wotbench.distributions."""
    dist: Literal[DISTS]  # type: ignore[valid-type]
    mean: Optional[float] = Field(None, gt=0)
    cv: Optional[float] = Field(None, ge=0)
    shape: Optional[float] = Field(None, gt=0)
    file: Optional[str] = None


class DeviceGroup(_Model):
    group: Annotated[str, Field(pattern=NAME_PATTERN, max_length=40)]
    count: int = Field(1, ge=1)
    threads: int = Field(1, ge=1, le=1024)
    mode: Mode = "busy"
    service_time: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=5.0))
    rit: DistSpec = Field(default_factory=lambda: DistSpec(dist="exponential", mean=200.0))
    resources: int = Field(10, ge=1, le=100000)
    methods: dict[str, float] = Field(default_factory=lambda: {"GET": 1.0})
    # both emulators keep a payload in one datagram (no block-wise transfer): at most 1024 bytes
    payload_bytes: int = Field(16, ge=0, le=MAX_PAYLOAD_BYTES)
    request_payload_bytes: int = Field(0, ge=0, le=MAX_PAYLOAD_BYTES)
    cpu_quota: Optional[float] = Field(None, gt=0)
    memory_mb: int = Field(32, ge=4)
    # per-group network impairments: a mapping validated by wotbench.netimpair.model, or null
    network: Optional[dict[str, Any]] = None

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


class ContentionDetector(_Model):
    enabled: bool = True
    service_time_ms: Any = "auto"   # 'auto' or a number > 0
    mode: Literal["auto", "sleep", "busy"] = "auto"
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
    # deliberate contention episodes; validated by wotbench.contention_inject
    contention: Optional[list[Any]] = None

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

    def device_names(self) -> list[str]:
        return [f"{g.group}-{i}" for g in self.devices for i in range(g.count)]


# ---------------------------------------------------------------------------------------
# error formatting

def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _unwrap(tp: Any) -> Any:
    """Strip Optional/Annotated to the model or list type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _model_at(loc: tuple) -> Optional[type[BaseModel]]:
    tp: Any = Config
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, int):
            if typing.get_origin(tp) is not list:
                return None
            tp = typing.get_args(tp)[0]
        else:
            if not (isinstance(tp, type) and issubclass(tp, BaseModel)) or part not in tp.model_fields:
                return None
            tp = tp.model_fields[part].annotation
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _type_name(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _message(err: dict) -> str:
    t, ctx, inp = err["type"], err.get("ctx") or {}, err.get("input")
    if t == "missing":
        return "required key missing"
    if t == "extra_forbidden":
        model = _model_at(tuple(err["loc"][:-1]))
        allowed = list(model.model_fields) if model else []
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1, cutoff=0.6)
        if close:
            return f"unknown key, did you mean '{close[0]}'?"
        return "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    for kind, op in (("greater_than_equal", ">="), ("greater_than", ">"),
                     ("less_than_equal", "<="), ("less_than", "<")):
        if t == kind:
            bound = next(iter(ctx.values()))
            bound = f"{bound:g}" if isinstance(bound, float) else bound
            return f"must be {op} {bound}, got {_show(inp)}"
    if t.startswith("int_"):
        return f"must be an integer, got {_show(inp)}"
    if t.startswith("float_"):
        return f"must be a number, got {_show(inp)}"
    if t.startswith("bool_"):
        return f"must be true or false, got {_show(inp)}"
    if t.startswith("string_type"):
        return f"must be a string, got {_type_name(inp)} {_show(inp)}"
    if t == "string_pattern_mismatch":
        return f"must contain only lowercase letters, digits and '-' (and start with a letter or digit), got {_show(inp)}"
    if t == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters, got {len(inp)}"
    if t == "literal_error":
        msg = f"must be {ctx.get('expected')}, got {_show(inp)}"
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        close = difflib.get_close_matches(str(inp), choices, n=1, cutoff=0.6) if isinstance(inp, str) else []
        return msg + (f" (did you mean '{close[0]}'?)" if close else "")
    if t == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if t in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping, got {_type_name(inp)} {_show(inp)}"
    if t == "list_type":
        return f"must be a list, got {_type_name(inp)} {_show(inp)}"
    if t == "value_error":
        msg = err["msg"]
        return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg
    msg = err["msg"]
    return msg[:1].lower() + msg[1:]


def problems_from_validation_error(e: ValidationError) -> list[str]:
    out, seen = [], set()
    for err in e.errors():
        p = f"{format_loc(tuple(err['loc']))}: {_message(err)}"
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


# ---------------------------------------------------------------------------------------
# loading

def _semantic_problems(cfg: Config, base_dir: Path) -> list[str]:
    problems = []
    seen: dict[str, int] = {}
    for i, g in enumerate(cfg.devices):
        if g.group in seen:
            problems.append(f"devices[{i}].group: duplicate group name '{g.group}' (also devices[{seen[g.group]}])")
        seen.setdefault(g.group, i)
        if g.group == "cd":
            problems.append(f"devices[{i}].group: 'cd' is reserved for the contention detector node")
        for key in ("service_time", "rit"):
            for field, msg in validate_spec(getattr(g, key).model_dump(), base_dir):
                problems.append(f"devices[{i}].{key}.{field}: {msg}")
        if g.network is not None:
            problems.extend(_network_problems(g.network, f"devices[{i}].network"))
    net = ipaddress.ip_network(cfg.network.subnet)
    needed = cfg.total_devices + 1  # + the CD node
    if needed > address_capacity(net):
        problems.append(f"network.subnet: {cfg.network.subnet} has room for {describe_capacity(net)}, "
                        f"{needed} needed (devices + CD node); use a larger subnet such as /16")
    if cfg.contention is not None:
        from .contention_inject import validate_contention
        try:
            validate_contention(cfg.contention, test_duration_s=cfg.duration_s)
        except ConfigError as e:
            problems.extend(e.problems)
    if cfg.trace is not None:
        tf = Path(cfg.trace.file)
        if not tf.is_file():
            problems.append(f"trace.file: file not found: {tf}")
        rd = cfg.trace.resources_dir
        if not rd.is_dir():
            problems.append(f"trace.resources: directory not found: {rd}")
    return problems


def _network_problems(raw: dict, prefix: str) -> list[str]:
    from .netimpair.errors import ImpairmentConfigError   # local: the impairment layer is heavy
    from .netimpair.model import parse_network
    try:
        parse_network(raw, prefix=prefix)
    except ImpairmentConfigError as e:
        return list(e.problems)
    return []


def _absolutize(raw: dict, base_dir: Path) -> None:
    """Make relative paths in the raw mapping absolute (relative to the config's dir)."""
    def fix(p: Any) -> Any:
        if isinstance(p, str) and p and not Path(p).expanduser().is_absolute():
            return str((base_dir / p).resolve())
        return str(Path(p).expanduser()) if isinstance(p, str) else p
    tr = raw.get("trace")
    if isinstance(tr, str):
        raw["trace"] = fix(tr)
    elif isinstance(tr, dict):
        for k in ("file", "resources"):
            if k in tr:
                tr[k] = fix(tr[k])
    groups = raw.get("devices")
    for g in groups if isinstance(groups, list) else []:   # a wrong type is reported by validation
        if isinstance(g, dict):
            for key in ("service_time", "rit"):
                spec = g.get(key)
                if isinstance(spec, dict) and "file" in spec:
                    spec["file"] = fix(spec["file"])


def config_from_dict(raw: Any, base_dir: str | Path = ".", source: str | None = None) -> Config:
    """Validate a mapping (as read from YAML); raises ConfigError listing every problem."""
    base_dir = Path(base_dir)
    if not isinstance(raw, dict):
        raise ConfigError([f"(top level): must be a mapping of keys (name, devices, ...), got {_type_name(raw)}"], source)
    import copy
    raw = copy.deepcopy(raw)
    _absolutize(raw, base_dir)
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(problems_from_validation_error(e), source) from None
    problems = _semantic_problems(cfg, base_dir)
    if problems:
        raise ConfigError(problems, source)
    cfg._source = source
    return cfg


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file. Raises ConfigError (exit 2), never a traceback."""
    path = Path(path)
    src = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(["file not found"], src) from None
    except IsADirectoryError:
        raise ConfigError(["is a directory, expected a YAML file"], src) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"cannot read: {getattr(e, 'strerror', None) or e}"], src) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError([f"{where}YAML syntax error: {what}"], src) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"YAML error: {e}"], src) from None
    if raw is None:
        raise ConfigError(["(top level): the file is empty, expected a mapping with at least 'name' and 'devices'"], src)
    return config_from_dict(raw, path.parent, src)


# ---------------------------------------------------------------------------------------
# auto values

def group_request_rates(cfg: Config) -> list[float]:
    """Offered request rate (req/s) of one device of each group: 1000 / mean RIT (ms)."""
    from .distributions import make_distribution
    return [1000.0 / make_distribution(g.rit).mean for g in cfg.devices]


def resolve(cfg: Config, cores: Optional[list[int]] = None) -> Config:
    """Return a copy with the ``auto`` values filled in.

    - contention_detector.service_time_ms: request-weighted mean device service time,
      sum_g(count_g * rate_g * S_g) / sum_g(count_g * rate_g)  (ms)
    - contention_detector.mode: the mode that receives most requests (ties: busy)
    - gateways.wait: from the placement plan (busy when each GE has a dedicated core,
      else hybrid)
    ``backend: auto`` is left to the runner (it depends on whether Docker is reachable).
    """
    from .distributions import make_distribution
    out = cfg.model_copy(deep=True)
    rates = group_request_rates(cfg)
    weights = [g.count * r for g, r in zip(cfg.devices, rates)]
    total = sum(weights)
    cd = out.contention_detector
    if cd.service_time_ms == "auto":
        st = sum(w * make_distribution(g.service_time).mean for w, g in zip(weights, cfg.devices)) / total
        cd.service_time_ms = round(st, 6)
    if cd.mode == "auto":
        busy = sum(w for w, g in zip(weights, cfg.devices) if g.mode == "busy")
        cd.mode = "busy" if busy >= total - busy else "sleep"
    if out.gateways.wait == "auto":
        from .plan import make_plan
        out.gateways.wait = make_plan(cfg, cores=cores).ge_wait
    out._source = cfg._source
    return out


def dump_resolved(cfg: Config, path: str | Path) -> Path:
    """Write ``config.resolved.yaml`` (every key, defaults included) and return its path."""
    path = Path(path)
    data = cfg.model_dump(mode="json")
    with path.open("w") as f:
        f.write("# resolved WoTbench config (all defaults and auto values filled in)\n")
        yaml.safe_dump(data, f, sort_keys=False, default_flow_style=False)
    return path


# ---------------------------------------------------------------------------------------
# addressing (shared by the trace generator and the runner)

COAP_PORT = 5683
CD_NODE_NAME = "cd-node"


class DeviceAddress(typing.NamedTuple):
    name: str
    group: str
    id: int
    ip: str
    port: int


def device_addresses(cfg: Config, subnet: Optional[str] = None) -> list[DeviceAddress]:
    """Every device in config order: name ``<group>-<i>``, group, id 0..N-1, IPv4, port.

    Addresses follow :mod:`wotbench.addressing` in ``network.subnet`` (or ``subnet``):
    consecutive from host offset 10, e.g. 172.28.0.10, 172.28.0.11, ... 172.28.3.241 for the
    1000th device of a /16; in a subnet wider than /22 at most 1004 per /22 bridge block
    (device 1004 is 172.28.4.10). Network, gateway (.1) and broadcast addresses of a block are
    never used."""
    net = ipaddress.ip_network(subnet or cfg.network.subnet)
    out, i = [], 0
    for g in cfg.devices:
        for k in range(g.count):
            out.append(DeviceAddress(f"{g.group}-{k}", g.group, i, host_address(net, i), COAP_PORT))
            i += 1
    return out


def cd_node_address(cfg: Config, subnet: Optional[str] = None) -> DeviceAddress:
    """The contention-detector node: name ``cd-node``, group ``cd``, id = number of devices,
    the address right after the last device."""
    net = ipaddress.ip_network(subnet or cfg.network.subnet)
    n = cfg.total_devices
    return DeviceAddress(CD_NODE_NAME, "cd", n, host_address(net, n), COAP_PORT)
