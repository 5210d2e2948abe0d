"""Backend choice and host checks before a run: one runtime connection, made once and shared."""
from __future__ import annotations

import pytest

from wotbench.errors import ConfigError
from wotbench.runner.commands import doctor
from wotbench.runner.prepare import inputs
from wotbench.runner.backends.docker.backend import DockerKind


class Away(Exception):
    pass


@pytest.fixture
def connects(monkeypatch):
    """Count Docker connections; ``state["up"]`` says whether the daemon answers."""
    state = {"calls": 0, "up": True}

    def fake():
        state["calls"] += 1
        if not state["up"]:
            raise Away("connection refused")
        return "client"
    monkeypatch.setattr(DockerKind, "connect", lambda self: fake())
    monkeypatch.setattr(doctor, "docker_client", fake)
    return state


def test_auto_takes_docker_when_it_answers_and_connects_once(connects):
    logged = []
    kind, explicit, conn = inputs.select_kind("auto", logged.append)
    assert (kind.name, explicit, conn, connects["calls"], logged) == ("docker", False, "client", 1, [])


def test_auto_falls_back_to_processes_with_the_old_message(connects):
    connects["up"] = False
    logged = []
    kind, explicit, conn = inputs.select_kind("auto", logged.append)
    assert (kind.name, explicit, conn) == ("process", False, None)
    assert logged == ["Docker not reachable: using the process backend"]


def test_explicit_kind_without_its_runtime_leaves_the_verdict_to_the_host_checks(connects):
    connects["up"] = False
    kind, explicit, conn = inputs.select_kind("docker", print)
    assert (kind.name, explicit, conn) == ("docker", True, None)
    with pytest.raises(ConfigError, match="unknown backend 'podman'"):
        inputs.select_kind("podman", print)


def test_host_checks_reuse_the_run_connection(connects, monkeypatch):
    monkeypatch.setattr(doctor, "check_cores", lambda s: doctor.Check("free cores", doctor.OK, ""))

    class Client:
        def info(self):
            return {"ServerVersion": "20.10.24"}

        class containers:
            @staticmethod
            def list(**kw):
                return []

        networks = containers

    checks = {c.name: c for c in doctor.run_checks(docker=True, quick=True, client=Client())}
    assert connects["calls"] == 0
    assert checks["docker"].status == doctor.OK and "20.10.24" in checks["docker"].detail
    assert checks["leftovers"].detail.startswith(("no leftovers", "0 container(s)"))


def test_host_checks_connect_once_and_name_the_problem(connects, monkeypatch):
    monkeypatch.setattr(doctor, "check_cores", lambda s: doctor.Check("free cores", doctor.OK, ""))
    connects["up"] = False
    checks = {c.name: c for c in doctor.run_checks(docker=True, quick=True)}
    assert connects["calls"] == 1
    assert checks["docker"].status == doctor.FAIL
    assert checks["docker"].detail == "Docker daemon not reachable: Away: connection refused"
    assert checks["leftovers"].detail == "Docker not reachable: nothing to check"
