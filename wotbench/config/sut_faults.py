"""``sut_faults:`` (issue 35): faults in the system under test at given seconds of the test —
``pause`` a started server (SIGSTOP, then SIGCONT ``for_s`` later) or ``kill`` it (SIGKILL; it
stays dead, and its death is expected: not a component failure). The harness applies them on
schedule (:mod:`wotbench.runner.sut_faults`) and records when (``RUN/sut-faults.json``); the
analysis compares throughput and latency in the windows before, during and after each
(``summary.json`` ``sut_faults``) and the report draws them on the time series. Restarts and
CPU-quota changes are not implemented."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

Config = Any


class SutFault(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    device: str = Field(description="a device of a `server:` group (e.g. broker-0)")
    at_s: float = Field(ge=0, description="seconds after the test start")
    action: Literal["pause", "kill"] = Field(description="pause (SIGSTOP, then SIGCONT after "
                                              "for_s) or kill (SIGKILL, for good)")
    for_s: Optional[float] = Field(None, gt=0, description="pause: how long")
    window_s: float = Field(2.0, gt=0, description="the length of the windows compared before, "
                            "during and after it")

    @model_validator(mode="after")
    def _pause_length(self) -> "SutFault":
        if self.action == "pause" and self.for_s is None:
            raise ValueError("action pause needs for_s (how long, s)")
        if self.action == "kill" and self.for_s is not None:
            raise ValueError("for_s is for action pause; a kill lasts to the end")
        return self


def problems(cfg: Config) -> list[str]:
    faults = cfg.sut_faults or []
    servers = {f"{g.group}-{i}" for g in cfg.devices if g.server is not None
               for i in range(g.count)}
    out, killed = [], {}
    for k, f in enumerate(faults):
        key = f"sut_faults[{k}]"
        if f.device not in servers:
            out.append(f"{key}.device: {f.device!r}, expected a started server of this run "
                       f"({', '.join(sorted(servers)) or 'none: give a group a server:'})")
        end = f.at_s + (f.for_s or 0)
        if end >= cfg.duration_s:
            out.append(f"{key}.at_s: {f.at_s:g}{f' + for_s {f.for_s:g}' if f.for_s else ''} is "
                       f"not before the test's end (duration_s {cfg.duration_s:g})")
        if f.device in killed and f.at_s >= killed[f.device]:
            out.append(f"{key}: {f.device} is killed at {killed[f.device]:g} s before it")
        if f.action == "kill":
            killed[f.device] = f.at_s
    if faults and cfg.cluster is not None and cfg.backend == "swarm":
        out.append("sut_faults: not with backend swarm")
    return out
