"""wb-warden keeps a component only while its run's lease holds (warden/src/warden.c)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from wotbench.runner.deployment.lease import Lease, lease_state, lease_text


@pytest.fixture
def warden(warden_bin) -> Path:
    return warden_bin


@pytest.fixture
def lease(tmp_path) -> Path:
    path = tmp_path / "heartbeat"
    path.write_text(lease_text("t", 0))
    return path


def _start(warden, lease, *program, stale="2", grace="1"):
    return subprocess.Popen([str(warden), "--lease", str(lease), "--stale-s", stale,
                             "--grace-s", grace, "--", *program],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_exit_code_of_program_passes_through(warden, lease):
    p = _start(warden, lease, "sh", "-c", "exit 7")
    assert p.wait(timeout=10) == 7


def test_stops_program_when_lease_not_renewed(warden, lease):
    t = time.monotonic()
    p = _start(warden, lease, "sleep", "60")
    code = p.wait(timeout=15)
    took = time.monotonic() - t
    assert code == 128 + signal.SIGTERM
    assert 1.5 < took < 6, took           # stale after 2 s, checked once a second
    assert "not renewed" in p.stderr.read()


def test_renewed_lease_keeps_program_running(warden, lease):
    p = _start(warden, lease, "sleep", "4")
    for _ in range(5):                     # renew past the 2 s staleness twice over
        time.sleep(1)
        os.utime(lease)
    assert p.wait(timeout=10) == 0


def test_removed_lease_stops_and_kills_a_program_that_ignores_sigterm(warden, lease):
    p = _start(warden, lease, "sh", "-c", "trap '' TERM; while :; do sleep 0.2; done", stale="30")
    time.sleep(0.5)
    lease.unlink()
    assert p.wait(timeout=15) == 128 + signal.SIGKILL
    err = p.stderr.read()
    assert "gone" in err and "killing it" in err


def test_deadline_in_the_lease_stops_program(warden, lease):
    lease.write_text(lease_text("t", time.monotonic_ns() + int(1e9)))
    p = _start(warden, lease, "sleep", "60", stale="30")
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    assert "deadline" in p.stderr.read()


def test_forwards_sigterm(warden, lease):
    p = _start(warden, lease, "sh", "-c", "trap 'exit 3' TERM; while :; do sleep 0.1; done",
               stale="30")
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 3


@pytest.mark.parametrize("argv", [["--lease"], ["--lease", "x", "--stale-s", "0", "--", "true"],
                                  ["--lease", "x"], ["--bogus", "1", "--", "true"]])
def test_bad_usage_is_125(warden, argv):
    p = subprocess.run([str(warden), *argv], capture_output=True, text=True, timeout=10)
    assert p.returncode == 125 and "usage" in p.stderr


def test_missing_program_is_126(warden, lease):
    p = _start(warden, lease, "/nonexistent/program")
    assert p.wait(timeout=10) == 126


def test_harness_lease_keeps_a_warden_alive_and_release_stops_it(warden, tmp_path):
    """The harness side (runner/deployment/lease.py) against the real warden."""
    lease = Lease(tmp_path / "lease", "t")
    lease.start()
    assert lease_state(lease.path) == "live"
    p = _start(warden, lease.path, "sleep", "60", stale="2")
    time.sleep(3.5)                        # past the staleness: renewals kept it alive
    assert p.poll() is None
    lease.release()
    assert lease_state(lease.path) == "gone"
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
