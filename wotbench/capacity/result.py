"""The capacity search's result as typed values: what ``wotbench capacity`` prints, writes to
``capacity.json`` (``CapacityResult.to_json()``, the same keys as before the types) and hands
to the sweep report, and what the tests read.

    CapacityParams (the search's flags, kept in sweep.json to resume)
    CapacityResult -> steps: [CapacityStep -> slo: SettingJudgement -> deciding: MetricStats]
                   -> outcome: SloOutcome (an SLO search only)
"""
from __future__ import annotations

import json
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "wotbench-capacity/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CapacityParams(_Model):
    """The search as asked (``--key --start --max --step --bisect --repeats --resolution --set
    --slo``); stored in sweep.json so that ``--resume`` continues the same search."""
    key: str
    start: Any
    max: Any
    step: Any = None
    bisect: bool
    repeats: int
    resolution: Any
    set: dict[str, Any] = Field(default_factory=dict)
    slo: Optional[dict[str, Any]] = None


class MetricStats(_Model):
    """One objective across a setting's runs: values, median, spread, the median's margin."""
    key: str
    short: str
    label: str
    unit: str
    op: Literal["<=", ">="]
    limit: float
    values: list[float]
    no_data: int                 # runs without a measured value
    median: Optional[float]
    min: Optional[float]
    max: Optional[float]
    spread: Optional[float]      # max - min; None with fewer than two values
    margin: Optional[float]      # distance of the median inside (+) or beyond (-) the limit
    failed_runs: int
    runs: int


class SettingJudgement(_Model):
    """An SLO search's class of one setting (:func:`wotbench.capacity.slo_search.judge_setting`)."""
    cls: Literal["meets", "misses", "unfaithful"] = Field(alias="class")
    faithful_runs: int
    slo_met_runs: int
    deciding: Optional[MetricStats]   # the objective with the least headroom
    metrics: list[MetricStats]
    slo_texts: list[str]


class CapacityStep(_Model):
    """One setting the search ran (its ``repeats`` points)."""
    phase: Literal["probe", "bisect"]
    value: Any
    points: list[str]
    flagged: Optional[bool]           # None: a run did not complete
    verdicts: list[Optional[str]]
    reasons: list[str]
    run_dirs: list[Optional[str]]
    hosts: list[Optional[dict]]       # swarm: the unfaithful node per run (HostFault dumps)
    rd_devices: Optional[float]       # median R_d of the devices over the runs
    testbed_ms: Optional[float]       # how much the host added per request (median)
    testbed_share: Optional[float]
    testbed_worst_share: Optional[float]
    # what testbed_share is a share of, when not the devices' response time (a connected
    # config: the RPC round trip, the engines' own part of it being the testbed's)
    testbed_of: Optional[str] = None
    rd_cd: Optional[float]
    slo: Optional[SettingJudgement] = None    # an SLO search's judgement
    slo_text: Optional[str] = None


class SloOutcome(_Model):
    """An SLO search's answer in one sentence (:func:`wotbench.capacity.slo_search.outcome`)."""
    kind: Literal["system", "host", "inconclusive", "incomplete"]
    sentence: str
    confidence: Optional[str]
    evidence: list[str]


class CapacityResult(_Model):
    """capacity.json."""
    schema_: str = Field(SCHEMA, alias="schema")
    key: str
    params: CapacityParams
    status: Literal["found", "max_clean", "none_clean", "failed", "interrupted"]
    answer: Any
    first_flagged: Any
    runs: int
    steps: list[CapacityStep]
    error: Optional[str]
    policy: str
    conclusion: str
    sweep_dir: Optional[str] = None
    slo: Optional[dict[str, Any]] = None      # an SLO search: the objectives searched against
    outcome: Optional[SloOutcome] = None      # an SLO search: its answer

    def to_json(self) -> str:
        """capacity.json's text: the keys as written before the types (``outcome``/``slo`` only
        for an SLO search, ``class`` for a setting's judgement)."""
        data = self.model_dump(mode="json", by_alias=True,
                               exclude=None if self.outcome else {"outcome", "slo"})
        for s in data["steps"]:
            if s["slo"] is None:
                del s["slo"], s["slo_text"]
        return json.dumps(data, indent=2, default=str) + "\n"
