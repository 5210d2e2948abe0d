"""2 000 devices in one wot-fleet engine through ``wotbench run``, on Docker and as a local
process: every device answers the GE's warm-up, nothing is lost in the testbed, the engine
answered exactly what the GE sent it, the run directory has its files, and teardown leaves no
container, network or process behind (issue 29)."""
from __future__ import annotations

import json

import pytest

from e2e_support import REPO, labelled, run_dir_of
from wotbench.rundir import RunRecord
from wotbench.rundir.fleet_files import read_devices
from wotbench.runner.teardown.cleanup import leftover_processes

FLEET_BIN = REPO / "wot-device" / "build" / "wot-fleet"
GE_BIN = REPO / "gateway-emulator" / "build" / "gateway-emulator"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (FLEET_BIN.exists() and GE_BIN.exists()),
    reason=f"needs the real {FLEET_BIN.name} and {GE_BIN.name} (make build): the C stand-ins "
           "have no engine")]


def _trace(path) -> tuple[int, int]:
    """(requests, distinct devices) of a trace.csv."""
    rows = [line.split(",", 1)[0] for line in open(path)
            if line.strip() and not line.startswith(("#", "device_id"))]
    return len(rows), len(set(rows))


@pytest.mark.long
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "process"])
def test_2000_devices_in_one_engine(harness, tmp_path, backend):
    h = harness("fleet-2k.yaml", "--backend", backend)
    rc = h.wait(600)
    assert rc in (0, 3), h.output          # 3: the verdict may flag this small shared host
    rd = run_dir_of(tmp_path)
    run = RunRecord.model_validate_json((rd / "run.json").read_text())
    assert run.failures == [] and not run.interrupted, h.output
    assert run.devices == [] and [f.name for f in run.fleets] == ["s-fleet0"]
    f = run.fleets[0]
    assert (f.first_id, f.devices) == (0, 2000)
    rows = read_devices(rd / f.dir / "devices.csv")
    endpoints = {r.listen for r in rows}
    assert len(rows) == len(endpoints) == 2000
    if backend == "docker":     # one address, a port per device
        assert (f.first_port, f.last_port) == (5683, 5683 + 1999)
    else:                       # an address per device
        assert len({e.rsplit(":", 1)[0] for e in endpoints}) == 2000

    sent, targets = _trace(rd / "trace/trace.csv")
    assert targets > 1900       # at 5 requests per device, a few draw none in 10 s
    warm = json.loads((rd / "ge/ge-0/warmup.json").read_text())   # the GE pings its targets
    assert (warm["endpoints"], warm["answered"], warm["unanswered"]) == (targets, targets, [])
    ge = json.loads((rd / "ge/ge-0/summary.json").read_text())
    assert ge["requests"] == sent and sum(ge["outcomes"].values()) == sent
    engine = json.loads((rd / f.dir / "fleet-summary.json").read_text())
    assert engine["devices"] == 2000
    assert engine["requests"] == engine["responses"] == sent, engine
    assert engine["log_dropped"] == 0 and engine["overload_503"] == 0
    s = json.loads((rd / "summary.json").read_text())
    assert s["loss"]["testbed"] == 0, s["loss"]

    assert [p for p in leftover_processes() if p[1] == run.run_id] == []
    if backend == "docker":
        containers, networks = labelled(run.run_id)
        assert containers == [] and networks == [], (containers, networks)
