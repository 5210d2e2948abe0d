"""``devices[].push``: requests the devices of a group send themselves (issue 23).

Each entry is one operation (``op``): in ``phase: setup`` it is sent once per device, one after
another, after the device listens and before T0 (e.g. an RFC 9176 registration); in
``phase: test`` on the device's own open-loop schedule (``interval``, ms); in
``phase: teardown`` once after the test (and when a run stops after a setup); ``phase: verify``
is sent by the harness, not the devices: once per target after the test and before the
teardown (e.g. an RFC 9176 endpoint lookup), the answer must name every device (``expect``). ``path`` and
``body`` are templates: ``{device}`` (its name), ``{id}``, ``{group}``, ``{index}`` (in its
group), ``{address}``/``{port}`` (its CoAP endpoint), ``{seq}`` (this op's counter),
``{time_ms}``/``{time_s}`` (the scheduled instant from the test start) and ``{value}`` (drawn
from ``value``). A path that starts with ``@location`` is the location the first setup
answer returned (Location-Path/-Query, e.g. ``reg/7``; ``@location?lt=60`` adds a query).
The harness renders everything before the run (:mod:`wotbench.workload.push_schedule`);
wot-device replays it (``wot-device --push``, docs/CONTRACTS.md §3 "Push")."""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FIELDS = ("device", "id", "group", "index", "address", "port", "seq", "time_ms", "time_s",
          "value")
VERIFY_FIELDS = ("device", "id", "group", "index", "address", "port")   # per device, not per request
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]*))?\}")
LOCATION = "@location"
# Content-Format numbers (RFC 7252 §12.3, RFC 8428 for SenML)
FORMATS = {"text": 0, "link-format": 40, "octets": 42, "json": 50, "cbor": 60,
           "senml+json": 110, "senml+cbor": 112}
Format = Literal["text", "link-format", "octets", "json", "cbor", "senml+json", "senml+cbor"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def template_fields(t: Any) -> list[str]:
    """Every placeholder name of a template (a string, or a structure of strings)."""
    if isinstance(t, str):
        return [m.group(1) for m in PLACEHOLDER.finditer(t)]
    if isinstance(t, dict):
        return [f for k, v in t.items() for f in template_fields(k) + template_fields(v)]
    if isinstance(t, list):
        return [f for v in t for f in template_fields(v)]
    return []


class PushOp(_Model):
    op: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=40,
                    description="the operation's name (the report's per-operation figures)")
    phase: Literal["setup", "test", "teardown", "verify"] = Field(
        "test", description="`setup`: once per device before T0, in order, each after the "
        "previous one succeeded (a failure stops the run); `test`: on `interval` during the "
        "test; `teardown`: once after the test, in order (also when the run stops after a "
        "setup); `verify`: sent by the harness once per target after the test, before the "
        "teardown (e.g. an RD lookup); its answer must contain `expect` for every device")
    target: str = Field(
        description="where to: a device group of this run (a `server:` group such as an RD; "
        "device i of the group sends to its device i mod count) or `IP:PORT`")
    method: Literal["GET", "PUT", "POST", "DELETE"] = Field("POST", description="CoAP method")
    path: str = Field(
        "", description="URI path and query template without the leading `/`, e.g. "
        "`rd?ep={device}&lt=90`; `@location[?query]`: the location of the setup answer")
    body: Any = Field(
        None, description="payload template: a string, or for json/senml/cbor formats a YAML "
        "structure whose strings are templates (a string that is exactly one placeholder, e.g. "
        "`\"{value}\"`, keeps the value's type); null = no payload")
    format: Optional[Format] = Field(
        None, description="the body's format and Content-Format: text (0), link-format (40), "
        "octets (42), json (50), cbor (60), senml+json (110), senml+cbor (112); null = no "
        "Content-Format option")
    content_format: Optional[int] = Field(
        None, ge=0, le=65535, description="an explicit Content-Format number instead of "
                                          "`format`'s")
    type: Literal["con", "non"] = Field("con", description="CON or NON")
    retransmit: bool = Field(
        False, description="phase test, type con: retransmit an unanswered request per RFC 7252 "
        "§4.2 as setup and teardown requests always are (ACK_TIMEOUT 2 s × [1, 1.5), doubling, "
        "at most 4 times, within `gateways.timeout_ms`), as the GE's `gateways.retransmit`; "
        "between the device's scheduled sends, never delaying one. R counts from the first send")
    interval: Optional[Any] = Field(
        None, description="test phase: the time between two requests of one device, a "
        "distribution in ms (as `rit`); the first at a uniform instant in [0, mean)")
    value: Optional[Any] = Field(
        None, description="the distribution `{value}` is drawn from (as `rit`: dist, mean, cv)")
    value_decimals: int = Field(2, ge=0, le=9, description="decimals of `{value}`")
    expect: Optional[str] = Field(
        None, description="phase verify: what the answer's body must contain for each device, "
        "a template without {seq}/{time_*}/{value} (e.g. `ep=\"{device}\"` in an RFC 9176 "
        "endpoint lookup); the devices it does not find are counted and named in the report "
        "and the verdict")

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        if re.fullmatch(r"[a-z0-9][a-z0-9-]*", v):
            return v
        host, _, port = v.rpartition(":")
        try:
            ipaddress.ip_address(host.strip("[]"))
            ok = port.isdigit() and 1 <= int(port) <= 65535
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{v!r}: expected a device group of this run (e.g. rd) or "
                             "IP:PORT such as 127.0.0.1:5683 ([IPv6]:PORT)")
        return v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        v = v.lstrip("/")
        if any(c.isspace() or c in ',"' for c in v):
            raise ValueError(f"{v!r}: expected a URI path such as 'rd?ep={{device}}' (no spaces, "
                             "commas or quotes)")
        return v

    @model_validator(mode="after")
    def _rules(self) -> "PushOp":
        unknown = [f for f in template_fields(self.path) + template_fields(self.body)
                   if f not in FIELDS]
        if unknown:
            raise ValueError(f"unknown template field {{{unknown[0]}}}, expected one of "
                             + ", ".join("{" + f + "}" for f in FIELDS))
        if "value" in template_fields(self.path) + template_fields(self.body) and self.value is None:
            raise ValueError("{value} is used but `value` (its distribution) is not given")
        if self.phase == "test" and self.interval is None:
            raise ValueError("phase test needs `interval` (a distribution in ms, e.g. "
                             "{dist: deterministic, mean: 2000})")
        if self.phase != "test" and self.interval is not None:
            raise ValueError(f"phase {self.phase} is sent once: expected no `interval`")
        if self.retransmit and self.type != "con":
            raise ValueError("retransmit: true with type non: RFC 7252 retransmits CON requests "
                             "only; set type: con or remove retransmit")
        if self.retransmit and self.phase != "test":
            raise ValueError(f"retransmit: true in phase {self.phase}: expected it in phase test "
                             "only (setup and teardown CON requests are always retransmitted; "
                             "verify is the harness's request)")
        if (self.phase == "verify") != (self.expect is not None):
            raise ValueError("phase verify needs `expect` (e.g. 'ep=\"{device}\"'), other "
                             "phases take none")
        if self.expect is not None and set(template_fields(self.expect)) - set(VERIFY_FIELDS):
            raise ValueError("expect: expected only the fields "
                             + ", ".join("{" + f + "}" for f in VERIFY_FIELDS))
        if self.phase == "verify" and (self.body is not None or self.path.startswith(LOCATION)):
            raise ValueError("phase verify is the harness's request: expected no body and no "
                             "@location path")
        if self.phase == "setup" and self.path.startswith(LOCATION):
            raise ValueError("@location in a setup op: the location comes from a setup answer, "
                             "use it in test or teardown ops")
        if self.format in ("json", "cbor", "senml+json", "senml+cbor") or self.body is None:
            pass
        elif not isinstance(self.body, str):
            raise ValueError(f"body: a structure needs format json, cbor, senml+json or "
                             f"senml+cbor, got format {self.format!r}")
        return self

    @property
    def content_format_number(self) -> Optional[int]:
        if self.content_format is not None:
            return self.content_format
        return FORMATS[self.format] if self.format else None
