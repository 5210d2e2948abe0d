"""Configuration model of per-device network impairments (issue 5).

A device group's ``network:`` key (see docs/NETWORK-IMPAIRMENTS.md):

    network:
      delay: {time_ms: 40, jitter_ms: 5, correlation: 0, distribution: normal}
      loss: {percent: 2, correlation: 0}          # or: loss: {gilbert_elliott: {p: 1, r: 30, one_minus_h: 100, one_minus_k: 0}}
      rate: 250kbit
      duplicate: {percent: 0.5}
      corrupt: {percent: 0.1}
      direction: egress                            # egress | ingress | both
      overrides:                                   # per device, by name; replaces whole keys, null removes one
        cpu-3: {loss: {percent: 10}}

All percentages are 0..100. Times are milliseconds with at most microsecond resolution.
Cross-field checks are field validators, so a message's location names the offending key
(``delay.jitter_ms: 30 ms is larger than the delay time_ms 20 ms``).
"""
from __future__ import annotations

import math
import re
from typing import Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from wotbench.errors import format_loc
from wotbench.schema_errors import problems as schema_problems

BackendName = Literal["auto", "pumba", "netem", "app"]
Direction = Literal["egress", "ingress", "both"]
Distribution = Literal["uniform", "normal", "pareto", "paretonormal"]

# tc rate units accepted by the model (bit/s based and byte/s based, as in tc(8)).
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")
_RATE_FACTOR = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
                "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}


def _err(msg: str) -> PydanticCustomError:
    # A custom error type keeps pydantic from prefixing "Value error, ".
    return PydanticCustomError("netimpair", msg)


def fmt_num(x: float) -> str:
    """Shortest plain decimal for a config number: 2 -> '2', 0.25 -> '0.25'."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.6f}".rstrip("0").rstrip(".")


def _pct(v: float, what: str) -> float:
    if not math.isfinite(v) or v < 0 or v > 100:
        raise _err(f"{fmt_num(v) if math.isfinite(v) else v} is not a percentage, expected 0..100 ({what})")
    return float(v)


def _usec(v: float, what: str) -> float:
    if not math.isfinite(v) or v < 0:
        raise _err(f"{v} ms is not a valid {what}, expected a number of milliseconds >= 0")
    if abs(v * 1000 - round(v * 1000)) > 1e-6:
        raise _err(f"{fmt_num(v)} ms is finer than 1 µs, the finest {what} tc and the C programs take")
    return float(v)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Delay(_Strict):
    time_ms: float = Field(description="mean added delay, ms (> 0, at most 1 µs resolution)")
    jitter_ms: float = Field(0.0, description="random variation ± around time_ms, ms "
                                              "(0 ≤ jitter ≤ time_ms)")
    correlation: float = Field(0.0, description="percent: how much each jitter draw depends on "
                                                "the previous one; needs jitter_ms")
    distribution: Optional[Distribution] = Field(
        None, description="shape of the jitter; null = tc's default (uniform); needs jitter_ms")

    @field_validator("time_ms")
    @classmethod
    def _time(cls, v: float) -> float:
        v = _usec(v, "delay")
        if v <= 0:
            raise _err(f"{fmt_num(v)} ms is not a delay, expected > 0 ms (leave out delay for none)")
        return v

    @field_validator("jitter_ms")
    @classmethod
    def _jitter(cls, v: float, info: ValidationInfo) -> float:
        v = _usec(v, "jitter")
        t = info.data.get("time_ms")
        if t is not None and v > t:
            raise _err(f"{fmt_num(v)} ms is larger than the delay time_ms {fmt_num(t)} ms "
                       f"(netem and Pumba need jitter <= delay)")
        return v

    @field_validator("correlation")
    @classmethod
    def _corr(cls, v: float, info: ValidationInfo) -> float:
        v = _pct(v, "delay correlation")
        if v > 0 and not info.data.get("jitter_ms"):
            raise _err(f"{fmt_num(v)}% correlation needs jitter_ms > 0 (it correlates the random jitter)")
        return v

    @field_validator("distribution")
    @classmethod
    def _dist(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None and v != "uniform" and not info.data.get("jitter_ms"):
            raise _err(f"distribution {v} needs jitter_ms > 0 (it shapes the random jitter)")
        return v


class GilbertElliott(_Strict):
    """tc-netem ``loss gemodel p r 1-h 1-k``; all four in percent."""
    p: float = Field(description="good → bad transition probability, %")
    r: float = Field(100.0, description="bad → good transition probability, %")
    one_minus_h: float = Field(100.0, description="loss probability in the bad state, %")
    one_minus_k: float = Field(0.0, description="loss probability in the good state, %")

    @field_validator("p", "r", "one_minus_h", "one_minus_k")
    @classmethod
    def _p(cls, v: float, info: ValidationInfo) -> float:
        return _pct(v, f"Gilbert-Elliott {info.field_name}")


class Loss(_Strict):
    percent: Optional[float] = Field(None, description="independent (Bernoulli) loss, %; give "
                                                        "this or gilbert_elliott")
    correlation: float = Field(0.0, description="percent; random loss only")
    gilbert_elliott: Optional[GilbertElliott] = Field(
        None, description="burst loss: tc-netem `loss gemodel p r 1-h 1-k`")

    @field_validator("percent")
    @classmethod
    def _pc(cls, v: Optional[float]) -> Optional[float]:
        return None if v is None else _pct(v, "loss")

    @field_validator("correlation")
    @classmethod
    def _co(cls, v: float) -> float:
        return _pct(v, "loss correlation")

    @model_validator(mode="after")
    def _one_model(self) -> "Loss":
        if self.gilbert_elliott is not None and self.percent is not None:
            raise _err("give either percent (random loss) or gilbert_elliott (burst loss), not both")
        if self.gilbert_elliott is None and self.percent is None:
            raise _err("give percent (random loss) or gilbert_elliott {p, r, one_minus_h, one_minus_k}")
        if self.gilbert_elliott is not None and self.correlation:
            raise _err("correlation applies to random loss only; the Gilbert-Elliott model has its own state")
        return self


class Percent(_Strict):
    """duplicate / corrupt: ``{percent, correlation}``."""
    percent: float = Field(description="share of datagrams, %")
    correlation: float = Field(0.0, description="percent: dependence on the previous draw")

    @field_validator("percent", "correlation")
    @classmethod
    def _p(cls, v: float, info: ValidationInfo) -> float:
        return _pct(v, info.field_name)


def rate_bits_per_s(rate: str) -> float:
    m = _RATE_RE.match(rate)
    assert m, rate
    return float(m.group(1)) * _RATE_FACTOR[m.group(2)]


class Impairment(_Strict):
    """What one device's link does. Every key optional; an empty one impairs nothing."""
    delay: Optional[Delay] = Field(None, description="added delay")
    loss: Optional[Loss] = Field(None, description="random or burst loss")
    rate: Optional[str] = Field(
        None, description="bandwidth: a number with a tc unit, `bit/kbit/mbit/gbit` (bits/s) or "
                          "`bps/kbps/mbps/gbps` (bytes/s), e.g. 250kbit")
    duplicate: Optional[Percent] = Field(None, description="duplicated datagrams")
    corrupt: Optional[Percent] = Field(None, description="datagrams with one bit flipped")
    direction: Direction = Field(
        "egress", description="`egress` = device → gateway (responses), `ingress` = gateway → "
        "device (requests), `both` (each way: a 20 ms delay adds 40 ms to the round trip)")

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        if v is None:
            return v
        s = str(v).strip().lower()
        m = _RATE_RE.match(s)
        if not m:
            raise _err(f"{v!r} is not a rate, expected a number with a tc unit: bit|kbit|mbit|gbit "
                       f"(bits/s) or bps|kbps|mbps|gbps (bytes/s), e.g. 250kbit")
        if float(m.group(1)) <= 0:
            raise _err(f"{v!r} is not a rate, expected > 0")
        return s

    def is_empty(self) -> bool:
        return not (self.delay or self.loss or self.rate or self.duplicate or self.corrupt)

    def kinds(self) -> list[str]:
        """Impairment kinds present, in a fixed order (delay, loss, rate, duplicate, corrupt)."""
        return [k for k in ("delay", "loss", "rate", "duplicate", "corrupt") if getattr(self, k)]

    def describe(self) -> str:
        """One line for the report header, e.g. 'delay 40ms ±5ms normal, loss 2%; egress'."""
        parts = []
        if self.delay:
            d = self.delay
            s = f"delay {fmt_num(d.time_ms)}ms"
            if d.jitter_ms:
                s += f" ±{fmt_num(d.jitter_ms)}ms"
                if d.correlation:
                    s += f" corr {fmt_num(d.correlation)}%"
                s += f" {d.distribution or 'uniform'}"
            parts.append(s)
        if self.loss:
            lo = self.loss
            if lo.gilbert_elliott:
                g = lo.gilbert_elliott
                parts.append(f"loss Gilbert-Elliott p={fmt_num(g.p)}% r={fmt_num(g.r)}% "
                             f"1-h={fmt_num(g.one_minus_h)}% 1-k={fmt_num(g.one_minus_k)}%")
            else:
                s = f"loss {fmt_num(lo.percent)}%"
                if lo.correlation:
                    s += f" corr {fmt_num(lo.correlation)}%"
                parts.append(s)
        if self.rate:
            parts.append(f"rate {self.rate}")
        for k in ("duplicate", "corrupt"):
            v = getattr(self, k)
            if v:
                parts.append(f"{k} {fmt_num(v.percent)}%" + (f" corr {fmt_num(v.correlation)}%" if v.correlation else ""))
        if not parts:
            return "none"
        return ", ".join(parts) + f"; {self.direction}"


class NetworkImpairment(Impairment):
    """A device group's ``network:`` value: an Impairment plus per-device overrides by name.

    An override replaces whole keys of the group's impairment (``delay``, ``loss``, ``rate``,
    ``duplicate``, ``corrupt``, ``direction``); ``null`` removes a key for that device.
    """
    overrides: dict[str, dict[str, Any]] = Field(
        {}, description="per device, by name: replaces whole keys of the group's settings; "
                        "null removes a key for that device")

    @field_validator("overrides")
    @classmethod
    def _ov(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        allowed = set(Impairment.model_fields)
        for dev, o in v.items():
            if not isinstance(o, dict):
                raise _err(f"{dev}: expected a mapping of impairment keys, got {type(o).__name__}")
            bad = sorted(set(o) - allowed)
            if bad:
                raise _err(f"{dev}: unknown key(s) {', '.join(bad)}; allowed: {', '.join(sorted(allowed))}")
        return v

    @model_validator(mode="after")
    def _overrides_valid(self) -> "NetworkImpairment":
        for dev in self.overrides:
            self.for_device(dev)   # raises with the device's key path
        return self

    def base(self) -> Impairment:
        return Impairment.model_validate(self.model_dump(exclude={"overrides"}))

    def for_device(self, name: str) -> Impairment:
        """The impairment of device ``name`` (the group's, with that device's override applied)."""
        o = self.overrides.get(name)
        if not o:
            return self.base()
        merged = self.model_dump(exclude={"overrides"})
        merged.update(o)
        try:
            return Impairment.model_validate(merged)
        except ValidationError as e:
            first = e.errors()[0]
            loc = format_loc(("overrides", name) + tuple(first["loc"]))
            raise _err(f"{loc}: {first['msg']}") from None


def problems_from_validation_error(exc: ValidationError, prefix: str = "") -> list[str]:
    """``["devices[0].network.delay.jitter_ms: 30 ms is larger ..."]`` from a pydantic error
    (the config's one formatter, :mod:`wotbench.schema_errors`)."""
    return schema_problems(exc, NetworkImpairment, (prefix,) if prefix else ())


def parse_network(raw: Any, prefix: str = "network") -> NetworkImpairment | None:
    """Validate one group's ``network:`` value; raise ImpairmentConfigError with key-path problems."""
    from wotbench.netimpair.errors import ImpairmentConfigError
    if raw is None:
        return None
    if isinstance(raw, NetworkImpairment):
        return raw
    try:
        return NetworkImpairment.model_validate(raw)
    except ValidationError as e:
        raise ImpairmentConfigError(problems_from_validation_error(e, prefix)) from None
