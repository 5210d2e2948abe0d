"""Shared fixtures for the C programs' tests: each binary is built once per session.

Release builds (static, -O2) serve timing-sensitive tests; the ASan+UBSan builds serve the
functional and fuzz tests, so memory errors fail the suite instead of passing silently.
"""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make(directory: str, target: str | None, binary: str) -> Path:
    cmd = ["make", "--no-print-directory", "-C", str(ROOT / directory)]
    if target:
        cmd.append(target)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"building {directory} ({target or 'release'}) failed:\n{result.stderr[-4000:]}")
    path = ROOT / directory / "build" / binary
    assert path.exists(), f"{path} missing after make"
    return path


@pytest.fixture(scope="session")
def ge_bin() -> Path:
    return _make("gateway-emulator", None, "gateway-emulator")


@pytest.fixture(scope="session")
def sink_bin() -> Path:
    """The notification sink (issue 35), ASan+UBSan (tests/c/test_notify_sink.py)."""
    return _make("gateway-emulator", "build/notify-sink-asan", "notify-sink-asan")


@pytest.fixture(scope="session")
def ge_asan_bin() -> Path:
    return _make("gateway-emulator", "asan", "gateway-emulator-asan")


@pytest.fixture(scope="session")
def device_bin() -> Path:
    return _make("wot-device", None, "wot-device")


@pytest.fixture(scope="session")
def device_asan_bin() -> Path:
    return _make("wot-device", "asan", "wot-device-asan")


@pytest.fixture(scope="session")
def warden_bin() -> Path:
    return _make("warden", None, "wb-warden")


@pytest.fixture(scope="session")
def conn_fleet_bin() -> Path:
    """wot-fleet-conn (ASan): connected devices (tests/c/test_connected_*.py)."""
    from testkit.connected import build
    return build("wot-device", "wot-fleet-conn-asan")


@pytest.fixture(scope="session")
def rpcapp_bin() -> Path:
    """wot-rpcapp (ASan): the applications of connected runs."""
    from testkit.connected import build
    return build("rpc-app", "wot-rpcapp-asan")
