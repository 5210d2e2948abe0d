"""e2e fixtures: Docker availability (tests marked ``docker`` are skipped with the reason when
``docker info`` fails), the binaries (the real ones when built, else the C stand-ins under
standins/, or always with WOTBENCH_E2E_STANDINS=1), and a harness runner in a subprocess (the
harness pins itself and installs signal handlers: it must not run inside pytest)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.harness import WOTBENCH, Harness  # noqa: F401 - the e2e tests import both from here

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIGS = HERE / "configs"


def _docker_problem() -> str | None:
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


DOCKER_PROBLEM = _docker_problem()


def pytest_collection_modifyitems(config, items):
    if DOCKER_PROBLEM is None:
        return
    skip = pytest.mark.skip(reason=f"Docker not usable: {DOCKER_PROBLEM}")
    for item in items:
        if "docker" in item.keywords and str(item.fspath).startswith(str(HERE)):
            item.add_marker(skip)


def _build_standins(dest: Path) -> dict[str, str]:
    out = {}
    for src, env in (("fake_device.c", "WOTBENCH_DEVICE_BIN"), ("fake_ge.c", "WOTBENCH_GE_BIN")):
        binary = dest / src.replace(".c", "")
        subprocess.run(["gcc", "-O2", "-static", "-o", str(binary), str(HERE / "standins" / src)],
                       check=True, capture_output=True)
        out[env] = str(binary)
    return out


@pytest.fixture(scope="session")
def harness_env(tmp_path_factory) -> dict[str, str]:
    """Environment for the harness subprocess: real binaries if they exist, else stand-ins."""
    env = dict(os.environ)
    real = all((REPO / p / "build" / p).exists() for p in ("gateway-emulator", "wot-device"))
    if os.environ.get("WOTBENCH_E2E_STANDINS") or not real:
        env.update(_build_standins(tmp_path_factory.mktemp("standins")))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("COLUMNS", "120")
    return env


@pytest.fixture
def harness(harness_env, tmp_path):
    started: list[Harness] = []

    def start(config: str, *extra: str) -> Harness:
        h = Harness(["run", str(CONFIGS / config), "--out-root", str(tmp_path / "reports"),
                     *extra], harness_env, tmp_path)
        started.append(h)
        return h
    yield start
    for h in started:
        if h.proc.poll() is None:
            h.proc.kill()


def run_dir_of(tmp_path: Path) -> Path:
    dirs = [d for d in (tmp_path / "reports").iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def labelled(run_id: str) -> tuple[list[str], list[str]]:
    """Names of containers and networks still carrying ``wotbench.run=<run_id>``."""
    def ls(*cmd):
        r = subprocess.run(["docker", *cmd, "--filter", f"label=wotbench.run={run_id}",
                            "--format", "{{.Names}}" if cmd[0] == "ps" else "{{.Name}}"],
                           capture_output=True, text=True, check=True)
        return r.stdout.split()
    return ls("ps", "-a"), ls("network", "ls")
