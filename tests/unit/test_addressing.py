"""Device addressing (wotbench.deploy.addressing): one layout for the config and the bridges."""
import ipaddress

import pytest

from wotbench.deploy import addressing
from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.deploy.resolve import cd_node_address, device_addresses
from wotbench.errors import ConfigError
from wotbench.runner.backends.docker import network


def test_2500_devices_fit_the_bridge_blocks():
    # one device per container: an address each (pods share one: test_pods.py)
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a", "count": 1500, "per_container": 1},
                                                     {"group": "b", "count": 1000, "per_container": 1}]})
    addrs = device_addresses(cfg) + [cd_node_address(cfg)]
    assert len(addrs) == 2501
    ips = [ipaddress.ip_address(a.ip) for a in addrs]
    assert len(set(ips)) == len(ips)
    plan = network.plan_networks("r", cfg.network.subnet, {a.name: a.ip for a in addrs}, ["ge-0", "cd-ge"])
    assert [str(b.subnet) for b in plan.blocks] == ["172.28.0.0/22", "172.28.4.0/22", "172.28.8.0/22"]
    for a, ip in zip(addrs, ips):
        block = ipaddress.ip_network(f"{ip}/22", strict=False)
        bridge = next(b for b in plan.blocks if a.name in b.devices)
        assert bridge.subnet == block and ip in bridge.subnet
        assert ip not in (block.network_address, block.broadcast_address, bridge.gateway)
        assert ip not in {ipaddress.ip_address(g) for g in bridge.gateways.values()}
    for b in plan.blocks:
        assert len(b.devices) + len(b.gateways) < network.MAX_BRIDGE_PORTS
    assert addrs[1003].ip == "172.28.3.245" and addrs[1004].ip == "172.28.4.10"
    assert addrs[-1].name == "cd-node" and addrs[-1].ip == "172.28.9.246"   # 2500 = 2*1004 + 492: offset 502 of 172.28.8.0


def test_up_to_1004_devices_are_consecutive_from_10():
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a", "count": 1003, "per_container": 1}]})
    ips = [a.ip for a in device_addresses(cfg)] + [cd_node_address(cfg).ip]
    assert ips == [str(ipaddress.ip_address("172.28.0.10") + i) for i in range(1004)]


def test_narrow_subnet_is_consecutive_to_the_broadcast():
    assert addressing.host_address("10.0.0.0/24", 244) == "10.0.0.254"
    with pytest.raises(ConfigError, match="too small"):
        addressing.host_address("10.0.0.0/24", 245)
    assert addressing.capacity("10.0.0.0/24") == 245
    assert addressing.capacity("172.28.0.0/16") == 64 * 1004
    assert network.bridge_address("172.28.0.0/16", 2008) == "172.28.8.10"


def test_subnet_message_counts_the_block_layout():
    with pytest.raises(ConfigError) as e:
        config_from_dict({"name": "t", "devices": [{"group": "a", "count": 2100, "per_container": 1}],
                          "network": {"subnet": "10.0.0.0/21"}})
    assert e.value.problems == ["network.subnet: 10.0.0.0/21 has room for 2008 devices (1004 per /22 "
                                "bridge block, from offset 10 of each block), 2101 needed (devices or "
                                "pods + CD node); use a larger subnet such as /16"]


@pytest.mark.parametrize("subnet", ["172.28.0.0/16", "10.0.0.0/8", "127.0.0.0/8", "192.168.7.0/24"])
def test_the_fast_layout_gives_the_ipaddress_arithmetic(subnet):
    # address_of computes with integers; the layout it must match, written with ipaddress
    net = ipaddress.ip_network(subnet)
    n, size = addressing.per_block(net), addressing.block_size(net)
    fast = addressing.address_of(subnet)
    room = addressing.capacity(net)
    for index in list(range(0, min(3000, room), 7)) + [room - 1]:
        block, pos = divmod(index, n)
        want = net.network_address + block * size + addressing.FIRST_DEVICE_OFFSET + pos
        assert fast(index) == str(want) == addressing.host_address(net, index)
    with pytest.raises(ConfigError, match="too small"):
        fast(room)


def test_the_layout_memo_follows_the_config():
    # device_addresses is remembered per config: a changed config gets its own layout, and a
    # caller that changes the list it got does not change the next caller's
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a", "count": 3, "per_container": 1}]})
    first = device_addresses(cfg)
    first.append("junk")
    assert len(device_addresses(cfg)) == 3
    cfg.network.subnet = "10.9.0.0/16"
    assert [a.ip for a in device_addresses(cfg)] == ["10.9.0.10", "10.9.0.11", "10.9.0.12"]
