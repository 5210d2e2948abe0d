"""A fake runner for the SLO capacity search: the sweep fake runner's run dir, plus an SLO
result judged by the real evaluator (wotbench.analysis.slo_judge) on synthetic requests whose
response time is chosen per config (and per seed, for noise across repeats)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from sweep_fakes import FakeRunner
from wotbench.analysis import slo_judge as sloa
from wotbench.rundir import RunDir
from wotbench.run_result import RunResult
from wotbench.config.slo_spec import Slo


def rate_of(cfg: dict) -> float:
    return round(1000 / cfg["devices"][0]["rit"]["mean"], 3)


def frame(rt_ms: float, n_devices: int = 5, duration_s: float = 10.0, per_s: int = 20,
          loss: float = 0.0) -> sloa.RequestFrame:
    """``per_s`` requests per second spread over the devices, every answer taking ``rt_ms``;
    the first ``loss`` share of each device's requests time out."""
    n = int(duration_s * per_s)
    dev = np.arange(n) % n_devices
    t = np.arange(n) / per_s
    outcome = np.where(np.arange(n) < int(round(loss * n)), "timeout", "ok").astype(object)
    rt = np.where(outcome == "ok", rt_ms, np.nan)
    names = [f"cpu-{i}" for i in range(n_devices)]
    return sloa.RequestFrame(device=dev, t_s=t, outcome=outcome, rt_sent_ms=rt, rt_sched_ms=rt,
                             names=names, group_of={n_: "cpu" for n_ in names})


class SloFakeRunner(FakeRunner):
    """``rt(cfg) -> ms`` (the p95 every run measures), ``verdict(cfg) -> status``."""

    def __init__(self, rt: Callable[[dict], float], **kw):
        super().__init__(**kw)
        self.rt = rt

    def __call__(self, config_path: str, out_root: str, backend=None,
                 on_run_dir=None) -> RunResult:
        result = super().__call__(config_path, out_root, backend, on_run_dir)
        cfg = yaml.safe_load(Path(config_path).read_text())
        if result.exit_code not in (0, 3) or "slo" not in cfg:
            return result
        rd, s = RunDir(result.run_dir), result.summary
        block = sloa.with_verdict(sloa.evaluate(Slo.model_validate(cfg["slo"]), frame(self.rt(cfg)),
                                                10.0), s.verdict.status)
        verdict = s.verdict.model_copy(update={"exit_code": sloa.exit_code(s.verdict.status, block)})
        s = s.model_copy(update={"slo": block, "verdict": verdict})
        rd.write_summary(s)
        return RunResult(verdict.exit_code, rd.path, s)
