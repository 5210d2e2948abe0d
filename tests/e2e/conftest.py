"""e2e fixtures: Docker availability (tests marked ``docker`` are skipped with the reason when
``docker info`` fails), the binaries (the real ones when built, else the C stand-ins under
standins/, or always with WOTBENCH_E2E_STANDINS=1), and a harness runner in a subprocess (the
harness pins itself and installs signal handlers: it must not run inside pytest). What the
test modules share lives in ``e2e_support``."""
from __future__ import annotations

import os

import pytest

from e2e_support import CONFIGS, HERE, REPO, Harness, build_standins, docker_problem

DOCKER_PROBLEM = docker_problem()


def pytest_collection_modifyitems(config, items):
    if DOCKER_PROBLEM is None:
        return
    skip = pytest.mark.skip(reason=f"Docker not usable: {DOCKER_PROBLEM}")
    for item in items:
        if "docker" in item.keywords and str(item.fspath).startswith(str(HERE)):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def harness_env(tmp_path_factory) -> dict[str, str]:
    """Environment for the harness subprocess: real binaries if they exist, else stand-ins."""
    env = dict(os.environ)
    real = all((REPO / p / "build" / p).exists() for p in ("gateway-emulator", "wot-device"))
    if os.environ.get("WOTBENCH_E2E_STANDINS") or not real:
        env.update(build_standins(tmp_path_factory.mktemp("standins")))
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
