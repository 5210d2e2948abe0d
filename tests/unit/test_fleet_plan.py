"""The wot-fleet engine's path through config and plan (wotbench.deploy.fleet, fleet_capacity):
the engine choice, refusals naming the key, the fleets' layout, addresses and ports on both
backends, and the per-fleet requirements and host limits."""
import pytest

from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.config.schema import MAX_FLEET_PER_CONTAINER
from wotbench.deploy import fleet, fleet_capacity, pods
from wotbench.deploy.plan import make_plan
from wotbench.deploy.resolve import cd_node_address, device_addresses, resolve
from wotbench.errors import ConfigError

SLEEP = {"mode": "sleep", "service_time": {"dist": "deterministic", "mean": 5},
         "rit": {"dist": "exponential", "mean": 10000}}


def cfg(*groups, **top):
    return config_from_dict({"name": "t", "devices": list(groups), **top})


def test_auto_keeps_a_run_the_process_form_carries_in_processes():
    c = cfg({"group": "a", "count": fleet.AUTO_MIN_DEVICES, **SLEEP})
    assert fleet.engine_of(c, 0) == "process"
    assert resolve(c, cores=[0, 1]).devices[0].engine == "process"


def test_auto_picks_the_engine_above_the_threshold_and_resolve_records_it():
    c = cfg({"group": "a", "count": fleet.AUTO_MIN_DEVICES + 1, **SLEEP})
    assert fleet.engine_of(c, 0) == "fleet"
    assert resolve(c, cores=[0, 1]).devices[0].engine == "fleet"


def test_auto_keeps_a_group_the_engine_cannot_carry_in_processes():
    c = cfg({"group": "a", "count": 2000, **SLEEP},
            {"group": "o", "count": 10, "cpu_quota": 0.5})
    assert [fleet.engine_of(c, i) for i in range(2)] == ["fleet", "process"]


@pytest.mark.parametrize("extra", [
    {"observe": {"period_ms": 1000}},
    {"payload_bytes": 4096},
    {"request_payload_bytes": 2048, "methods": {"PUT": 1}},
    {"network": {"delay": {"time_ms": 5}}},
])
def test_auto_keeps_observe_blockwise_and_impaired_groups_in_the_engine(extra):
    """Observe, block-wise bodies and app-level impairments are the engine's own now."""
    c = cfg({"group": "a", "count": 2000, **SLEEP, **extra})
    assert fleet.unsupported(c, 0, c.devices[0]) == []
    assert fleet.engine_of(c, 0) == "fleet"


def test_engine_fleet_with_netem_impairments_is_refused():
    """netem/pumba act on a container's interface, which an engine's devices share."""
    with pytest.raises(ConfigError, match=r"devices\[0\].engine: fleet refused, devices\[0\]"
                                          r".network: network.backend netem acts on"):
        cfg({"group": "a", "count": 10, "engine": "fleet", "network": {"delay": {"time_ms": 5}}},
            network={"backend": "netem"})


@pytest.mark.parametrize("extra, key", [
    ({"cpu_quota": 0.5}, "devices[0].cpu_quota"),
    ({"server": {"image": "x/y:1", "port": 5683}}, "devices[0].server"),
])
def test_engine_fleet_is_refused_naming_the_key_and_the_reason(extra, key):
    with pytest.raises(ConfigError) as e:
        cfg({"group": "a", "count": 10, "engine": "fleet", **extra})
    text = str(e.value)
    assert f"devices[0].engine: fleet refused, {key}" in text


def test_engine_fleet_with_dtls_is_refused():
    with pytest.raises(ConfigError, match=r"engine: fleet refused, dtls.enabled: the engine has "
                                          "no DTLS"):
        cfg({"group": "a", "count": 10, "engine": "fleet"},
            dtls={"enabled": True, "psk_key": "0123456789abcdef"})


def test_engine_fleet_carries_push():
    c = cfg({"group": "a", "count": 10, "engine": "fleet",
             "push": [{"op": "register", "target": "127.0.0.1:5683", "path": "rd",
                       "phase": "setup"}]},
            {"group": "b", "count": 1})
    assert fleet.unsupported(c, 0, c.devices[0]) == [] and fleet.engine_of(c, 0) == "fleet"


def test_an_unknown_engine_is_refused():
    with pytest.raises(ConfigError, match="engine"):
        cfg({"group": "a", "count": 10, "engine": "threads"})


def test_docker_layout_one_address_per_fleet_one_port_per_device():
    n = MAX_FLEET_PER_CONTAINER + 10          # two fleets, split evenly
    c = cfg({"group": "a", "count": n, "engine": "fleet", **SLEEP})
    addrs = device_addresses(c)
    half = (n + 1) // 2
    assert pods.group_sizes(c) == [half]
    assert {a.container for a in addrs} == {"a-fleet0", "a-fleet1"}
    assert (addrs[0].ip, addrs[0].port) == ("172.28.0.10", 5683)
    assert (addrs[half - 1].ip, addrs[half - 1].port) == ("172.28.0.10", 5683 + half - 1)
    assert (addrs[half].ip, addrs[half].port, addrs[half].container) == \
        ("172.28.0.11", 5683, "a-fleet1")
    assert len({(a.ip, a.port) for a in addrs}) == n
    assert max(a.port for a in addrs) <= 65535
    assert cd_node_address(c).ip == "172.28.0.12"     # after the two fleet addresses


def test_process_backend_layout_each_device_its_own_loopback_address():
    c = cfg({"group": "a", "count": 2000, "engine": "fleet", **SLEEP},
            network={"subnet": "127.3.0.0/16"})
    addrs = device_addresses(c)
    assert {a.container for a in addrs} == {"a-fleet0"}
    assert {a.port for a in addrs} == {5683}
    assert len({a.ip for a in addrs}) == 2000
    assert addrs[0].ip == "127.3.0.10" and addrs[1004].ip == "127.3.4.10"


def test_a_fleet_and_process_devices_in_one_run():
    c = cfg({"group": "f", "count": 3000, **SLEEP}, {"group": "p", "count": 3, "engine": "process"})
    addrs = device_addresses(c)
    assert addrs[0].container == "f-fleet0" and addrs[2999].container == "f-fleet0"
    assert [a.container for a in addrs[3000:]] == ["p-0", "p-1", "p-2"]   # not packed into pods
    assert [a.ip for a in addrs[3000:]] == ["172.28.0.11", "172.28.0.12", "172.28.0.13"]


def test_pinned_plan_puts_each_fleet_on_one_core():
    c = cfg({"group": "a", "count": 2 * MAX_FLEET_PER_CONTAINER, "engine": "fleet", **SLEEP},
            gateways={"count": 2}, placement={"reserved_os_cores": 0},
            contention_detector={"enabled": False})
    plan = make_plan(c, cores=[0, 1, 2, 3])
    reqs = fleet_capacity.requirements(c, plan)
    assert [(r.name, r.cpuset, r.loops) for r in reqs] == [("a-fleet0", "2", 1),
                                                           ("a-fleet1", "3", 1)]


def test_shared_plan_gives_a_fleet_one_loop_per_device_core():
    c = cfg({"group": "a", "count": 5000, "engine": "fleet", **SLEEP},
            placement={"reserved_os_cores": 0, "affinity": "shared"},
            contention_detector={"enabled": False})
    (r,) = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1, 2, 3]))
    assert (r.cpuset, r.loops, r.workers) == ("1-3", 3, 3)


def test_requirements_of_the_100k_example():
    c = cfg({"group": "s", "count": 100_000, **SLEEP}, gateways={"count": 2}, duration_s=60)
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    assert [r.devices for r in reqs] == [50_000, 50_000]
    r = reqs[0]
    assert r.rate_per_s == pytest.approx(5000)            # 50 000 devices at 0.1 req/s each
    assert r.log_capacity == int(5000 * 60 * fleet_capacity.LOG_HEADROOM)
    assert r.nofile == 50_000 + fleet_capacity.FDS_BASE + fleet_capacity.FDS_PER_LOOP
    assert (r.first_port, r.last_port, r.addresses) == (5683, 5683 + 49_999, 1)
    assert r.memory_bytes >= 50_000 * fleet_capacity.BYTES_PER_DEVICE
    assert fleet_capacity.problems(c, make_plan(c, cores=[0, 1])) == []


def test_one_ge_cannot_carry_100k_endpoints():
    c = cfg({"group": "s", "count": 100_000, **SLEEP})
    probs = fleet_capacity.problems(c, make_plan(c, cores=[0, 1]))
    assert any(p.startswith("gateways.count: 1 gateway emulator(s) for 100000 devices")
               and "set gateways.count: 2" in p for p in probs)


def test_a_loop_asked_for_more_than_its_planned_rate_is_refused():
    c = cfg({"group": "s", "count": 5000, "engine": "fleet", "mode": "sleep",
             "rit": {"dist": "exponential", "mean": 100}})     # 50 000 req/s on one loop
    (p,) = fleet_capacity.problems(c, make_plan(c, cores=[0, 1]))
    assert "a-fleet0" not in p and "s-fleet0 is sent 50000 requests/s over 1 loop(s)" in p


def test_process_backend_engine_devices_take_the_addresses_again_on_the_next_port():
    """Beyond the /16's addresses the engine devices reuse the engine devices' addresses (never
    another component's), in order, on port 5684: each device still its own endpoint."""
    c = cfg({"group": "rd", "count": 1, "server": {"command": ["x", "{address}"]},
             "paths": ["time"]},
            {"group": "s", "count": 70_000, "engine": "fleet", **SLEEP},
            gateways={"count": 2}, network={"subnet": "127.0.0.0/16"})
    addrs = device_addresses(c)
    rd, engine = addrs[0], addrs[1:]
    assert len({(a.ip, a.port) for a in addrs}) == len(addrs)
    room = 64256 - 1 - 1                     # the /16's layout, less the RD's and the CD node's
    assert {a.port for a in engine[:room]} == {5683} and {a.port for a in engine[room:]} == {5684}
    assert [a.ip for a in engine[room:]] == [a.ip for a in engine[:70_000 - room]]
    assert rd.ip not in {a.ip for a in engine}
    assert cd_node_address(c).ip not in {a.ip for a in addrs}
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    assert [(r.devices, r.first_port, r.last_port) for r in reqs] == [(35_000, 5683, 5683),
                                                                      (35_000, 5683, 5684)]


def test_process_backend_refuses_engine_devices_beyond_eight_ports_per_address():
    c = cfg({"group": "s", "count": 2000, "engine": "fleet", **SLEEP},
            network={"subnet": "127.0.0.0/24"})       # 245 addresses: 244 for the engine
    probs = fleet_capacity.problems(c, make_plan(c, cores=[0, 1]))
    assert any(p.startswith("devices: 2000 engine devices on the process backend take the "
                            "run's /24 loopback block's 244 free addresses on at most 8 ports")
               for p in probs), probs


def test_host_limits_name_the_limit_and_the_fix():
    c = cfg({"group": "s", "count": 20_000, "engine": "fleet", **SLEEP},
            network={"subnet": "127.0.0.0/16"})
    plan = make_plan(c, cores=[0, 1])
    host = fleet_capacity.HostFacts(mem_available_bytes=100 * 2**20, nofile_hard=4096,
                                    file_max=10_000)
    probs = fleet_capacity.problems(c, plan, host)
    assert any("GiB available" in p for p in probs)
    assert any("needs 20020 file descriptors, the hard limit its runtime gives is 4096; set "
               "per_container of its group to at most 4012" in p for p in probs)
    assert any("fs.file-max is 10000" in p for p in probs)
    roomy = fleet_capacity.HostFacts(mem_available_bytes=64 * 2**30, nofile_hard=2**20,
                                     file_max=2**24)
    assert fleet_capacity.problems(c, plan, roomy) == []


def test_auto_keeps_a_group_with_a_pod_size_in_processes():
    c = cfg({"group": "a", "count": 3000, "per_container": 8, **SLEEP})
    assert fleet.engine_of(c, 0) == "process"


def test_engines_are_sized_by_the_hard_file_descriptor_limit():
    c = cfg({"group": "s", "count": 100_000, **SLEEP}, gateways={"count": 2})
    sized, notes = fleet_capacity.size_fleets(c, 20_000)
    g = sized.devices[0]
    most = fleet_capacity.most_devices(20_000, __import__("os").cpu_count())
    assert (g.engine, g.per_container) == ("fleet", most) and most < 20_000 - 16
    assert notes and f"at most {most} devices per wot-fleet engine" in notes[0]
    reqs = fleet_capacity.requirements(sized, make_plan(sized, cores=[0, 1]))
    assert len(reqs) == -(-100_000 // most) and sum(r.devices for r in reqs) == 100_000
    assert all(r.nofile <= 20_000 for r in reqs)
    assert fleet_capacity.problems(sized, make_plan(sized, cores=[0, 1]),
                                   fleet_capacity.HostFacts(2**40, 20_000, 2**30)) == []
    assert fleet_capacity.size_fleets(c, None)[0].devices[0].per_container == "auto"


def test_an_explicit_engine_size_is_kept_and_checked():
    c = cfg({"group": "s", "count": 10_000, "engine": "fleet", "per_container": 2500, **SLEEP})
    reqs = fleet_capacity.requirements(c, make_plan(c, cores=[0, 1]))
    assert [r.devices for r in reqs] == [2500] * 4
    assert fleet_capacity.size_fleets(c, 1000)[0].devices[0].per_container == 2500


def test_the_warm_up_budget_of_engine_devices_has_no_arp_term_per_device():
    from wotbench.runner.deployment import readiness
    # 50 000 engine devices of one GE on 6 engine addresses: seconds, not the hours the
    # per-address ARP term would give them as 50 000 addresses
    budget = readiness.warmup_ms(0, 6, 50_000)
    assert budget == readiness.WARMUP_BASE_MS + 50_000 * readiness.WARMUP_PER_FLEET_ENDPOINT_US \
        // 1000
    assert budget < 15_000 < readiness.warmup_ms(50_000, 50_000)
    assert readiness.warmup_ms(1000) == readiness.warmup_ms(1000, 1000, 0)   # as before
