"""What the e2e tests share, in a module of its own name: paths, Docker availability, the C
stand-ins, the harness runner (testkit.harness) and the run-directory/label lookups. (Test
modules import it as ``e2e_support``; ``from conftest import`` resolved to whichever conftest
pytest had imported first, so ``pytest tests/e2e tests/c`` failed to collect.)"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import os

import pytest
import yaml

from testkit.harness import WOTBENCH, Harness  # noqa: F401 - the e2e tests import both from here

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIGS = HERE / "configs"


def docker_problem() -> str | None:
    if not shutil.which("docker"):
        return "docker CLI not installed"
    try:
        r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "docker info timed out"
    if r.returncode != 0:
        return f"docker info failed: {(r.stderr or r.stdout).strip()[:200]}"
    return None


def build_standins(dest: Path) -> dict[str, str]:
    out = {}
    for src, env in (("fake_device.c", "WOTBENCH_DEVICE_BIN"), ("fake_ge.c", "WOTBENCH_GE_BIN")):
        binary = dest / src.replace(".c", "")
        subprocess.run(["gcc", "-O2", "-static", "-o", str(binary), str(HERE / "standins" / src)],
                       check=True, capture_output=True)
        out[env] = str(binary)
    return out


def run_dir_of(tmp_path: Path) -> Path:
    dirs = [d for d in (tmp_path / "reports").iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def finished_run(h: Harness, tmp_path: Path, timeout_s: float = 180) -> tuple[Path, list[dict]]:
    """A run that ended with its verdict (0, or 3: this small shared host may be flagged),
    without failures: (its run directory, ge-0's requests.csv rows)."""
    import csv
    from wotbench.rundir import RunRecord
    rc = h.wait(timeout_s)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    run = RunRecord.model_validate_json((rd / "run.json").read_text())
    assert run.failures == [] and not run.interrupted, h.output
    with open(rd / "ge/ge-0/requests.csv") as f:
        return rd, list(csv.DictReader(f))


def run_config(cfg: dict, env: dict, tmp_path: Path, timeout_s: float = 150
               ) -> tuple[int, Harness, Path, dict]:
    """``wotbench run`` of ``cfg`` (written to tmp_path/cfg.yaml) into tmp_path/reports: its
    exit code, the harness (its output), the run directory and summary.json as a dict."""
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    h = Harness(["run", str(path), "--out-root", str(tmp_path / "reports")], env, tmp_path)
    rc = h.wait(timeout_s)
    rd = run_dir_of(tmp_path)
    return rc, h, rd, json.loads((rd / "summary.json").read_text())


def labelled(run_id: str) -> tuple[list[str], list[str]]:
    """Names of containers and networks still carrying ``wotbench.run=<run_id>``."""
    def ls(*cmd):
        r = subprocess.run(["docker", *cmd, "--filter", f"label=wotbench.run={run_id}",
                            "--format", "{{.Names}}" if cmd[0] == "ps" else "{{.Name}}"],
                           capture_output=True, text=True, check=True)
        return r.stdout.split()
    return ls("ps", "-a"), ls("network", "ls")


# HTTP runs need nginx and the real gateway emulator (the stand-in speaks no HTTP)
NEEDS_HTTP = [
    pytest.mark.skipif(not shutil.which("nginx"), reason="nginx not installed (apt-get install nginx)"),
    pytest.mark.skipif(bool(os.environ.get("WOTBENCH_E2E_STANDINS")) or not
                       (Path(__file__).resolve().parents[2] / "gateway-emulator" / "build" /
                        "gateway-emulator").exists(),
                       reason="needs the real gateway emulator (the stand-in speaks no HTTP)"),
]


def nginx_run(name: str, duration_s: float, rit_ms: float, **top) -> dict:
    """A short process-backend run of two nginx devices (configs/http-nginx.conf), no CD, no
    collectl: the HTTP end-to-end tests add their keys (``top``)."""
    nginx = ["nginx", "-e", "stderr", "-c", "{config}", "-p", "{scratch}/"]
    return {"name": name, "backend": "process", "duration_s": duration_s, "seed": 3,
            "contention_detector": {"enabled": False}, "monitor": {"enabled": False},
            "devices": [{"group": "web", "count": 2, "protocol": "http",
                         "server": {"command": nginx, "config_template":
                                    str(Path(__file__).resolve().parents[2] / "configs" /
                                        "http-nginx.conf")},
                         "paths": ["sensors/t"],
                         "rit": {"dist": "deterministic", "mean": rit_ms}}], **top}
