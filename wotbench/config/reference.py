"""The configuration reference (docs/CONFIG.md), generated from the pydantic models.

    python -m wotbench.config.reference > docs/CONFIG.md

Every block of a config is one section: a short prose intro (``PROSE`` below, for what a table
cannot say) and a table key | type | default | constraints | description. Types, defaults and
constraints come from the models (``Literal`` choices, ``Field`` metadata such as ``gt``/``ge``/
``le``); descriptions from ``Field(description=...)`` on each field, so the model is the one source.
Constraints enforced by a validator rather than by ``Field`` metadata are in ``VALIDATED``.
``tests/unit/test_config_reference.py`` fails when docs/CONFIG.md is stale.
"""
from __future__ import annotations

import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from wotbench.config import byo, dtls, hog_episodes, slo_spec
from wotbench.config import http_spec
from wotbench.config import schema
from wotbench.config import push_spec
from wotbench.netimpair import model as netimpair
from wotbench.config import connected
from wotbench.config.rate_profile import RateProfile
from wotbench.config.notify import Notify, NotifySlo, Subscriber
from wotbench.config import things_spec
from wotbench.config.http_phases import HttpPhase
from wotbench.config.sut_faults import SutFault

COMMAND = "python -m wotbench.config.reference > docs/CONFIG.md"
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "configs/20dev.yaml"


@dataclass(frozen=True)
class Section:
    title: str                  # the heading, also the key path as a user writes it
    model: type[BaseModel]
    prose: str = ""


SECTIONS: list[Section] = [
    Section("Top level", schema.Config,
            "Everything but `name` and `devices` has a default. Relative paths (`trace`, an "
            "empirical distribution's `file`, `dtls.psk_key_file`) are relative to the config "
            "file; loading makes them absolute, so `config.resolved.yaml` in a run directory is "
            "self-contained. `auto` values are filled in when the run is planned "
            "(`wotbench.deploy.resolve`) and recorded in `config.resolved.yaml`."),
    Section("trace", schema.TraceSource,
            "A recorded trace replayed instead of a generated one (format: "
            "[CONTRACTS.md](CONTRACTS.md) §1; the paths it requests are kept). "
            "`trace: PATH` is short for `trace: {file: PATH}`. `wotbench check CONFIG` reads "
            "every line of it and of its resource files as the emulators do."),
    Section("devices[]", schema.DeviceGroup,
            "A list of device groups (at least one). Group names are unique; `cd` is reserved "
            "for the contention detector's node. Devices are named `<group>-<i>`. The keys "
            "`server`, `external` and `paths` put a third-party CoAP server under test instead "
            "of wot-device ([BYO.md](BYO.md))."),
    Section("Distributions", schema.DistSpec,
            "`devices[].service_time`, `devices[].rit`, `devices[].observe.interval` and "
            "`devices[].observe.hold` are distributions: `{dist, mean, cv?, shape?, file?}`, all "
            "values in ms. Every distribution is parameterised by its mean plus a coefficient "
            "of variation `cv` (or a pareto `shape`), so the mean you write is the mean you get: "
            "`deterministic` and `exponential` take `mean` only (cv 0 and 1); `uniform` "
            "(cv ≤ 1/√3), `normal` (cv < 1, truncated at 0), `lognormal`, `gamma`, `weibull` "
            "take `mean` and `cv`; `pareto` takes `mean` and `shape` (α > 1) or `cv`; "
            "`empirical` takes `file` (one sample in ms per line) and optionally `mean` (the "
            "samples are rescaled to it). Details: `wotbench/config/distributions.py`."),
    Section("devices[].observe", schema.Observe,
            "Observable resources (RFC 7641) of a device group and the observers the GE "
            "emulates ([OBSERVE-BLOCKWISE.md](OBSERVE-BLOCKWISE.md)). Give `period_ms` (with "
            "optional `jitter_ms` ≤ `period_ms`) or `interval`, not both; `resources` ≤ the "
            "group's `resources`; notifications are one datagram (`payload_bytes` ≤ 1024); not "
            "with `server`/`external` nor through `gateways.proxy`."),
    Section("devices[].rate_profile", RateProfile,
            "The devices' request rate over the test instead of `rit`'s steady one (issue 35, "
            "[PLATFORMS.md](PLATFORMS.md)), in requests per second per device: `steps` "
            "(`rates` each held `step_s`, the last to the end), `ramp` (`start` to `end` over "
            "`ramp_s`, default the test), `burst` (`base`, `peak` for `length_s` every "
            "`every_s`), `sine` (`mean` ± `amplitude`, `period_s`). `rit` keeps its shape "
            "(exponential: a non-homogeneous Poisson process). Open loop, generated workloads "
            "only; every rate 0.001..10^6."),
    Section("devices[].push", push_spec.PushOp,
            "Requests the devices of a group send themselves ([PUSH.md](PUSH.md)): `setup` ops "
            "once per device before T0, in order (a failure stops the run before T0, naming the "
            "device and the answer; what succeeded is undone by the teardown), `test` ops on "
            "their own open-loop `interval`, `teardown` ops once after the test. `path` and "
            "`body` are templates with `{device}`, `{id}`, `{group}`, `{index}`, `{address}`, "
            "`{port}`, `{seq}`, `{time_ms}`, `{time_s}`, `{value}` (a format spec such as "
            "`{value:.1f}` is allowed); `@location` is the location of the setup answer. Each "
            "device sends from its own address (its own client port); bodies are one datagram "
            "(≤ 1024 bytes). Not on `server`/`external` groups, not with `dtls.enabled`."),
    Section("devices[].network", netimpair.NetworkImpairment,
            "Per-device impairments of the device ↔ gateway link, applied by the backend "
            "`network.backend` chooses; every key optional, an empty or absent `network` "
            "impairs nothing. All percentages are 0..100; times are ms with at most 1 µs "
            "resolution. Semantics and backends: "
            "[NETWORK-IMPAIRMENTS.md](NETWORK-IMPAIRMENTS.md)."),
    Section("devices[].network.delay", netimpair.Delay),
    Section("devices[].network.loss", netimpair.Loss,
            "Random loss (`percent`) or burst loss (`gilbert_elliott`), not both."),
    Section("devices[].network.loss.gilbert_elliott", netimpair.GilbertElliott,
            "tc-netem `loss gemodel p r 1-h 1-k`; all four in percent."),
    Section("devices[].network.duplicate, corrupt", netimpair.Percent),
    Section("devices[].server and gateways.proxy", byo.ProxySpec,
            "A third-party CoAP program WoTbench starts: a local Docker image (`image`) or a "
            "program of this host (`command`); give one. Placeholders in `args`/`command`: "
            "`{address}` (the address it must listen on), `{port}`, `{name}`, and with a "
            "`config_template` `{config}` and `{scratch}` (write `{{` and "
            "`}}` for literal braces). An HTTP server (`devices[].protocol: http`, "
            "[HTTP.md](HTTP.md)) listens on 8080 by default. `devices[].server` takes every key "
            "but `endpoint` and `mode`/`http_prefix`; `gateways.proxy` takes either "
            "`image`/`command` or `endpoint`. Neither works with `dtls.enabled`. Semantics and "
            "examples: [BYO.md](BYO.md); an HTTP->CoAP proxy (`mode: http`): "
            "[HTTP-PROXY.md](HTTP-PROXY.md)."),
    Section("devices[].connection", connected.Connection,
            "Connected devices (`devices[].protocol: websocket | chunked | chunked-post`): each holds one "
            "connection to `edge_server` in a wot-fleet engine (CONTRACTS §3c) and replies to "
            "every message that carries an id after its service time. "
            "[CONNECTED.md](CONNECTED.md)."),
    Section("applications", connected.Applications,
            "wot-rpcapp (CONTRACTS §3d): applications (a closed or an open loop, over HTTP or "
            "each on its own WebSocket: `transport`) sending RPCs to connected "
            "devices through `edge_server`; the RPC carries its id where `rpc_id` says (body, "
            "path or a header; a WebSocket frame's `{id}`), the reply where `reply_id` says, "
            "and each reply is matched by it. [CONNECTED.md](CONNECTED.md)."),
    Section("edge_server", connected.EdgeServer,
            "The server under test connected devices attach to, started like "
            "`devices[].server` on the process backend (unprivileged, its template's fields also "
            "`{workers}`, `{worker_connections}`, `{worker_nofile}`, checked with `check` "
            "before anything starts); e.g. nginx + nchan: configs/attached-devices.yaml, webdis "
            "+ redis-server: configs/attached-devices-webdis.yaml."),
    Section("gateways", schema.Gateways,
            "The gateway emulators: open-loop load generators replaying the trace."),
    Section("gateways.http", http_spec.HttpClient,
            "How the gateway emulators speak HTTP/1.1 to `protocol: http` device groups "
            "([HTTP.md](HTTP.md)); only with such groups. Templates take `{{index}}`, "
            "`{{device}}`, `{{method}}`, `{{path}}`, `{{payload}}`; single braces are text."),
    Section("gateways.http.setup / verify", HttpPhase,
            "Requests the harness sends to every HTTP device before T0 (`setup`: pre-create "
            "entities, subscribe) and after the test (`verify`: check what it left), each by a "
            "gateway-emulator run of its own (`RUN/phases/<name>/`) whose figures are "
            "`summary.json` `phases` and the report's *Setup and verify* section, never the "
            "test's (issue 35, [PLATFORMS.md](PLATFORMS.md)). A setup request not answered 2xx "
            "stops the run before T0; a verify request not answered 2xx is named in the "
            "verdict's notes. `path` and `body_template` are the GE's templates."),
    Section("contention_detector", schema.ContentionDetector,
            "The contention detector: a node with a fixed service time probed by its own GE "
            "([DETECTOR.md](DETECTOR.md); evidence for the defaults: "
            "[VALIDATION.md](VALIDATION.md))."),
    Section("verdict", schema.VerdictSpec,
            "How much the testbed may add to a response time before a window is untrustworthy "
            "([DETECTOR.md](DETECTOR.md) \"The host's share\": the amount per window, its "
            "confidence bound, the grades none / mild / moderate / severe)."),
    Section("placement", schema.Placement,
            "Which cores the run uses and how components are pinned to them "
            "(`wotbench plan CONFIG` shows the result; small hosts: [SCALE.md](SCALE.md))."),
    Section("network", schema.Network,
            "The run's own networks (not the impairments: those are `devices[].network`)."),
    Section("monitor", schema.Monitor),
    Section("report", schema.Report),
    Section("cluster", schema.Cluster,
            "A run across hosts, one cell per labelled Docker Swarm node (`backend: swarm`, "
            "[CLUSTER.md](CLUSTER.md)); ignored by the other backends."),
    Section("contention[]", hog_episodes.ContentionEpisode,
            "Deliberate host contention episodes, to check that the contention detector sees "
            "them (validation) or to study their effect. Each is relative to the test start "
            "(after calibration) and must end by `duration_s`, e.g. "
            "`{kind: cpu, cores: [1], start_s: 10, duration_s: 10}`. The hog "
            "(`contention-injector/`) needs no privileges and stops on its own."),
    Section("sut_faults[]", SutFault,
            "Faults in the system under test at given seconds of the test (issue 35, "
            "[PLATFORMS.md](PLATFORMS.md)): `pause` stops a started server's whole process "
            "tree (SIGSTOP) for `for_s`, `kill` ends it (SIGKILL; its death is then not a "
            "component failure), `restart` stops the tree and starts the same command again "
            "(downtime until it answers its readiness probe), `cpu_quota` limits it to `cpus` "
            "cores from then on (Docker: the container's quota; process backend: a cgroup the "
            "harness creates, refused before the start when it cannot). Recorded in "
            "`sut-faults.json`, measured before/during/after in `summary.json` `sut_faults`, "
            "drawn on the report's time series."),
    Section("notify", Notify,
            "The notification sink (issue 35, [PLATFORMS.md](PLATFORMS.md)): the harness starts "
            "`build/notify-sink` on this host before T0 with one subscriber per entry and waits "
            "until every subscription holds; each notification is matched to its update by the "
            "id after `marker` (`marker` must stand right before `{{seq}}` in a path, header or "
            "body template of the updates). Results: `summary.json` `notify`, the report's "
            "Notifications section. One main GE; a webhook's `listen` must be reachable by the "
            "server (the process backend: this host's loopback)."),
    Section("notify.subscribers[]", Subscriber,
            "`stream` (a GET held open: chunked, or Server-Sent Events with `notify.accept: "
            "text/event-stream`), `websocket`, `observe` (CoAP RFC 7641) to `device`'s `path`; "
            "`webhook`: `listen` is where the server POSTs its notifications."),
    Section("notify.slo", NotifySlo,
            "Objectives on the notifications, judged on every subscriber (the worst decides) "
            "and listed with the run's `slo:` objectives (exit code 4 when one is missed on a "
            "faithful run)."),
    Section("slo", slo_spec.Slo,
            "Service-level objectives the run is judged on ([SLO-CAPACITY.md](SLO-CAPACITY.md)); "
            "every key optional, at least one objective required. A limit is inclusive "
            "(`p95_ms: 50` passes at exactly 50 ms); percentiles are numpy's linear "
            "interpolation. `groups.<name>` takes the objective keys above (not `window_s`) for "
            "one device group. `wotbench capacity --slo` sets the same keys from expressions "
            "such as `p95<=50ms`, `loss<=2%`, `sensor:p95<=30ms`."),
    Section("dtls", dtls.Dtls,
            "DTLS 1.2 with a pre-shared key between the main gateway emulators and the "
            "wot-devices ([DTLS.md](DTLS.md)). The key reaches the programs only as a file in "
            "the run directory (never argv, env or the container config)."),
    Section("things[]", things_spec.ThingSpec,
            "Things emulated from W3C Thing Descriptions (`td`) or Thing Models (`model`, "
            "placeholders `{{NAME}}` filled from `instance`); each entry becomes a device group "
            "(`devices[].thing` names it) whose resources are the TD's CoAP forms, or its "
            "HTTP forms (an HTTP Thing: a `protocol: http` group served by "
            "`wotbench/things/http_thing.py`, process backend) ([WOT.md](WOT.md)). The file is checked against the TD 1.1 JSON Schema; problems "
            "name the file and a JSON pointer."),
    Section("things[].load[]", things_spec.OpLoad,
            "The workload of one affordance and op, per instance: `rate_per_s` or `interval` for "
            "readproperty/writeproperty/invokeaction; `observers` and `notify` for "
            "observeproperty/subscribeevent (CoAP Observe); `observers` and `subscribed` for an "
            "HTTP observeproperty over Server-Sent Events (notified on each write, measured by "
            "the notification sink: the run's `notify:` is made from it). `interval`, `notify` and "
            "`service_time_ms` (here and in `things[]`) take a distribution `{dist, mean, cv?}` "
            "as the `Distributions` above (`service_time_ms` also a number, ms)."),
    Section("directory", things_spec.DirectorySpec,
            "Register the `things:` with a Thing Description Directory instead of emulating "
            "them: registration storm, verification, updates and queries, deregistration "
            "([WOT.md](WOT.md#discovery-under-load-a-thing-description-directory))."),
]

# Constraints a validator enforces (not Field metadata), by (model, field).
VALIDATED: dict[tuple[type[BaseModel], str], str] = {
    (schema.DeviceGroup, "methods"): "keys GET, PUT, POST, DELETE (PATCH: protocol http); "
                                     "weights ≥ 0, not all 0",
    (schema.DeviceGroup, "per_container"): "`auto` or 1..64 (engine fleet: 1..55 000)",
    (schema.DeviceGroup, "external"): "HOST:PORT each (`[v6]:port`); one string is a list of one",
    (schema.DeviceGroup, "paths"): "no spaces, commas or quotes; a leading / is dropped",
    (schema.Gateways, "block_size"): "16, 32, 64, 128, 256, 512 or 1024",
    (schema.ContentionDetector, "service_time_ms"): "`auto` or > 0",
    (schema.VerdictSpec, "tolerance"): "a share of R 0 < x < 1, `N %` or `N ms` (N > 0)",
    (schema.Placement, "cpus"): "`all` or a non-empty list of distinct core ids ≥ 0",
    (schema.Network, "subnet"): "IPv4, at most /28; room for the devices",
    (schema.Observe, "interval"): "dist deterministic, uniform, exponential or normal",
    (netimpair.Delay, "jitter_ms"): "≤ time_ms",
    (netimpair.Impairment, "rate"): "> 0",
    (hog_episodes.ContentionEpisode, "cores"): "distinct, ≥ 0, usable cores of the plan",
    (slo_spec.Objectives, "loss_max"): "0..1 or 'N%'",
    (slo_spec.Objectives, "success_min"): "0..1 or 'N%'",
    (dtls.Dtls, "psk_identity"): "1..128 bytes, no control characters",
    (dtls.Dtls, "psk_key"): "1..64 bytes",
    (byo.Program, "command"): "placeholders {address}, {port}, {name}, {config}, {scratch}",
    (byo.Program, "args"): "placeholders {address}, {port}, {name}, {config}, {scratch}",
    (byo.Program, "check"): "placeholders as command",
    (http_spec.HttpClient, "headers"): "`Name: value`, a token name; not Host, Content-Length, "
                                       "Transfer-Encoding, Connection",
    (byo.ProxySpec, "endpoint"): "HOST:PORT",
    (things_spec.OpLoad, "affordance"): "properties/NAME, actions/NAME or events/NAME",
    (things_spec.ThingSpec, "td"): "exactly one of td and model",
}
VALIDATED[(netimpair.Delay, "time_ms")] = "> 0, 1 µs resolution"
VALIDATED[(netimpair.Delay, "jitter_ms")] = "0 ≤ jitter ≤ time_ms, 1 µs resolution"
VALIDATED[(netimpair.Delay, "correlation")] = "0..100"
for _m, _fs in ((netimpair.GilbertElliott, ("p", "r", "one_minus_h", "one_minus_k")),
                (netimpair.Loss, ("percent", "correlation")),
                (netimpair.Percent, ("percent", "correlation"))):
    for _f in _fs:
        VALIDATED[(_m, _f)] = "0..100"

# Models reached from Config that are documented by another section's table.
ALIASES: dict[type[BaseModel], type[BaseModel]] = {
    byo.ServerSpec: byo.ProxySpec,
    netimpair.Impairment: netimpair.NetworkImpairment,
    slo_spec.Objectives: slo_spec.Slo,
}

HEADER = f"""# Configuration reference

<!-- Generated by `{COMMAND}` from the pydantic models
     (wotbench/config/, wotbench/netimpair/model.py): do not edit. Change a field's
     `Field(description=...)` (or the prose in wotbench/config/reference.py) and regenerate;
     tests/unit/test_config_reference.py fails when this file is stale. -->

*Generated from the models by `{COMMAND}`; do not edit by hand.*

A config is one YAML file; everything but `name` and `devices` has a default. Invalid files are
rejected with one message per problem naming the key (`devices[1].service_time.mean: must be > 0,
got -5`), unknown keys with a did-you-mean. `wotbench check CONFIG` is the run's pre-flight: the
file, for a recorded `trace:` every line of the trace and of its resource files as the emulators
read them (each bad line named `FILE:LINE`, exit 2), and what this host must have for the run
(every refusal `run` makes before T0, with the same message: [PREFLIGHT.md](PREFLIGHT.md);
`--offline`: the file alone). From Python:
`wotbench.configfile.yaml_loader.load_config(path) -> Config` raises `ConfigError`, whose
`.problems` lists those `"key.path: message"` strings.

Example configs: `configs/20dev.yaml` (the paper's contention scenario: 20 CPU-bound devices),
`configs/1dev.yaml` (smallest run), `configs/sleep-50dev.yaml` (50 sensor-bound devices),
`configs/lossy-radio.yaml` (30 sleep devices, 2 % loss, 40 ms delay), `configs/capacity-gateway.yaml`
(the SLO capacity question, [SLO-CAPACITY.md](SLO-CAPACITY.md)), `configs/observe.yaml` and
`configs/blockwise.yaml` ([OBSERVE-BLOCKWISE.md](OBSERVE-BLOCKWISE.md)), `configs/dtls.yaml`
([DTLS.md](DTLS.md)), `configs/byo-coap-server.yaml`, `configs/proxy.yaml`,
`configs/external-target.yaml` ([BYO.md](BYO.md)), `configs/scale-200.yaml` ([SCALE.md](SCALE.md)),
`cd-module/validation/` ([VALIDATION.md](VALIDATION.md)).
"""


# ------------------------------------------------------------------------------ rendering

def slug(title: str) -> str:
    """The anchor GitHub gives a heading."""
    s = re.sub(r"[^\w\- ]", "", title.lower())
    return s.replace(" ", "-")


def _section_of(model: type[BaseModel]) -> Optional[Section]:
    model = ALIASES.get(model, model)
    for s in SECTIONS:
        if s.model is model:
            return s
    return None


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _args(t: Any) -> tuple:
    return typing.get_args(t)


def _is_union(t: Any) -> bool:
    return typing.get_origin(t) in (typing.Union, types.UnionType)


def render_type(t: Any) -> str:
    origin = typing.get_origin(t)
    if t is Any:
        return "any"
    if _is_union(t):
        parts = [a for a in _args(t) if a is not type(None)]
        inner = " or ".join(render_type(a) for a in parts)
        return inner + " or null" if len(parts) < len(_args(t)) else inner
    if origin is Literal:
        return " | ".join(f"`{a}`" for a in _args(t))
    if origin is list:
        return f"list of {render_type(_args(t)[0])}"
    if origin is dict:
        k, v = _args(t)
        return f"mapping {render_type(k)} → {render_type(v)}"
    if _is_model(t):
        sec = _section_of(t)
        return f"mapping: [{sec.title}](#{slug(sec.title)})" if sec else "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(t, getattr(t, "__name__", str(t)))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_yaml_scalar(x) for x in v) + "]"
    return str(v)


def render_default(field: Any) -> str:
    if field.default_factory is not None:
        v = field.default_factory()
        if isinstance(v, BaseModel):
            if type(v) is schema.DistSpec:
                return f"`{_yaml_scalar(v.model_dump(exclude_none=True))}`"
            return "(the block's defaults)"
        return f"`{_yaml_scalar(v)}`"
    if field.default is PydanticUndefined:
        return "**required**"
    return f"`{_yaml_scalar(field.default)}`"


def render_constraints(model: type[BaseModel], name: str, field: Any) -> str:
    lower, upper, out = {}, {}, []
    for m in field.metadata:
        if isinstance(m, at.Gt):
            lower[">"] = m.gt
        elif isinstance(m, at.Ge):
            lower["≥"] = m.ge
        elif isinstance(m, at.Lt):
            upper["<"] = m.lt
        elif isinstance(m, at.Le):
            upper["≤"] = m.le
        elif isinstance(m, at.MinLen):
            out.append(f"at least {m.min_length} item(s)")
        elif isinstance(m, at.MaxLen):
            out.append(f"at most {m.max_length} characters")
        elif getattr(m, "pattern", None):
            out.append(f"`{m.pattern}`")
    if "≥" in lower and "≤" in upper:
        bounds = [f"{_num(lower['≥'])}..{_num(upper['≤'])}"]
    else:
        bounds = [f"{op} {_num(v)}" for op, v in (*lower.items(), *upper.items())]
    out = bounds + out
    for cls in model.__mro__:
        extra = VALIDATED.get((cls, name))
        if extra:
            out.append(extra)
            break
    return ", ".join(out)


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_section(s: Section) -> str:
    lines = [f"## {s.title}", ""]
    if s.prose:
        lines += [s.prose, ""]
    lines += ["| key | type | default | constraints | description |", "|---|---|---|---|---|"]
    for name, field in s.model.model_fields.items():
        desc = field.description or ""
        cells = [f"`{name}`", render_type(field.annotation), render_default(field),
                 render_constraints(s.model, name, field), desc]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def reachable(model: type[BaseModel], seen: Optional[set] = None) -> set[type[BaseModel]]:
    """Every model a config can hold, from ``model`` down."""
    seen = set() if seen is None else seen
    if model in seen:
        return seen
    seen.add(model)
    stack = [f.annotation for f in model.model_fields.values()]
    while stack:
        t = stack.pop()
        if _is_model(t):
            reachable(t, seen)
        stack.extend(_args(t))
    return seen


def render() -> str:
    missing = [m.__name__ for m in reachable(schema.Config) if _section_of(m) is None]
    if missing:
        raise RuntimeError(f"no section of wotbench.config.reference documents {', '.join(sorted(missing))}: "
                           "add one to SECTIONS (or ALIASES)")
    undocumented = [f"{s.model.__name__}.{n}" for s in SECTIONS for n, f in s.model.model_fields.items()
                    if not f.description]
    if undocumented:
        raise RuntimeError("fields without Field(description=...): " + ", ".join(undocumented))
    toc = "\n".join(f"- [{s.title}](#{slug(s.title)})" for s in SECTIONS)
    example = (REPO / EXAMPLE).read_text().rstrip("\n")
    parts = [HEADER, "## Blocks", "", toc, "", *(render_section(s) for s in SECTIONS),
             f"## Example: `{EXAMPLE}`", "", "```yaml", example, "```", ""]
    return "\n".join(parts)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
