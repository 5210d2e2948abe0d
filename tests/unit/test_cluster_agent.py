"""backend: swarm's pure parts: the control connection's framing and directory transfer, a
cell's slice of the trace, the runner's cell hooks, the agent image's file list, and the
coordinator's ways of losing an agent (silence, a broken connection)."""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from wotbench.distributed import agentimage, wire
from wotbench.configfile.yaml_loader import load_config
from wotbench.deploy.resolve import device_addresses
from wotbench.distributed import agents as ag
from wotbench.runner.deployment.build import share_addresses, share_ids
from wotbench.runner.during.stage import choose_t0
from wotbench.runner.main import Runner
from wotbench.runner.stages import CellSeat
from wotbench.workload.generate import generate, keep_devices, write_trace

CONFIG = Path(__file__).resolve().parents[2] / "tests" / "cluster" / "configs" / "cells-90.yaml"



@pytest.fixture
def conns():
    a, b = socket.socketpair()
    ca, cb = _conn(a), _conn(b)
    yield ca, cb
    ca.close()
    cb.close()


def _conn(s: socket.socket) -> wire.Conn:
    c = wire.Conn.__new__(wire.Conn)   # (a socketpair has no TCP_NODELAY)
    c.sock, c._wlock = s, threading.Lock()
    return c


def test_messages_keep_their_type_and_values(conns):
    a, b = conns
    a.send(wire.Hello(node="n1", cores=[0, 1], max_devices=7, missing_images=["x:1"]))
    a.send(wire.Start(t0_wall_ns=123, offset_ns=-4.5))
    h, s = b.recv(1), b.recv(1)
    assert isinstance(h, wire.Hello) and h.cores == [0, 1] and h.missing_images == ["x:1"]
    assert isinstance(s, wire.Start) and s.t0_wall_ns == 123 and s.offset_ns == -4.5


def test_silence_is_a_timeout_and_a_closed_peer_is_closed(conns):
    a, b = conns
    with pytest.raises(socket.timeout):
        b.recv(0.05)
    a.close()
    with pytest.raises(wire.Closed):
        b.recv(1)


def test_a_run_directory_travels_whole(conns, tmp_path):
    a, b = conns
    src = tmp_path / "cell"
    (src / "ge" / "ge-0").mkdir(parents=True)
    big = np.random.default_rng(1).bytes(3 * wire.CHUNK + 17)   # several chunks
    (src / "ge" / "ge-0" / "requests.csv").write_bytes(big)
    (src / "run.json").write_text("{}")
    t = threading.Thread(target=wire.send_dir, args=(a, src))
    t.start()
    a.send(wire.Beat())   # (a beat may come first: it is skipped)
    size = wire.recv_dir(b, tmp_path / "got", 10)
    t.join()
    assert size > 0
    assert (tmp_path / "got" / "ge" / "ge-0" / "requests.csv").read_bytes() == big
    assert (tmp_path / "got" / "run.json").read_text() == "{}"


def test_a_cells_slice_is_the_whole_traces_rows_of_its_devices(tmp_path):
    cfg = load_config(CONFIG)
    addrs = device_addresses(cfg)
    whole = generate(cfg)
    ids = {a.id for a in addrs if a.container in ("sensor-pod1", "sensor-pod4")}
    part = keep_devices(whole, ids, addrs)
    mask = np.isin(whole.device_id, list(ids))
    assert len(part.device_id) == mask.sum() > 0
    assert (part.send_time_us == whole.send_time_us[mask]).all()
    assert set(part.resources) == {addrs[i].name for i in ids}
    summary = write_trace(cfg, tmp_path / "t", only=ids)
    assert summary.requests == mask.sum()
    col = np.loadtxt(tmp_path / "t" / "trace.csv", delimiter=",", skiprows=1, usecols=0,
                     dtype=np.int64)
    assert set(col.tolist()) == ids


def test_the_runner_deploys_only_a_cells_share_and_takes_t0_from_outside():
    cfg = load_config(CONFIG)
    assert len(share_addresses(cfg, None)) == 90 and share_ids(cfg, None) is None
    now = time.monotonic_ns()
    assert now + 2e9 <= choose_t0(None, None, 2.0) <= time.monotonic_ns() + 2e9
    asked = []
    seat = CellSeat(node="n1", devices=frozenset({"sensor-0", "sensor-89"}),
                    t0=lambda run_dir, lead: asked.append((run_dir, lead)) or 42)
    r = Runner(CONFIG, cell=seat).state   # the seat given at construction, nothing poked in
    assert r.share == seat.devices
    assert [a.name for a in share_addresses(cfg, r.share)] == ["sensor-0", "sensor-89"]
    assert share_ids(cfg, r.share) == {0, 89}
    assert choose_t0(r.cell, r.run_dir, 3.5) == 42 and asked == [(None, 3.5)]


def test_the_agent_image_holds_python_the_runner_and_the_binaries_but_no_plotting(
        monkeypatch, tmp_path):
    fake = tmp_path / "bin"   # (make check builds no C: the binaries' paths are enough)
    fake.write_bytes(b"\x7fELF")
    monkeypatch.setattr(agentimage.binaries, "ensure_binary", lambda comp, log=None: fake)
    inside = {i for _, i in agentimage.files()}
    assert f"{agentimage.SRC_IN}/wotbench/distributed/cell.py" in inside
    assert f"{agentimage.SRC_IN}/cd_module/sizing.py" in inside   # the runner sizes the CD
    assert f"{agentimage.BIN_IN}/wb-warden" in inside
    assert any(i.endswith("/os.py") for i in inside)
    assert any(i.startswith(f"{agentimage.SITE_IN}/pandas/") for i in inside)
    assert not any("/matplotlib/" in i or "/_pytest/" in i or "/tests/" in i for i in inside)
    assert agentimage.tag().startswith(agentimage.REPO_NAME + ":")
    # each packed program is named to the runner inside by its variable (a cell with a
    # wot-fleet engine once looked for the source tree's wot-device/build/wot-fleet)
    env = agentimage.dockerfile().split("ENV ", 1)[1].split("\n", 1)[0].split()
    for comp in agentimage.PROGRAMS:
        assert f"{comp.env_var}={agentimage.BIN_IN}/{comp.name}" in env
        assert f"{agentimage.BIN_IN}/{comp.name}" in inside


def test_an_agent_that_falls_silent_or_hangs_up_is_lost_with_the_time(conns, monkeypatch):
    a, b = conns
    monkeypatch.setattr(ag, "BEAT_TIMEOUT_S", 0.2)
    agent = ag.Agent(b, wire.Hello(node="n3", cores=[0]))
    a.send(wire.Beat())
    ag.wait_done(agent, time.monotonic() + 30, lambda n: f"; Swarm: {n} down")
    assert agent.done is None and "fell silent" in agent.lost and agent.lost.endswith("n3 down")
    other = ag.Agent(a, wire.Hello(node="n2", cores=[0]))
    b.close()
    ag.wait_done(other, time.monotonic() + 30, lambda n: "")
    assert "connection broke" in other.lost


def test_a_cell_that_does_not_deploy_in_time_is_named_with_its_last_stage(conns):
    a, b = conns
    agent = ag.Agent(b, wire.Hello(node="n4", cores=[0]))

    waited = threading.Event()

    def beat():   # alive, stuck in one stage, as long as it is waited for
        while not waited.is_set():
            a.send(wire.Beat(phase="deploy: pre-flight: capacity"))
            time.sleep(0.05)
    t = threading.Thread(target=beat)
    t.start()
    ag.wait_deployed(agent, 0.4)
    waited.set()
    t.join()
    assert agent.deployed is None
    assert agent.lost == ("it did not deploy within 0 s (its last beat: deploy: pre-flight: "
                          "capacity)")


def test_a_cells_runner_reports_each_preparation_stage_and_one_host_stays_quiet():
    said = []
    seat = CellSeat(node="n1", devices=frozenset({"sensor-0"}), t0=lambda d, lead: 0,
                    progress=said.append)
    Runner(CONFIG, cell=seat).state.stage("pre-flight: plan")
    Runner(CONFIG).state.stage("pre-flight: plan")   # no seat: nothing to call, no error
    assert said == ["pre-flight: plan"]


def test_a_cells_kernel_tables_are_sized_for_its_share_not_the_whole_run(tmp_path, monkeypatch):
    # a cell cannot raise sysctls (its /proc/sys is read-only): asking for the whole run's
    # conntrack on every node stopped 200 000 devices on 4 nodes before T0
    import yaml
    from wotbench.deploy.plan import make_plan
    from wotbench.runner.preflight import check
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" /
                          "fleet-100k.yaml").read_text())
    raw["devices"][0]["count"] = 4000
    raw["devices"][0]["per_container"] = 500      # 8 engines, 2 in the share below
    p = tmp_path / "f.yaml"
    p.write_text(yaml.safe_dump(raw))
    cfg = load_config(p)
    asked = {}
    monkeypatch.setattr(check.hostlimits, "conntrack_plan",
                        lambda flows: asked.setdefault("flows", []).append(flows) or [])
    monkeypatch.setattr(check.hostlimits, "neighbour_plan",
                        lambda hosts, ges: asked.setdefault("hosts", []).append(hosts) or [])
    monkeypatch.setattr(check.hostlimits, "backlog_plan", lambda ports: [])

    class Kind:
        container_namespaces = True
    plan = make_plan(cfg, cores=[0, 1])
    check._tuning(cfg, plan, Kind())
    check._tuning(cfg, plan, Kind(), share=frozenset(f"meter-{i}" for i in range(1000)))
    assert asked["flows"] == [2 * 4000, 2 * 1000]   # 2 entries per engine device
    assert len(check.fleet_capacity.requirements(cfg, plan)) == 8
    # neighbour paths: the CD node's, and each engine's address with each of the GEs (2) that
    # send to its devices; the cell's own engines only (it counted all 8 of the run's)
    assert cfg.gateways.count == 2
    assert asked["hosts"] == [1 + 2 * 8, 1 + 2 * 2]
