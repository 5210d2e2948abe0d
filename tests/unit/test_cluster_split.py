"""wotbench.distributed.split: whole pods to cells, balanced per device core, deterministic."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from wotbench.distributed.split import Cell, Unit, split, units_from_config
from wotbench.config.schema import Config
from wotbench.errors import EnvironmentProblem


def _units(loads, size=3):
    out, i = [], 0
    for k, load in enumerate(loads):
        ids = tuple(range(i, i + size))
        out.append(Unit(container=f"g-pod{k}", devices=tuple(f"g-{j}" for j in ids),
                        device_ids=ids, load=load))
        i += size
    return out


def test_every_device_in_exactly_one_cell_with_its_global_id_and_pods_whole():
    units = _units([1.0] * 10)
    s = split(units, [Cell(node="a", device_cores=1), Cell(node="b", device_cores=1),
                      Cell(node="c", device_cores=1)])
    ids = [i for c in s.cells for i in c.device_ids]
    assert sorted(ids) == list(range(30))
    for c in s.cells:   # each pod's devices all in the cell that took the pod
        for u in units:
            assert (u.container in c.containers) == (set(u.device_ids) <= set(c.device_ids))
        assert c.devices == [f"g-{i}" for i in c.device_ids] and c.device_ids == sorted(c.device_ids)
    assert sorted(len(c.containers) for c in s.cells) == [3, 3, 4]


def test_load_follows_device_cores():
    s = split(_units([1.0] * 12), [Cell(node="big", device_cores=3),
                                   Cell(node="small", device_cores=1)])
    assert s.share("big").load == 9.0 and s.share("small").load == 3.0 and s.spread == 0.0


def test_heavy_pods_are_spread_before_light_ones():
    # LPT: 5, 4, 3, 3, 3 on two equal cells -> {5, 3} and {4, 3, 3}: 8 / 10, not 11 / 7
    s = split(_units([3.0, 5.0, 3.0, 4.0, 3.0]), [Cell(node="a", device_cores=1),
                                                  Cell(node="b", device_cores=1)])
    assert sorted(c.load for c in s.cells) == [8.0, 10.0]
    assert s.spread == pytest.approx(10 / 9 - 1)


def test_deterministic_whatever_the_order_of_the_units():
    units = _units([0.5, 2.0, 0.5, 1.0, 1.0, 3.0, 0.25])
    cells = [Cell(node="n1", device_cores=2), Cell(node="n2", device_cores=1)]
    first = split(units, cells)
    assert split(list(reversed(units)), cells) == first == split(units, cells)


def test_zero_load_units_still_balanced_by_devices():
    s = split(_units([0.0] * 6), [Cell(node="a", device_cores=1), Cell(node="b", device_cores=1)])
    assert [len(c.devices) for c in s.cells] == [9, 9]


def test_no_cell_names_the_label_to_add():
    with pytest.raises(EnvironmentProblem, match="wotbench.cell=true"):
        split(_units([1.0]), [])


def test_a_pod_that_fits_nowhere_names_the_nodes_room_and_the_fix():
    with pytest.raises(EnvironmentProblem) as e:
        split(_units([1.0] * 4), [Cell(node="a", device_cores=1, max_devices=6),
                                  Cell(node="b", device_cores=1, max_devices=5)])
    assert "a has room for 0 more" in str(e.value) and "b has room for 2 more" in str(e.value)
    assert "add a node" in str(e.value)


def test_units_from_config_keep_pods_global_ids_and_offered_load():
    cfg = Config.model_validate({
        "name": "t", "devices": [
            {"group": "fast", "count": 200, "per_container": 4,
             "rit": {"dist": "deterministic", "mean": 100.0},
             "service_time": {"dist": "deterministic", "mean": 2.0}},
            {"group": "obs", "count": 3, "requests": False}]})
    units = units_from_config(cfg)
    fast = [u for u in units if u.devices[0].startswith("fast")]
    assert len(fast) == 50 and fast[0].devices == ("fast-0", "fast-1", "fast-2", "fast-3")
    assert fast[0].device_ids == (0, 1, 2, 3)
    assert fast[0].load == pytest.approx(4 * 10 * 0.002)      # 10 req/s x 2 ms each
    obs = [u for u in units if u.devices[0].startswith("obs")]
    assert [i for u in obs for i in u.device_ids] == [200, 201, 202]
    assert all(u.load == 0 for u in obs)


@settings(max_examples=60, deadline=None)
@given(loads=st.lists(st.floats(0, 10), min_size=1, max_size=40),
       cores=st.lists(st.integers(1, 8), min_size=1, max_size=5))
def test_lpt_bound_holds(loads, cores):
    """LPT's guarantee: the busiest cell's load per core exceeds the balanced value by at most
    the largest single unit's load per core of the smallest cell."""
    units = _units(loads, size=1)
    cells = [Cell(node=f"n{k}", device_cores=c) for k, c in enumerate(cores)]
    s = split(units, cells)
    assert sorted(i for c in s.cells for i in c.device_ids) == list(range(len(loads)))
    assert sum(c.load for c in s.cells) == pytest.approx(sum(loads))
    even = sum(loads) / sum(cores)
    worst = max(c.load_per_core for c in s.cells)
    assert worst <= even + max(loads) / min(cores) + 1e-9


def test_fleet_engines_move_whole_and_do_not_count_against_process_device_limits():
    from wotbench.configfile.yaml_loader import config_from_dict
    cfg = config_from_dict({"name": "t", "gateways": {"count": 4}, "devices": [
        {"group": "m", "count": 200_000, "engine": "fleet", "per_container": 20_000,
         "mode": "sleep", "rit": {"dist": "exponential", "mean": 10000}},
        {"group": "p", "count": 30, "engine": "process"}]})
    units = units_from_config(cfg)
    engines = [u for u in units if u.fleet]
    assert len(engines) == 10 and all(len(u.devices) == 20_000 for u in engines)
    assert sum(u.process_devices for u in units) == 30
    # nodes whose limits carry 20 process devices each take 200 000 engine devices
    s = split(units, [Cell(node=n, device_cores=1, max_devices=20) for n in "abc"])
    assert sum(len(c.devices) for c in s.cells) == 200_030
    assert all(c.process_devices <= 20 for c in s.cells)
    assert sorted(len([x for x in c.containers if "fleet" in x]) for c in s.cells) == [3, 3, 4]
    with pytest.raises(EnvironmentProblem, match="room for"):   # 30 process devices do not fit 2x10
        split(units, [Cell(node=n, device_cores=1, max_devices=10) for n in "ab"])
