"""``notify:``: the notification sink of a run (issue 35, docs/PLATFORMS.md). The harness starts
``build/notify-sink`` on this host before T0 with one subscriber per entry and waits until every
subscription holds; the analysis matches each notification to the update that caused it by the
id the config places in the update: ``marker`` directly followed by ``{{seq}}`` in a path, a
header or the body template of the HTTP updates (``gateways.http``), or in the path or the
payload template (``gateways.payload_template``) of CoAP updates.

Subscribers: ``stream`` (an HTTP GET held open: chunked, Server-Sent Events with ``accept:
text/event-stream``), ``longpoll`` (an HTTP GET the server answers with one complete response
when it has an update; the sink sends it again at once on the same connection: updates between
an answer and that GET are the server's to buffer or lose), ``websocket`` and ``observe`` (CoAP,
RFC 7641) to a device of the run (``device``, ``path``); ``webhook``: an address of this host the system under test POSTs to
(``listen``), which it must be able to reach (the process backend: its loopback).
Schema and checks; the sink's arguments come from :func:`sink_args`."""
from __future__ import annotations

import ipaddress
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wotbench.config.slo_spec import _share

Config = Any   # wotbench.config.schema.Config (which imports this module's models)

SCHEMES = {"stream": "http", "websocket": "ws", "observe": "coap", "longpoll": "http"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Subscriber(_Model):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=40,
                      description="its name in the figures")
    kind: Literal["stream", "websocket", "observe", "webhook", "longpoll"] = Field(
        description="stream (chunked / SSE), websocket, observe (CoAP), webhook or longpoll "
        "(a GET answered by one response, sent again at once)")
    device: Optional[str] = Field(
        None, description="stream, websocket, observe, longpoll: the device subscribed to (e.g. "
        "broker-0)")
    path: str = Field("", description="stream, websocket, observe, longpoll: the path on that "
                      "device")
    listen: Optional[str] = Field(
        None, description="webhook: ADDRESS:PORT of this host the system under test POSTs to")
    updates_to: Optional[str] = Field(
        None, description="stream, websocket, observe, longpoll: only the updates sent to this "
        "path of the subscriber's device are its updates (an HTTP Thing's writeproperty form: a "
        "write to another instance is not its loss); null: every update of the run")


class NotifySlo(_Model):
    """Objectives on every subscriber (the worst one decides); judged with the run's ``slo:``
    (exit code 4 when one is missed on a faithful run)."""
    p50_ms: Optional[float] = Field(None, gt=0, description="upper limit, ms, of the median "
                                    "update -> notification latency")
    p99_ms: Optional[float] = Field(None, gt=0, description="upper limit, ms, of its 99th "
                                    "percentile")
    lost_max: Optional[float] = Field(None, description="upper limit of the share of updates "
                                      "never notified: 0..1 or a percentage such as '1%'")

    @field_validator("lost_max", mode="before")
    @classmethod
    def _lost(cls, v: Any) -> Any:
        return None if v is None else _share(v)


class Notify(_Model):
    marker: str = Field(min_length=1, max_length=63,
                        description="the text right before {{seq}} in the updates: what the "
                        "sink looks for in a notification")
    accept: Optional[str] = Field(None, description="the Accept header of stream subscriptions "
                                  "(e.g. text/event-stream)")
    subscribers: list[Subscriber] = Field(min_length=1, max_length=64,
                                          description="the subscriptions and webhooks (below)")
    slo: Optional[NotifySlo] = Field(None, description="objectives on the notifications")
    timeout_ms: int = Field(
        1000, gt=0, description="how long the sink must still be subscribed after an HTTP "
        "Thing's event emission for it to be judged: an event emitted in the test but later "
        "than the sink's stop minus this is counted not_judged, not lost")
    updates: list[Literal["POST", "PUT", "PATCH", "DELETE"]] = Field(
        default_factory=lambda: ["POST", "PUT", "PATCH"],
        description="which of the GE's requests are updates (each should be notified)")


def _templates(cfg: Config) -> list[str]:
    h = cfg.gateways.http
    out = [p for g in cfg.devices for p in (g.paths or [])] \
        + [cfg.gateways.payload_template or ""]   # a CoAP run's PUT/POST payload
    if h is not None:
        out += list(h.headers) + [h.body_template or ""]
        if h.body_template_file:
            try:
                out.append(open(h.body_template_file).read())
            except OSError:
                pass   # refused by wotbench.config.http_spec
    return out


def problems(cfg: Config) -> list[str]:
    n = cfg.notify
    if n is None:
        return []
    out = []
    if cfg.gateways.count > 1:
        out.append(f"notify: with gateways.count {cfg.gateways.count}, expected 1 ({{{{seq}}}} "
                   "is one GE's request number: with several the ids would collide)")
    if not any(n.marker + "{{seq}}" in t for t in _templates(cfg)):
        out.append(f"notify.marker: no path, header or body template of the updates holds "
                   f"'{n.marker}{{{{seq}}}}', expected the marker right before {{{{seq}}}} (the id "
                   "the sink matches a notification to its update by)")
    names = set(cfg.device_names())
    seen = set()
    for k, s in enumerate(n.subscribers):
        key = f"notify.subscribers[{k}]"
        if s.name in seen:
            out.append(f"{key}.name: {s.name!r} twice, expected a name of its own")
        seen.add(s.name)
        if s.kind == "webhook":
            out += _listen_problems(s, key, cfg)
        elif s.device not in names:
            out.append(f"{key}.device: {s.device!r}, expected a device of this run "
                       f"({', '.join(sorted(names)[:4])}...)")
        elif s.listen is not None:
            out.append(f"{key}.listen: only for kind webhook")
    return out


def _listen_problems(s: Subscriber, key: str, cfg: Config) -> list[str]:
    if s.device is not None or s.path or s.updates_to is not None:
        return [f"{key}: a webhook listens (listen: ADDRESS:PORT); device and path are for "
                "subscriptions"]
    host, _, port = (s.listen or "").rpartition(":")
    try:
        addr = ipaddress.ip_address(host)
        ok = port.isdigit() and 0 < int(port) < 65536
    except ValueError:
        ok = False
    if not ok:
        return [f"{key}.listen: {s.listen!r}, expected ADDRESS:PORT of this host (e.g. "
                "127.0.0.1:9000)"]
    if cfg.backend != "process" and addr.is_loopback:
        return [f"{key}.listen: {s.listen}: a server in a container cannot reach this host's "
                "loopback; expected backend: process (or an address of the run's network)"]
    return []


def sink_args(cfg: Config, addresses: dict[str, tuple[str, int]]) -> list[str]:
    """notify-sink's subscriber options; ``addresses``: device name -> (address, port)."""
    n = cfg.notify
    a = ["--marker", n.marker] + (["--accept", n.accept] if n.accept else [])
    for s in n.subscribers:
        if s.kind == "webhook":
            a += ["--webhook", f"{s.name}={s.listen}"]
            continue
        host, port = addresses[s.device]
        host = f"[{host}]" if ":" in host else host
        a += [f"--{s.kind}", f"{s.name}={SCHEMES[s.kind]}://{host}:{port}/{s.path.lstrip('/')}"]
    return a
