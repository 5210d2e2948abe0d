"""Network impairments end to end through ``wotbench run`` on Docker: the app backend's effect
on response times and loss, an explicit netem backend failing before anything exists, and
nothing left behind (containers, networks, qdiscs, sidecars, pumba) after a normal end and
after SIGINT."""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from e2e_support import labelled, run_dir_of
from wotbench import netimpair
from wotbench.runner.teardown.cleanup import leftover_processes

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _device_supports_impair() -> str | None:
    binary = Path(os.environ.get("WOTBENCH_DEVICE_BIN") or REPO / "wot-device" / "build" / "wot-device")
    if not binary.exists():
        return f"{binary} not built"
    r = subprocess.run([str(binary), "--help"], capture_output=True, text=True)
    return None if "--impair" in r.stdout + r.stderr else \
        "wot-device has no --impair yet (CONTRACTS §3 app-level impairments)"


NEEDS_APP = pytest.mark.skipif(_device_supports_impair() is not None,
                               reason=str(_device_supports_impair()))


def _ge_rows(rd: Path) -> list[dict]:
    with open(rd / "ge" / "ge-0" / "requests.csv") as f:
        return list(csv.DictReader(f))


def _device_name(run: dict, device_id: str) -> str:
    return next(d["name"] for d in run["devices"] if str(d["id"]) == str(device_id))


def assert_nothing_left(run: dict) -> None:
    """No container/network of the run, no process-backend child, no pumba process, no netem
    qdisc on the host, and the impairment backend says it removed everything."""
    assert labelled(run["run_id"]) == ([], [])
    assert leftover_processes(run["run_id"]) == []
    # Pumba's tc sidecars carry this label (pumba/pkg/container: sidecar ContainerCreate)
    sidecars = subprocess.run(["docker", "ps", "-a", "--filter", "label=com.gaiaadm.pumba.skip=true", "-q"],
                              capture_output=True, text=True, check=True)
    assert sidecars.stdout.strip() == ""
    pumba = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(p) == "pumba"]
    assert pumba == []
    qd = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True)
    assert "netem" not in qd.stdout
    net = run["network"]
    assert net["removed"] is True, net


def _comm(p: Path) -> str:
    try:
        return (p / "comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@NEEDS_APP
def test_app_backend_delay_and_loss(harness, tmp_path):
    h = harness("impair.yaml")
    rc = h.wait(150)
    assert rc in (0, 3), h.output
    rd = run_dir_of(tmp_path)
    run = json.loads((rd / "run.json").read_text())
    net = run["network"]
    assert net["backend"] == "app" and net["requested"] == "auto" and net["in_effect"] is True
    assert net["reasons"] and "app backend chosen" in net["reasons"][-1]
    assert list(net["devices"]) == ["far-0"]                      # near-0 and cd-node untouched
    far = net["devices"]["far-0"]
    assert far["applied"][:2] == ["--impair", "dir=egress,delay=20ms,jitter=5ms,dist=normal,loss=10%"]
    assert "delay 20" in far["describe"]

    rows = _ge_rows(rd)
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(_device_name(run, r["device"]), []).append(r)
    rt = {n: [(int(r["received_ns"]) - int(r["sent_ns"])) / 1e6 for r in rs if r["outcome"] == "ok"]
          for n, rs in by.items()}
    shift = statistics.median(rt["far-0"]) - statistics.median(rt["near-0"])
    assert 15 < shift < 26, (shift, statistics.median(rt["near-0"]))
    # egress loss: 10 % of far-0's responses never arrive (timeouts); near-0 loses none
    n = len(by["far-0"])
    lost = sum(r["outcome"] == "timeout" for r in by["far-0"])
    sd = math.sqrt(n * 0.1 * 0.9)
    assert n == 320 and abs(lost - 0.1 * n) < 4 * sd, (lost, n)
    assert sum(r["outcome"] == "timeout" for r in by["near-0"]) <= 2
    # wot-device's own count: every dropped response datagram (a separate response also has an
    # empty ACK that can be lost without a timeout), so at least the timeouts
    assert far["counters"]["dropped_out"] >= lost and far["counters"]["dropped_in"] == 0
    html = (rd / "report.html").read_text() if (rd / "report.html").exists() else ""
    if html:
        assert "app</b> backend" in html and "--impair" in html
    assert_nothing_left(run)


@pytest.mark.long   # make test-long (CI runs it after make test): a real run of 10-30 s
@NEEDS_APP
def test_sigint_removes_impairments(harness, tmp_path):
    h = harness("impair-long.yaml")
    h.wait_for("T0 in", 120)
    time.sleep(4)
    h.proc.send_signal(signal.SIGINT)
    rc = h.wait(60)
    assert rc == 130, h.output
    run = json.loads((run_dir_of(tmp_path) / "run.json").read_text())
    assert run["interrupted"] and run["network"]["backend"] == "app"
    assert (run_dir_of(tmp_path) / "devices" / "far-0" / "device-log.csv").exists()
    assert_nothing_left(run)


def test_explicit_netem_fails_before_anything_is_created(harness, tmp_path):
    ok, why = netimpair.probe_netem()
    if ok:
        pytest.skip(f"this kernel has sch_netem ({why}): the netem backend would work here")
    h = harness("impair-netem.yaml")
    rc = h.wait(60)
    assert rc == 1, h.output
    assert "netem backend: " in h.output and "sch_netem" in h.output and "network.backend: app" in h.output
    assert "Traceback" not in h.output
    root = tmp_path / "reports"
    assert not root.exists() or list(root.iterdir()) == []        # not even a run directory
    ps = subprocess.run(["docker", "ps", "-a", "--filter", "name=wb-e2e-impair-netem", "-q"],
                        capture_output=True, text=True)
    nets = subprocess.run(["docker", "network", "ls", "--filter", "name=wb-e2e-impair-netem", "-q"],
                          capture_output=True, text=True)
    assert ps.stdout.strip() == "" and nets.stdout.strip() == ""
