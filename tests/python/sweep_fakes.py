"""A fake runner for the sweep and capacity tests: writes a synthetic run dir with summary.json
(the analysis layout, wotbench/analysis/README.md) from the derived config, no Docker involved."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import yaml

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

    def __call__(self, config_path: str, out_root: str, backend=None) -> int:
        cfg = yaml.safe_load(Path(config_path).read_text())
        self.calls.append(cfg)
        if self.fail_on:
            r = self.fail_on(cfg)
            if isinstance(r, BaseException):
                raise r
            if r:
                return int(r)
        n = sum(int(g.get("count", 1)) for g in cfg["devices"])
        rit = float(cfg["devices"][0].get("rit", {}).get("mean", 200))
        aff = cfg.get("placement", {}).get("affinity", "pinned")
        status = self.verdict(cfg)
        load = n * 1000 / rit / 400           # fraction of the host "capacity"
        rt = 5 * (1 + load) * (1.3 if aff == "shared" else 1)
        run_dir = Path(out_root) / f"{cfg['name']}-20250101T000000Z-{len(self.calls)}"
        (run_dir / "series").mkdir(parents=True)
        summary = {
            "run": {"name": cfg["name"], "devices": [f"cpu-{i}" for i in range(n)]},
            "overall": {"devices": n, "offered_rps": n * 1000 / rit, "throughput_rps": n * 1000 / rit * 0.99,
                        "response_time_ms": {"from_sent": {"p50_ms": rt, "mean_ms": rt * 1.1, "p95_ms": rt * 2}}},
            "ge_integrity": {"kept_up": status != "ge_bottleneck",
                             "per_ge": {"ge-0": {"late_share": 0.001 * n, "ks_tol": 0.01, "lag_ms": {"p99": 0.040}}}},
            "rd": ({"overall": {"rd": {"p50": 0.1 * (1 + load)}},
                    "cd": {"calibration": {"p50": 0.05}, "test": {"p50": 0.05 * (1 + 3 * (status == "contention"))}}}
                   if self.rd else None),
            "contention": {"status": "flagged" if status == "contention" else "clean"},
            "verdict": {"status": status, "reasons": [] if status == "trustworthy" else [f"fake {status}"],
                        "exit_code": 0 if status == "trustworthy" else 3},
        }
        (run_dir / "summary.json").write_text(json.dumps(summary))
        (run_dir / "plan.json").write_text(json.dumps({"affinity": aff}))
        (run_dir / "run.json").write_text(json.dumps({"cd": {"service_time_us": 5000},
                                                      "test": {"start_mono_ns": 0, "duration_s": 3}}))
        (run_dir / "report.html").write_text("<html>run</html>")
        if self.cpu:
            busy = min(100, 10 + load * 50)   # collectl's columns, as the runner's monitor writes them
            (run_dir / "monitor").mkdir()
            (run_dir / "monitor" / "cpu.csv").write_text(
                "utc_s,mono_ns,[CPU:0]Totl%,[CPU:1]Totl%\n" + "".join(f"{t},{t * 10**9},{busy},{busy}\n" for t in range(3)))
        return summary["verdict"]["exit_code"]
