"""``sut_faults:`` (issue 35): faults in the system under test at given seconds of the test —
``pause`` a started server (SIGSTOP, then SIGCONT ``for_s`` later), ``kill`` it (SIGKILL; it
stays dead, and its death is expected: not a component failure), ``restart`` it (its process
tree stopped, then started again with the same command and config; the test goes on when it
answers its readiness probe again) or change its CPU quota (``cpu_quota`` with ``cpus``: the
container's quota with the Docker backend, a cgroup the harness creates with the process
backend). The harness applies them on schedule (:mod:`wotbench.runner.sut_faults`) and records
when (``RUN/sut-faults.json``); the analysis compares throughput and latency in the windows
before, during and after each (``summary.json`` ``sut_faults``) and the report draws them on the
time series."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

Config = Any
ACTIONS = ("pause", "kill", "restart", "cpu_quota")
# the actions after which the server's process is not the one the harness started (a watcher
# must not take its exit for a component failure)
REPLACED = ("kill", "restart")


class SutFault(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    device: str = Field(description="a device of a `server:` group (e.g. broker-0)")
    at_s: float = Field(ge=0, description="seconds after the test start")
    action: Literal["pause", "kill", "restart", "cpu_quota"] = Field(
        description="pause (SIGSTOP, then SIGCONT after for_s), kill (SIGKILL, for good), "
        "restart (stop the process tree, start the same command again, wait until it answers) "
        "or cpu_quota (limit the server to `cpus` cores from then on)")
    for_s: Optional[float] = Field(None, gt=0, description="pause: how long")
    cpus: Optional[float] = Field(None, gt=0, le=1024, description="cpu_quota: the cores' "
                                  "worth of CPU time the server may use from at_s on (0.5: "
                                  "half of one core)")
    stop_grace_s: float = Field(2.0, gt=0, le=60, description="restart: SIGTERM, then SIGKILL "
                                "after this long")
    window_s: float = Field(2.0, gt=0, description="the length of the windows compared before, "
                            "during and after it")

    @model_validator(mode="after")
    def _fields_of_the_action(self) -> "SutFault":
        if self.action == "pause" and self.for_s is None:
            raise ValueError("action pause needs for_s (how long, s)")
        if self.action != "pause" and self.for_s is not None:
            raise ValueError(f"for_s is for action pause; a {self.action} has no length "
                             "(a kill lasts to the end, a restart until the server answers)")
        if self.action == "cpu_quota" and self.cpus is None:
            raise ValueError("action cpu_quota needs cpus (e.g. 0.5: half of one core)")
        if self.action != "cpu_quota" and self.cpus is not None:
            raise ValueError(f"cpus is for action cpu_quota, not {self.action}")
        if self.action != "restart" and "stop_grace_s" in self.model_fields_set:
            raise ValueError(f"stop_grace_s is for action restart, not {self.action}")
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
