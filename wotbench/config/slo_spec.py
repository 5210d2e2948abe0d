"""Service-level objectives: the ``slo:`` block of a config and the ``--slo`` expressions of
``wotbench capacity``. This module is the schema only; :mod:`wotbench.analysis.slo_judge` evaluates it.

    slo:
      p95_ms: 50            # response time from the actual send, 95th percentile <= 50 ms
      p99_ms: 200
      p95_sched_ms: 60      # response time from the scheduled send (includes the GE's lag)
      loss_max: 0.02        # share of sent requests that got no answer (timeout); or '2%'
      success_min: 0.98     # share of sent requests answered 2.xx; or '98%'
      throughput_min_rps: 100   # 2.xx responses per second
      window_s: 10          # the length of the windows each objective is also judged on
      groups:               # the same objectives for one device group only
        sensor: {p95_ms: 30}

A limit is inclusive: ``p95_ms: 50`` passes at exactly 50 ms (``<=``), ``success_min: 0.98``
passes at exactly 98 % (``>=``). Percentiles are numpy's linear interpolation, as everywhere in
summary.json.

``--slo`` expressions (``parse_expr``): ``[GROUP:]METRIC OP VALUE`` with METRIC one of
``p50 p90 p95 p99 p999`` (optionally ``_sched``), ``loss``, ``success``, ``throughput``; OP
``<=`` for percentiles and loss, ``>=`` for success and throughput; VALUE with a unit
(``50ms``, ``0.05s``, ``2%``, ``0.02``, ``100/s``, ``100rps``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
SHARE_KEYS = ("loss_max", "success_min")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _share(v: Any) -> Any:
    """``0.02`` or ``'2%'`` -> 0.02; a number above 1 is rejected with the fix."""
    if isinstance(v, str):
        s = v.strip()
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", s)
        if not m:
            raise ValueError(f"must be a share 0..1 or a percentage such as '2%', got {v!r}")
        v = float(m.group(1)) / 100
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"must be a share 0..1 or a percentage such as '2%', got {v!r}")
    if not 0 <= v <= 1:
        raise ValueError(f"must be a share between 0 and 1 (2 % is 0.02 or '2%'), got {v!r}")
    return float(v)


_SEND = "upper limit, ms, of the {} percentile of the response time from the actual send"
_SCHED = ("upper limit, ms, of the {} percentile of the response time from the scheduled send "
          "(includes the GE's lag)")


class Objectives(_Model):
    """The objectives of the whole run or of one device group; every key optional."""
    p50_ms: Optional[float] = Field(None, gt=0, description=_SEND.format("50th"))
    p90_ms: Optional[float] = Field(None, gt=0, description=_SEND.format("90th"))
    p95_ms: Optional[float] = Field(None, gt=0, description=_SEND.format("95th"))
    p99_ms: Optional[float] = Field(None, gt=0, description=_SEND.format("99th"))
    p999_ms: Optional[float] = Field(None, gt=0, description=_SEND.format("99.9th"))
    p50_sched_ms: Optional[float] = Field(None, gt=0, description=_SCHED.format("50th"))
    p90_sched_ms: Optional[float] = Field(None, gt=0, description=_SCHED.format("90th"))
    p95_sched_ms: Optional[float] = Field(None, gt=0, description=_SCHED.format("95th"))
    p99_sched_ms: Optional[float] = Field(None, gt=0, description=_SCHED.format("99th"))
    p999_sched_ms: Optional[float] = Field(None, gt=0, description=_SCHED.format("99.9th"))
    loss_max: Optional[float] = Field(
        None, description="upper limit of the share of sent requests that got no answer "
                          "(timeout): 0..1 or a percentage such as '2%'")
    success_min: Optional[float] = Field(
        None, description="lower limit of the share of sent requests answered 2.xx: 0..1 or a "
                          "percentage such as '98%'")
    throughput_min_rps: Optional[float] = Field(
        None, gt=0, description="lower limit of 2.xx responses per second")

    @field_validator(*SHARE_KEYS, mode="before")
    @classmethod
    def _shares(cls, v: Any) -> Any:
        return None if v is None else _share(v)

    def is_empty(self) -> bool:
        return all(getattr(self, k) is None for k in Objectives.model_fields)


class Slo(Objectives):
    window_s: float = Field(10.0, gt=0, description="the length of the windows each objective "
                                                     "is also judged on")
    groups: dict[str, Objectives] = Field(
        default_factory=dict, description="the same objectives for one device group only, by "
                                          "group name, e.g. `{sensor: {p95_ms: 30}}`")

    @model_validator(mode="after")
    def _something(self) -> "Slo":
        if self.is_empty() and all(g.is_empty() for g in self.groups.values()):
            raise ValueError("no objective given: set at least one of "
                             + ", ".join(Objectives.model_fields) + " (e.g. slo: {p95_ms: 50})")
        return self


def group_problems(slo: Optional[Slo], groups: list[str]) -> list[str]:
    """``slo.groups.<name>: no device group ...`` for every SLO group the config lacks."""
    if slo is None:
        return []
    return [f"slo.groups.{g}: no device group named {g!r} (groups: {', '.join(groups)})"
            for g in slo.groups if g not in groups]


# ------------------------------------------------------------------------------ objectives

Metric = str          # "p95", "p95_sched", "loss", "success", "throughput"


@dataclass(frozen=True)
class Objective:
    """One objective to judge: ``metric op limit`` over ``group`` (None = every device)."""
    key: str                       # where it was set: "p95_ms", "groups.sensor.p95_ms"
    metric: Metric
    group: Optional[str]
    op: Literal["<=", ">="]
    limit: float
    unit: str                      # "ms", "share", "req/s"

    @property
    def label(self) -> str:
        scope = f"group {self.group}: " if self.group else ""
        if self.metric in ("loss", "success"):
            what = {"loss": "loss (no answer) of sent", "success": "success (2.xx) of sent"}[self.metric]
            return f"{scope}{what} {self.op} {self.limit * 100:g} %"
        if self.metric == "throughput":
            return f"{scope}throughput {self.op} {self.limit:g} req/s"
        p, _, sched = self.metric.partition("_")
        return f"{scope}{p} response time (from {'schedule' if sched else 'send'}) {self.op} {self.limit:g} ms"

    @property
    def short(self) -> str:
        """``p95`` / ``loss`` / ``sensor p95``: for one sentence."""
        return f"{self.group} {self.metric}" if self.group else self.metric

    def fmt(self, value: Optional[float]) -> str:
        if value is None:
            return "no data"
        if self.unit == "ms":
            return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"
        if self.unit == "share":
            return f"{value * 100:.2f} %"
        return f"{value:.1f} req/s"


def _field_objective(key: str, field: str, value: float, group: Optional[str]) -> Objective:
    if field == "loss_max":
        return Objective(key, "loss", group, "<=", value, "share")
    if field == "success_min":
        return Objective(key, "success", group, ">=", value, "share")
    if field == "throughput_min_rps":
        return Objective(key, "throughput", group, ">=", value, "req/s")
    return Objective(key, field[:-3], group, "<=", value, "ms")      # p95_ms / p95_sched_ms


def objectives(slo: Slo) -> list[Objective]:
    """Every objective set, the run's first, then each group's, in schema order."""
    out = []
    for group, obj, prefix in [(None, slo, "")] + [(g, o, f"groups.{g}.") for g, o in slo.groups.items()]:
        for field in Objectives.model_fields:
            v = getattr(obj, field)
            if v is not None:
                out.append(_field_objective(prefix + field, field, float(v), group))
    return out


# ------------------------------------------------------------------------------ --slo

_EXPR = re.compile(r"^\s*(?:(?P<group>[a-z0-9][a-z0-9-]*)\s*:\s*)?(?P<metric>[a-z0-9_]+)\s*"
                   r"(?P<op><=|>=|<|>|=)\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[a-z%/]*)\s*$")
_TIME_UNITS = {"": 1.0, "ms": 1.0, "s": 1000.0, "us": 0.001}
_RATE_UNITS = ("", "/s", "rps", "req/s")
_ALIASES = {"tput": "throughput", "p50_schedule": "p50_sched"}


def parse_expr(text: str) -> tuple[Optional[str], str, float]:
    """``'p95<=50ms'`` -> ``(None, 'p95_ms', 50.0)``; ``'sensor:loss<=2%'`` ->
    ``('sensor', 'loss_max', 0.02)``. ValueError with the expected form when malformed."""
    form = "expected [GROUP:]METRIC<=VALUE or >=, e.g. 'p95<=50ms', 'loss<=2%', 'throughput>=100/s'"
    m = _EXPR.match(text.lower())
    if not m:
        raise ValueError(f"cannot read {text!r}: {form}")
    metric, op, num, unit = m["metric"], m["op"], float(m["num"]), m["unit"]
    metric = _ALIASES.get(metric, metric)
    p, _, rest = metric.partition("_")
    if op in ("<", ">", "="):
        raise ValueError(f"{text!r}: use <= or >= (a value exactly at the limit meets it)")
    if p in PERCENTILES and rest in ("", "sched"):
        if op != "<=":
            raise ValueError(f"{text!r}: a response-time percentile is an upper limit, write {metric}<={num:g}{unit}")
        if unit not in _TIME_UNITS:
            raise ValueError(f"{text!r}: unit {unit!r}, expected ms, s or us")
        return m["group"], f"{metric}_ms", num * _TIME_UNITS[unit]
    if metric in ("loss", "success"):
        want = "<=" if metric == "loss" else ">="
        if op != want:
            raise ValueError(f"{text!r}: {metric} is {'an upper' if want == '<=' else 'a lower'} limit, "
                             f"write {metric}{want}{num:g}{unit}")
        if unit not in ("", "%"):
            raise ValueError(f"{text!r}: unit {unit!r}, expected % or a share 0..1")
        share = num / 100 if unit == "%" else num
        if share > 1:
            raise ValueError(f"{text!r}: a share must be 0..1 (write {num:g}% for a percentage)")
        return m["group"], "loss_max" if metric == "loss" else "success_min", share
    if metric == "throughput":
        if op != ">=":
            raise ValueError(f"{text!r}: throughput is a lower limit, write throughput>={num:g}{unit}")
        if unit not in _RATE_UNITS:
            raise ValueError(f"{text!r}: unit {unit!r}, expected /s, rps or req/s")
        return m["group"], "throughput_min_rps", num
    raise ValueError(f"{text!r}: unknown metric {metric!r}, expected one of "
                     f"{', '.join(PERCENTILES)} (optionally _sched), loss, success, throughput")


def merge_exprs(base: Optional[dict], exprs: list[str]) -> dict:
    """The config's ``slo:`` mapping (or none) with every ``--slo`` expression set over it.
    Raises ValueError naming the expression."""
    out = {k: (dict(v) if k == "groups" else v) for k, v in (base or {}).items()}
    if "groups" in out:
        out["groups"] = {g: dict(o) for g, o in out["groups"].items()}
    for e in exprs:
        group, field, value = parse_expr(e)
        target = out.setdefault("groups", {}).setdefault(group, {}) if group else out
        target[field] = value
    return out
