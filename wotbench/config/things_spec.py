"""The ``things:`` block of a config: Things emulated from W3C Thing Descriptions (TD 1.1) or
Thing Models (TM 1.1), and the workload per affordance and operation (docs/WOT.md).

One entry per TD or TM file::

    things:
      - model: things/thermostat.tm.json     # or `td:` a Thing Description
        count: 4000
        instance: {ROOM: "room-{index}"}     # values of the TM's {{ROOM}} placeholders
        service_time_ms: 1.0                 # of every affordance without its own
        load:
          - {affordance: properties/temperature, op: readproperty, rate_per_s: 0.033}
          - {affordance: actions/setTarget, op: invokeaction, rate_per_s: 0.001,
             service_time_ms: 20}
          - {affordance: events/overheating, op: subscribeevent,
             notify: {dist: exponential, mean: 60000}}

:mod:`wotbench.things.expand` turns each entry into a device group of the config (its
``thing`` key names the entry), so the plan, deployment, analysis and report treat the
instances like any device. These models only check each field; what needs the TD file
(affordances, forms, placeholders) is checked by the expansion, naming the file and JSON
pointer.
"""
from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wotbench.config.distributions import DistSpec, validate_spec

# the operations a Thing's emulated device serves (TD 1.1 §5.3.4.2 "op" values)
REQUEST_OPS = ("readproperty", "writeproperty", "invokeaction")
OBSERVE_OPS = ("observeproperty", "subscribeevent")
OPS = REQUEST_OPS + OBSERVE_OPS
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


ServiceTime = Union[float, DistSpec]


def _with_mean(v: Optional[DistSpec], between: str) -> Optional[DistSpec]:
    """A time between events must give its mean (ms)."""
    if v is not None and v.mean is None:
        raise ValueError(f"mean: required (ms between {between})")
    return v


def _checked(v: ServiceTime) -> ServiceTime:
    """A service time: ms, or a distribution (``{dist, mean, cv?}``, as ``devices[].
    service_time``); every instance draws its own per affordance (:mod:`.workload`)."""
    if isinstance(v, DistSpec):
        if v.dist == "empirical":
            raise ValueError("dist: empirical, expected a parametric distribution (a sample "
                             "file is not read for Things)")
        bad = validate_spec(v.model_dump())
        if bad:
            raise ValueError(f"{bad[0][0]}: {bad[0][1]}")
    elif v < 0:
        raise ValueError(f"{v:g} ms, expected >= 0")
    return v


def service_mean_ms(v: ServiceTime) -> float:
    return float(v.mean) if isinstance(v, DistSpec) else float(v)


class OpLoad(_Model):
    """The workload of one operation of one affordance, per Thing instance."""
    affordance: str = Field(
        description="`properties/NAME`, `actions/NAME` or `events/NAME` of the TD")
    op: Literal[OPS] = Field(  # type: ignore[valid-type]
        description="readproperty (GET), writeproperty (PUT), invokeaction (POST), "
                    "observeproperty or subscribeevent (CoAP Observe)")
    rate_per_s: Optional[float] = Field(
        None, gt=0, description="requests per second per instance, Poisson arrivals; or give "
                                "`interval`")
    interval: Optional[DistSpec] = Field(
        None, description="instead of rate_per_s: the time between requests (ms, a distribution)")
    service_time_ms: Optional[ServiceTime] = Field(
        None, description="the affordance's service time, ms or a distribution `{dist, mean, "
        "cv?}` (each instance draws its own; one per resource path: every op of the "
        "affordance's form shares it); null: the entry's `service_time_ms`")
    observers: int = Field(1, ge=1, le=100, description="observe ops: observers per instance")
    register_within_s: float = Field(
        1.0, ge=0, description="observe ops: each observer registers at a uniform instant in "
                               "[0, this) of the test and stays until its end")
    notify: Optional[DistSpec] = Field(
        None, description="CoAP observe ops (required there): time between notifications (ms; "
                          "dist deterministic | uniform | exponential | normal): the property's "
                          "change rate or the event's rate; none over HTTP SSE (a notification "
                          "per write)")
    notify_type: Literal["con", "non"] = Field("con", description="observe ops: CON or NON")
    subscribed: Optional[int] = Field(
        None, ge=1, description="observeproperty over HTTP SSE: how many instances (the first "
        "ones) the notification sink subscribes to, `observers` streams each; null: every "
        "instance, at most 64 streams in all (the sink's limit)")

    @field_validator("service_time_ms")
    @classmethod
    def _service(cls, v: Optional[ServiceTime]) -> Optional[ServiceTime]:
        return None if v is None else _checked(v)

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: Optional[DistSpec]) -> Optional[DistSpec]:
        return None if v is None else _checked(_with_mean(v, "requests"))

    @field_validator("notify")
    @classmethod
    def _notify(cls, v: Optional[DistSpec]) -> Optional[DistSpec]:
        return _with_mean(v, "notifications")

    @field_validator("affordance")
    @classmethod
    def _affordance(cls, v: str) -> str:
        kind, _, name = v.partition("/")
        if kind not in ("properties", "actions", "events") or not name or "/" in name:
            raise ValueError(f"{v!r}, expected properties/NAME, actions/NAME or events/NAME")
        return v

    @model_validator(mode="after")
    def _fits_op(self) -> "OpLoad":
        kind = self.affordance.split("/", 1)[0]
        allowed = {"properties": ("readproperty", "writeproperty", "observeproperty"),
                   "actions": ("invokeaction",), "events": ("subscribeevent",)}[kind]
        if self.op not in allowed:
            raise ValueError(f"op {self.op} on {kind}, expected one of {', '.join(allowed)}")
        if self.op in OBSERVE_OPS:
            if self.rate_per_s is not None or self.interval is not None:
                raise ValueError(f"{self.op} takes observers and notify, not a request rate")
        else:
            if (self.rate_per_s is None) == (self.interval is None):
                raise ValueError("give exactly one of rate_per_s and interval")
            if self.notify is not None:
                raise ValueError(f"notify is for observeproperty/subscribeevent, not {self.op}")
        return self

    @property
    def mean_interval_ms(self) -> float:
        return 1000.0 / self.rate_per_s if self.rate_per_s else float(self.interval.mean)


class ThingSpec(_Model):
    """One TD or TM file and how many instances of it to emulate."""
    td: Optional[str] = Field(None, description="a Thing Description file (JSON), relative "
                                                "to the config file")
    model: Optional[str] = Field(None, description="a Thing Model file (JSON, placeholders "
                                                   "`{{NAME}}`), relative to the config file")
    count: int = Field(1, ge=1, description="instances; each is one emulated device")
    group: Optional[str] = Field(
        None, pattern=NAME_PATTERN, max_length=40,
        description="device group name (instances are `<group>-<i>`); default: the file name "
                    "without its extensions")
    instance: dict[str, object] = Field(
        default_factory=dict, description="placeholder values of a TM, `NAME: value`; a string "
        "may contain `{index}` (the instance's number) and `{device}` (its device name)")
    service_time_ms: ServiceTime = Field(
        1.0, description="service time of every affordance without its own: ms, or a "
        "distribution `{dist, mean, cv?}` (as `devices[].service_time`; each instance draws "
        "its own per affordance)")
    mode: Literal["sleep", "busy"] = Field("sleep", description="service: `sleep` (sensor-bound) "
                                                                "or `busy` (CPU)")
    threads: int = Field(1, ge=1, le=1024, description="worker threads per instance")
    engine: Literal["auto", "process", "fleet"] = Field(
        "auto", description="as `devices[].engine` (docs/FLEET.md)")
    load: list[OpLoad] = Field(default_factory=list, description="the workload, per affordance "
                                                                 "and op")

    @field_validator("service_time_ms")
    @classmethod
    def _service(cls, v: ServiceTime) -> ServiceTime:
        return _checked(v)

    @model_validator(mode="after")
    def _one_file(self) -> "ThingSpec":
        if (self.td is None) == (self.model is None):
            raise ValueError("give exactly one of td (a Thing Description) and model (a Thing "
                             "Model)")
        if self.td is not None and self.instance:
            raise ValueError("instance: placeholder values are for a Thing Model (model:), "
                             "a TD has none")
        return self

    @property
    def file(self) -> str:
        return self.td or self.model   # type: ignore[return-value]

    @property
    def is_model(self) -> bool:
        return self.model is not None


class DirectorySpec(_Model):
    """``directory:``: the Things of ``things:`` register with a Thing Description Directory
    (WoT Discovery's HTTP API) instead of being emulated: a registration storm, a check that
    every instance is found, updates and queries under load, then deregistration
    (:mod:`wotbench.things.directory`). The run then speaks HTTP to the directory only."""
    server: dict = Field(description="the directory, as `devices[].server` (e.g. `command: "
                                     "[wotbench-tdd, --listen, '{address}:{port}']`, port 8081)")
    register_within_s: float = Field(10.0, gt=0, description="each instance PUTs its TD at a "
                                     "uniform instant in [0, this) of the test")
    verify_within_s: float = Field(5.0, ge=0, description="then each instance's TD is read "
                                   "back (GET /things/ID) at a uniform instant in the next "
                                   "verify_within_s: every instance must be found (0: no check)")
    updates_per_s: float = Field(0.0, ge=0, description="after that, each instance's TD is "
                                 "PUT again at this rate (Poisson, per instance)")
    queries_per_s: float = Field(1.0, ge=0, description="consumer queries per second (Poisson) "
                                 "after the verification")
    query: str = Field("things?offset=0&limit=10", description="the query's path and query "
                       "string (WoT Discovery: a page of the listing)")
    deregister_within_s: float = Field(5.0, ge=0, description="each instance DELETEs its TD "
                                       "at a uniform instant in the last deregister_within_s "
                                       "of the test (0: it stays registered)")
