"""A short run of a config with third-party components (tests/e2e/test_e2e_byo.py,
test_e2e_http_proxy.py): 3 s of test after a 2 s calibration, no collectl."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from e2e_support import Harness, run_dir_of


def run(harness_env, tmp_path: Path, cfg: dict, timeout: float = 120) -> tuple[int, Harness]:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"duration_s": 3, "seed": 3,
                                    "contention_detector": {"calibration_s": 2, "interval_s": 0.25},
                                    "monitor": {"enabled": False}, **cfg}))
    h = Harness(["run", str(path), "--out-root", str(tmp_path / "reports")], harness_env, tmp_path)
    return h.wait(timeout), h


def run_id(tmp_path: Path) -> str:
    return json.loads((run_dir_of(tmp_path) / "run.json").read_text())["run_id"]
