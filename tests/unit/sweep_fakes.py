"""A fake runner for the sweep and capacity tests: writes a synthetic run dir (summary.json,
run.json, plan.json through their models) from the derived config, no Docker involved."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import yaml

from summary_factory import make_summary
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.deploy.plan import make_plan
from wotbench.rundir import CdRecord, RunDir, RunRecord, TestWindow
from wotbench.run_result import RunResult

BASE = "name: t\nduration_s: 10\nseed: 1\ndevices:\n  - group: cpu\n    count: 5\n    rit: {dist: exponential, mean: 100}\n"


def write_base(tmp_path: Path, text: str = BASE) -> Path:
    p = tmp_path / "base.yaml"
    p.write_text(text)
    return p


class FakeRunner:
    """``verdict(cfg) -> status``; records calls; ``fail_on(cfg)`` -> exit code without summary,
    or raises the exception it returns."""

    def __init__(self, verdict: Callable[[dict], str] = lambda c: "trustworthy",
                 fail_on: Optional[Callable[[dict], object]] = None, rd: bool = True, cpu: bool = True):
        self.verdict, self.fail_on, self.rd, self.cpu = verdict, fail_on, rd, cpu
        self.calls: list[dict] = []

    def __call__(self, config_path: str, out_root: str, backend=None,
                 on_run_dir=None) -> RunResult:
        cfg = yaml.safe_load(Path(config_path).read_text())
        self.calls.append(cfg)
        if self.fail_on:
            r = self.fail_on(cfg)
            if isinstance(r, BaseException):
                raise r
            if r:
                return RunResult(int(r), None)
        n = sum(int(g.get("count", 1)) for g in cfg["devices"])
        rit = float(cfg["devices"][0].get("rit", {}).get("mean", 200))
        aff = cfg.get("placement", {}).get("affinity", "pinned")
        status = self.verdict(cfg)
        load = n * 1000 / rit / 400           # fraction of the host "capacity"
        rt = 5 * (1 + load) * (1.3 if aff == "shared" else 1)
        run_dir = Path(out_root) / f"{cfg['name']}-20250101T000000Z-{len(self.calls)}"
        (run_dir / "series").mkdir(parents=True)
        if on_run_dir is not None:   # as the runner: the directory told the moment it exists
            on_run_dir(run_dir)
        summary = make_summary(
            name=cfg["name"], devices=n, offered_rps=n * 1000 / rit,
            throughput_rps=n * 1000 / rit * 0.99, rt_p50_ms=rt, rt_mean_ms=rt * 1.1,
            rt_p95_ms=rt * 2, verdict=status, ge_kept_up=status != "ge_bottleneck",
            late_share=0.001 * n, ks_tol=0.01, lag_p99_ms=0.040,
            rd_devices=0.1 * (1 + load) if self.rd else None,
            rd_cd_calibration=0.05 if self.rd else None,
            rd_cd_test=0.05 * (1 + 3 * (status == "contention")) if self.rd else None,
            host_cpu_busy_pct=min(100, 10 + load * 50) if self.cpu else None)
        rd = RunDir(run_dir)
        rd.write_summary(summary)
        make_plan(config_from_dict({**cfg, "placement": {"affinity": aff}}),
                  cores=range(6)).write(rd.plan_json)
        rd.write_run(RunRecord(name=cfg["name"], cd=CdRecord(service_time_us=5000, mode="busy",
                                                             interval_s=0.5),
                               test=TestWindow(start_mono_ns=0, duration_s=3)))
        rd.report_html.write_text("<html>run</html>")
        return RunResult(summary.verdict.exit_code, run_dir, summary)
