"""Placement rules (paper section 5) on 1, 2, 3, 4, 8 and 16 cores."""
import json
from pathlib import Path

import pytest

from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.errors import ConfigError
from wotbench.deploy.plan import cpuset_str, make_plan, parse_cpuset


def cfg(devices=20, gateways=1, affinity="pinned", reserved=1, cd=True, wait="auto", cpus="all"):
    return config_from_dict({"name": "t", "devices": [{"group": "cpu", "count": devices}],
                             "gateways": {"count": gateways, "wait": wait},
                             "contention_detector": {"enabled": cd},
                             "placement": {"affinity": affinity, "reserved_os_cores": reserved, "cpus": cpus}})


def device_cores_used(plan):
    return {c for cs in plan.devices.values() for c in parse_cpuset(cs)}


def check_invariants(plan, c):
    ge_side = set(plan.ge_cores.values()) | ({plan.cd_ge_core} if plan.cd_ge_core is not None else set())
    assert set(plan.devices) == set(c.device_names())
    assert device_cores_used(plan) <= set(plan.device_cores)
    assert set(parse_cpuset(plan.cd_node_cpuset)) == set(plan.device_cores)    # CD node feels the devices
    if len(plan.usable_cores) > 1:
        assert not ge_side & device_cores_used(plan)                             # GE cores never host devices
    assert plan.faithful == (not plan.warnings)
    json.loads(plan.to_json())


@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("affinity", ["pinned", "shared"])
def test_faithful_on_4_or_more(n, affinity):
    c = cfg(affinity=affinity)
    p = make_plan(c, cores=list(range(n)))
    check_invariants(p, c)
    assert p.faithful and p.warnings == []
    assert p.os_cores == [0] and p.ge_cores == {"ge-0": 1} and p.cd_ge_core == 2
    assert p.device_cores == list(range(3, n)) and p.ge_wait == "busy"
    if affinity == "pinned" and n > 4:
        assert p.devices["cpu-0"] == "3" and p.devices["cpu-1"] == "4"
        assert p.devices[f"cpu-{n - 3}"] == "3"                                  # round robin
    else:
        assert set(p.devices.values()) == {cpuset_str(range(3, n))}


def test_two_cores_degraded():
    c = cfg()
    p = make_plan(c, cores=[0, 1])
    check_invariants(p, c)
    assert not p.faithful
    assert p.os_cores == [0] and p.ge_cores == {"ge-0": 0} and p.cd_ge_core == 0
    assert p.device_cores == [1] and p.cd_node_cpuset == "1" and set(p.devices.values()) == {"1"}
    assert p.ge_wait == "hybrid" and p.affinity == "shared"
    text = " | ".join(p.warnings)
    assert "only 2 usable cores; a faithful plan needs 4" in text
    assert "ge-0 and the CD-GE share core 0 with the OS and harness" in text
    assert "hybrid" in text
    assert len(p.warnings) == 3


def test_busy_wait_replaced_on_shared_core():
    p = make_plan(cfg(wait="busy"), cores=[0, 1])
    assert p.ge_wait == "hybrid" and any("busy wait replaced by hybrid" in w for w in p.warnings)
    assert make_plan(cfg(wait="hybrid"), cores=range(8)).ge_wait == "hybrid"
    assert make_plan(cfg(wait="hybrid"), cores=range(8)).faithful           # a user's choice on own cores
    # a resolved config (wait already 'hybrid') keeps the compromise listed
    p = make_plan(cfg(wait="hybrid"), cores=[0, 1])
    assert any(w.startswith("GE wait is hybrid") for w in p.warnings) and len(p.warnings) == 3


def test_three_cores_ge_keeps_its_core():
    c = cfg()
    p = make_plan(c, cores=[0, 1, 2])
    check_invariants(p, c)
    assert p.ge_cores == {"ge-0": 1} and p.cd_ge_core == 0 and p.device_cores == [2]
    assert any("the CD-GE shares core 0 with the OS" in w for w in p.warnings)


def test_many_gateways_short_of_cores():
    c = cfg(gateways=3)
    p = make_plan(c, cores=range(4))
    check_invariants(p, c)
    assert p.ge_cores == {"ge-0": 1, "ge-1": 2, "ge-2": 1} and p.cd_ge_core == 0 and p.device_cores == [3]
    assert any("ge-0 and ge-2 share core 1" in w for w in p.warnings)
    p = make_plan(c, cores=range(8))
    assert p.faithful and p.ge_cores == {"ge-0": 1, "ge-1": 2, "ge-2": 3} and p.cd_ge_core == 4


def test_one_core():
    c = cfg()
    p = make_plan(c, cores=[0])
    assert not p.faithful and p.ge_cores == {"ge-0": 0} and p.device_cores == [0]
    assert "only 1 usable core" in p.warnings[0]


def test_cpus_restrict_and_unavailable():
    p = make_plan(cfg(cpus=[2, 3, 5, 7]), cores=range(8))
    assert p.usable_cores == [2, 3, 5, 7] and p.os_cores == [2] and p.ge_cores == {"ge-0": 3}
    assert p.cd_ge_core == 5 and p.device_cores == [7] and p.faithful
    with pytest.raises(ConfigError) as e:
        make_plan(cfg(cpus=[0, 9]), cores=range(4))
    assert e.value.problems == ["placement.cpus: core(s) 9 not available on this host (available: 0-3)"]


def test_compromises_listed():
    p = make_plan(cfg(cd=False, reserved=0), cores=range(8))
    assert not p.faithful and p.cd_ge_core is None and p.cd_node_cpuset is None
    assert any("contention detector disabled" in w for w in p.warnings)
    assert any("reserved_os_cores is 0" in w for w in p.warnings)
    assert p.os_cores == [] and p.ge_cores == {"ge-0": 0}


def test_this_host_and_contract_keys():
    p = make_plan(load_config(Path(__file__).resolve().parents[2] / "configs" / "20dev.yaml"))
    d = json.loads(p.to_json())
    assert set(d) == {"cores_total", "usable_cores", "os_cores", "ge_cores", "cd_ge_core", "device_cores",
                      "cd_node_cpuset", "proxy_cpuset", "devices", "ge_wait", "ge_spin_us", "affinity", "faithful",
                      "warnings"}


def test_cpuset_format():
    assert cpuset_str([5, 1, 2, 3]) == "1-3,5" and parse_cpuset("1-3,5") == [1, 2, 3, 5]


def test_ges_sharing_a_core_spin_less_when_they_would_spin_most_of_it():
    """fleet-100k on 2 cores: 2 GEs at 5 000 req/s each share core 0; at 200 µs each would
    spin nearly all the time, so they spin 50 µs. A light run keeps the 200 µs; GEs on cores of
    their own (busy wait) keep the default; a config's gateways.spin_us wins over the plan."""
    from wotbench.deploy.plan import GE_SPIN_US, SHARED_GE_SPIN_US
    from wotbench.deploy.resolve import resolve
    from wotbench.runner.deployment.components import GeRun
    heavy = config_from_dict({"name": "t", "devices": [
        {"group": "m", "count": 100000, "rit": {"dist": "exponential", "mean": 10000}}],
        "gateways": {"count": 2}})
    light = config_from_dict({"name": "t", "devices": [
        {"group": "m", "count": 100, "rit": {"dist": "exponential", "mean": 1000}}],
        "gateways": {"count": 2}})
    assert make_plan(heavy, cores=[0, 1]).ge_spin_us == SHARED_GE_SPIN_US == 50
    assert make_plan(light, cores=[0, 1]).ge_spin_us == GE_SPIN_US == 200
    assert make_plan(heavy, cores=range(8)).ge_wait == "busy"
    assert make_plan(heavy, cores=range(8)).ge_spin_us == GE_SPIN_US
    r = resolve(heavy, make_plan(heavy, cores=[0, 1]))
    assert (r.gateways.wait, r.gateways.spin_us) == ("hybrid", 50)
    heavy.gateways.spin_us = 120
    assert resolve(heavy, make_plan(heavy, cores=[0, 1])).gateways.spin_us == 120
    ge = GeRun(name="ge-0", role="ge", cpu=0, trace=Path("t"), out_dir=Path("o"),
               stdout=Path("s"), spin_us=50)
    a = ge.args("t.csv", "out")
    assert a[a.index("--spin-us") + 1] == "50"
    assert "--spin-us" not in GeRun(name="cd-ge", role="cd-ge", cpu=0, trace=Path("t"),
                                    out_dir=Path("o"), stdout=Path("s")).args("t.csv", "out")
