"""The coordinator's split step with agents on socket pairs (no Docker): each cell's share
carries its lines of a recorded trace, a node left without devices stands down, and a node
whose cores cannot carry the plan is named with the fix."""
from __future__ import annotations

import socket

import pytest
import yaml

from test_cluster_trace_targets import CELLS_90, _ids, _recorded
from wotbench.distributed import wire
from wotbench.configfile.yaml_loader import load_config
from wotbench.errors import EnvironmentProblem
from wotbench.distributed import agents as ag
from wotbench.distributed.coordinator import Coordinator
from wotbench.rundir import MergedRunDir


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        theirs = socket.create_connection(server.getsockname())
        mine, _ = server.accept()
    return mine, theirs


def _coordinator(config, tmp_path, nodes, cores=(0, 1, 2, 3)):
    c = Coordinator(config, tmp_path)
    c.dir, c.run_id = tmp_path, "r1"
    peers = {}
    for n in nodes:
        mine, theirs = _tcp_pair()
        c.agents[n] = ag.Agent(wire.Conn(mine), wire.Hello(node=n, cores=list(cores)))
        peers[n] = wire.Conn(theirs)
    return c, peers


def test_each_share_carries_its_trace_lines_and_a_node_without_devices_stands_down(tmp_path):
    config = _recorded(tmp_path)
    whole = (tmp_path / "rec" / "trace.csv").read_text()
    nodes = [f"n{i:02d}" for i in range(10)]        # 10 nodes, 9 pods of 10 devices
    c, peers = _coordinator(config, tmp_path, nodes)
    sp = c._split(load_config(config))
    assert len(sp.cells) == 9 and MergedRunDir(tmp_path).split_json.is_file()
    [idle] = [n for n in nodes if n not in c.agents]
    assert isinstance(peers[idle].recv(5), wire.Abort) and isinstance(peers[idle].recv(5),
                                                                      wire.Bye)
    seen = []
    for s in sp.cells:
        m = peers[s.node].recv(5)
        assert isinstance(m, wire.Share) and m.devices == s.devices and len(m.devices) == 10
        assert set(_ids(m.trace_csv)) == set(s.device_ids)       # its lines, global ids
        assert {f"sensor-{i}.csv" for i in range(90)} <= set(m.resources)   # every one
        seen += _ids(m.trace_csv)
    assert sorted(seen) == sorted(_ids(whole))


def test_a_node_whose_cores_cannot_carry_the_plan_is_named_with_the_fix(tmp_path):
    raw = yaml.safe_load(CELLS_90.read_text())
    raw["placement"] = {"cpus": [5, 6]}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    c, _ = _coordinator(config, tmp_path, ["wbc-n1"], cores=(0, 1))
    with pytest.raises(EnvironmentProblem) as e:
        c._split(load_config(config))
    assert str(e.value).startswith("wbc-n1 cannot plan its cell on its cores 0-1: placement.cpus")
    assert "Fix: placement.cpus: all" in str(e.value)
