"""Each cell of a run across hosts runs its share's part of the run's gateway emulators
(wotbench.distributed.cellges), not all of them: the coordinator's split decides it, the share
carries it, the cell runs with it, its trace is split over its own GEs with every device in
exactly one, and the cell's pre-flight counts its own GEs' endpoints and engines."""
from __future__ import annotations

import math
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import yaml

from test_cluster_coordinator_split import _coordinator
from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.deploy import fleet_capacity
from wotbench.deploy.plan import make_plan
from wotbench.deploy.resolve import device_addresses
from wotbench.distributed import cell as cell_mod
from wotbench.distributed import wire
from wotbench.distributed.cellges import cell_gateways, with_gateways
from wotbench.distributed.split import Cell, Unit, split
from wotbench.distributed.split import units_from_config as split_units
from wotbench.workload.generate import write_trace

CELLS_90 = Path(__file__).resolve().parents[2] / "tests" / "cluster" / "configs" / "cells-90.yaml"


def _units(sizes, rate_per_device=1.0):
    out, i = [], 0
    for k, n in enumerate(sizes):
        ids = tuple(range(i, i + n))
        out.append(Unit(container=f"g-fleet{k}", devices=tuple(f"g-{j}" for j in ids),
                        device_ids=ids, load=n * rate_per_device * 0.005,
                        rate=n * rate_per_device, endpoints=n, fleet=True))
        i += n
    return out


def test_the_10e6_run_on_four_nodes_gives_each_cell_its_part_not_all_17():
    # the measured split of 10^6 devices (docs/FLEET.md): every cell ran all 17 GEs before
    shares = [263_160, 263_160, 263_152, 210_528]
    ges = [cell_gateways(17, n, 10**6, n * 1e-3, 1000.0) for n in shares]
    assert ges == [5, 5, 5, 4]
    # no cell's GE addresses more endpoints than one of the run's GEs on one host
    assert all(math.ceil(n / g) <= math.ceil(10**6 / 17) for n, g in zip(shares, ges))


def test_at_least_one_at_most_the_runs_count_and_the_rate_counts_too():
    assert cell_gateways(8, 0, 100, 0.0, 50.0) == 1          # nothing sent to it: one GE
    assert cell_gateways(8, 100, 100, 50.0, 50.0) == 8       # the whole run: every GE
    assert cell_gateways(8, 25, 100, 12.5, 50.0) == 2        # a quarter of both
    assert cell_gateways(8, 10, 100, 40.0, 50.0) == 7        # few devices, most of the rate
    assert cell_gateways(17, 250_000, 10**6, 250.0, 1000.0) == 5   # 4.25: not 4 (a float)


def test_the_split_gives_each_cell_its_gateways_from_its_share():
    cells = [Cell(node=f"n{k}", device_cores=1) for k in range(4)]
    s = split(_units([100] * 8), cells, gateways=6)
    assert [len(c.devices) for c in s.cells] == [200] * 4
    assert [(c.endpoints, c.rate, c.gateways) for c in s.cells] == [(200, 200.0, 2)] * 4
    assert [c.gateways for c in split(_units([100] * 8), cells).cells] == [1] * 4


def test_a_cells_trace_is_split_over_its_own_ges_each_device_in_exactly_one(tmp_path):
    raw = yaml.safe_load(CELLS_90.read_text())
    raw["gateways"] = {"count": 6}
    cfg = config_from_dict(raw)
    addrs = device_addresses(cfg)
    ids = {a.id for a in addrs if a.container in ("sensor-pod1", "sensor-pod4")}   # 20 of 90
    n = cell_gateways(6, len(ids), 90, float(len(ids)), 90.0)
    assert n == 2
    mine = with_gateways(cfg, n)
    assert mine.gateways.count == 2 and cfg.gateways.count == 6   # a copy
    run_wide = write_trace(cfg, tmp_path / "all", only=ids)
    here = write_trace(mine, tmp_path / "cell", only=ids)
    assert here.ge_files == ["ge-0.csv", "ge-1.csv"] and len(run_wide.ge_files) == 6
    whole = (tmp_path / "all" / "trace.csv").read_text()
    assert (tmp_path / "cell" / "trace.csv").read_text() == whole   # the same requests
    per_ge = [(tmp_path / "cell" / f).read_text().splitlines()[1:] for f in here.ge_files]
    owner = {}
    for k, rows in enumerate(per_ge):
        for row in rows:
            assert owner.setdefault(int(row.split(",", 1)[0]), k) == k   # one GE per device
    assert set(owner) == ids
    assert sorted(r for rows in per_ge for r in rows) == sorted(whole.splitlines()[1:])


def test_the_coordinator_sends_each_cell_its_gateways(tmp_path):
    raw = yaml.safe_load(CELLS_90.read_text())
    raw["gateways"] = {"count": 6}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    c, peers = _coordinator(config, tmp_path, ["a", "b", "c"])
    sp = c._split(load_config(config))
    got = {n: peers[n].recv(5) for n in peers}
    assert {n: (m.gateways, len(m.devices)) for n, m in got.items()} == \
        {s.node: (s.gateways, len(s.devices)) for s in sp.cells} == \
        {"a": (2, 30), "b": (2, 30), "c": (2, 30)}


def test_the_cell_runs_with_its_part_of_the_gateways(tmp_path, monkeypatch):
    seen = {}

    class FakeRunner:
        def __init__(self, config, out_root, backend, cell, cfg):
            seen["count"], seen["devices"] = cfg.gateways.count, cell.devices

        def execute(self):
            return SimpleNamespace(error=None, interrupted=None, aborted=False, exit_hint=0,
                                   run_dir=None)
    monkeypatch.setattr(cell_mod, "Runner", FakeRunner)
    monkeypatch.setattr(cell_mod, "_host_visible_warden", lambda out: None)
    monkeypatch.setattr(cell_mod.Cell, "preflight", lambda self, cfg, devices: None)
    raw = yaml.safe_load(CELLS_90.read_text())
    raw["gateways"] = {"count": 6}
    a, b = socket.socketpair()
    mine, theirs = wire.Conn.__new__(wire.Conn), wire.Conn.__new__(wire.Conn)
    mine.sock, mine._wlock, theirs.sock, theirs._wlock = a, threading.Lock(), b, threading.Lock()
    try:
        theirs.send(wire.Bye())        # ends the cell's wait after its run
        cell_mod.Cell(mine, "n1", tmp_path).run(wire.Share(
            run_id="r1", config_yaml=yaml.safe_dump(raw), config_name="c.yaml",
            devices=[f"sensor-{i}" for i in range(30)], gateways=2))
        said = [theirs.recv(5)]
        while not isinstance(said[-1], wire.Done):   # (beats while it prepared)
            said.append(theirs.recv(5))
    finally:
        a.close()
        b.close()
    assert seen == {"count": 2, "devices": frozenset(f"sensor-{i}" for i in range(30))}
    assert said[-1].ok


def test_a_cells_fleet_check_counts_its_own_ges_endpoints_and_engines():
    c = config_from_dict({"name": "t", "gateways": {"count": 2}, "devices": [
        {"group": "s", "count": 70_000, "engine": "fleet", "per_container": 5000,
         "mode": "sleep", "service_time": {"dist": "deterministic", "mean": 5},
         "rit": {"dist": "exponential", "mean": 10000}}]})
    plan = make_plan(c, cores=[0, 1])
    share = frozenset(f"s-{i}" for i in range(35_000))       # 7 of the 14 engines
    reqs = fleet_capacity.requirements(c, plan)
    assert len(reqs) == 14 and [r.first_id for r in fleet_capacity.of_share(c, reqs, share)] \
        == [5000 * k for k in range(7)]
    cell = with_gateways(c, cell_gateways(2, 35_000, 70_000, 3500.0, 7000.0))
    assert cell.gateways.count == 1
    assert fleet_capacity.problems(cell, make_plan(cell, cores=[0, 1]), share=share) == []
    # without its share the cell's one GE would be asked for the whole run's 70 000
    assert any(p.startswith("gateways.count: 1 gateway emulator(s) for 70000 devices")
               for p in fleet_capacity.problems(cell, make_plan(cell, cores=[0, 1])))


def test_both_ges_of_every_cell_get_about_half_of_its_requests(tmp_path):
    # equal single-device units go round robin: cell k holds the ids = k mod 4, so id mod 2
    # (its 2 GEs) is the same for every device of a cell; the rank in its share is not
    raw = yaml.safe_load(CELLS_90.read_text())
    raw["devices"][0].update(count=40, per_container=1)
    raw["gateways"] = {"count": 8}
    cfg = config_from_dict(raw)
    cells = [Cell(node=f"n{k}", device_cores=1) for k in range(4)]
    sp = split(split_units(cfg), cells, gateways=8)
    assert [c.gateways for c in sp.cells] == [2] * 4
    assert len({i % 2 for i in sp.cells[0].device_ids}) == 1    # the case the fault hit
    for s in sp.cells:
        out = tmp_path / s.node
        got = write_trace(with_gateways(cfg, s.gateways), out, only=set(s.device_ids))
        rows = [len((out / f).read_text().splitlines()) - 1 for f in got.ge_files]
        devices = [{int(r.split(",", 1)[0]) for r in (out / f).read_text().splitlines()[1:]}
                   for f in got.ge_files]
        assert [len(d) for d in devices] == [5, 5]                   # 10 devices, 5 each
        assert min(rows) >= 0.35 * sum(rows), (s.node, rows)
