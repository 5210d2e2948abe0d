"""Exact command lines: tc netem (netem backend), pumba, and the wot-device --impair strings."""
import pytest

from wotbench.netimpair import DeviceTarget, resolve_impairments
from wotbench.netimpair.backends.app import AppBackend, app_args, ge_spec, impair_spec
from wotbench.netimpair.backends.pumba import PumbaBackend, subcommands
from wotbench.netimpair.cmdrun import shell_join
from wotbench.netimpair.model import Impairment
from wotbench.netimpair.tc import NetnsRef, apply_commands, netem_args, remove_commands

IMPAIRMENTS = {
    "delay": ({"delay": {"time_ms": 40, "jitter_ms": 5, "correlation": 25, "distribution": "normal"}},
              "delay 40ms 5ms 25% distribution normal"),
    "delay_us": ({"delay": {"time_ms": 0.5, "jitter_ms": 0.125}}, "delay 500us 125us"),
    "delay_uniform": ({"delay": {"time_ms": 20, "jitter_ms": 5, "distribution": "uniform"}}, "delay 20ms 5ms"),
    "loss": ({"loss": {"percent": 2, "correlation": 25}}, "loss random 2% 25%"),
    "loss_ge": ({"loss": {"gilbert_elliott": {"p": 1, "r": 30, "one_minus_h": 100, "one_minus_k": 0.5}}},
                "loss gemodel 1% 30% 100% 0.5%"),
    "rate": ({"rate": "250kbit"}, "rate 250kbit"),
    "duplicate": ({"duplicate": {"percent": 1}}, "duplicate 1%"),
    "corrupt": ({"corrupt": {"percent": 0.1, "correlation": 5}}, "corrupt 0.1% 5%"),
}


@pytest.mark.parametrize("name", list(IMPAIRMENTS))
def test_netem_args_per_kind(name):
    raw, expected = IMPAIRMENTS[name]
    assert " ".join(netem_args(Impairment.model_validate(raw))) == expected


def test_netem_args_all_kinds_in_one_qdisc():
    imp = Impairment.model_validate({"delay": {"time_ms": 40, "jitter_ms": 5, "distribution": "pareto"},
                                     "loss": {"percent": 2}, "rate": "1mbit",
                                     "duplicate": {"percent": 1}, "corrupt": {"percent": 0.1}})
    assert " ".join(netem_args(imp)) == \
        "delay 40ms 5ms distribution pareto loss random 2% rate 1mbit duplicate 1% corrupt 0.1%"


def test_tc_commands_egress_ingress_both():
    ref = NetnsRef(pid=4242)
    q = ["netem", "delay", "20ms"]
    egress = [shell_join(c) for c in apply_commands(ref, "eth0", "egress", q)]
    assert egress == ["nsenter -t 4242 -n tc qdisc add dev eth0 root netem delay 20ms"]
    ingress = [shell_join(c) for c in apply_commands(ref, "eth0", "ingress", q)]
    assert ingress == [
        "nsenter -t 4242 -n ip link add wbifb0 type ifb",
        "nsenter -t 4242 -n ip link set dev wbifb0 up",
        "nsenter -t 4242 -n tc qdisc add dev eth0 handle ffff: ingress",
        "nsenter -t 4242 -n tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 "
        "action mirred egress redirect dev wbifb0",
        "nsenter -t 4242 -n tc qdisc add dev wbifb0 root netem delay 20ms",
    ]
    both = [shell_join(c) for c in apply_commands(ref, "eth0", "both", q)]
    assert both == egress + ingress
    assert [shell_join(c) for c in remove_commands(NetnsRef(name="t1"), "eth0")] == [
        "ip netns exec t1 tc qdisc del dev eth0 root",
        "ip netns exec t1 tc qdisc del dev eth0 ingress",
        "ip netns exec t1 ip link del wbifb0",
    ]


PUMBA_HEAD = ("pumba --log-level info netem --duration 90s --interface eth0 --tc-image wotbench-tc:abc "
              "--pull-image=false ")


@pytest.mark.parametrize("name, expected", [
    ("delay", "delay --time 40 --jitter 5 --correlation 25 --distribution normal"),
    ("delay_uniform", "delay --time 20 --jitter 5 --correlation 0"),
    ("loss", "loss --percent 2 --correlation 25"),
    ("loss_ge", "loss-gemodel --pg 1 --pb 30 --one-h 100 --one-k 0.5"),
    ("rate", "rate --rate 250kbit"),
    ("duplicate", "duplicate --percent 1 --correlation 0"),
    ("corrupt", "corrupt --percent 0.1 --correlation 5"),
])
def test_pumba_command_lines(name, expected):
    plan = resolve_impairments([{"group": "s", "count": 1, "network": IMPAIRMENTS[name][0]}])
    b = PumbaBackend(plan)
    assert b.check() == []
    cmds = b.commands([DeviceTarget("s-0", container="wb-s-0")], duration_s=60, tc_image="wotbench-tc:abc")
    assert [shell_join(c) for c in cmds["s-0"]] == [PUMBA_HEAD + expected + " wb-s-0"]


def test_pumba_one_process_per_kind():
    imp = Impairment.model_validate({"delay": {"time_ms": 10}, "loss": {"percent": 3}})
    assert [k for k, _ in subcommands(imp)] == ["delay", "loss"]


def test_pumba_rejects_fractional_ms_combinations_and_ingress():
    plan = resolve_impairments([{"group": "s", "count": 1, "network": {
        "delay": {"time_ms": 20.5, "jitter_ms": 0.25}, "loss": {"percent": 1}, "direction": "both",
        "rate": "1.5mbit"}}])
    p = PumbaBackend(plan).check()
    assert ("devices[0].network.delay.time_ms: 20.5 ms is not a whole number of milliseconds; Pumba takes "
            "integer milliseconds only (use 20 or 21, or network.backend: netem)") in p
    assert any(x.startswith("devices[0].network.delay.jitter_ms: 0.25 ms is not a whole number") for x in p)
    assert ("devices[0].network: Pumba runs one root netem qdisc per container, so delay + loss + rate cannot be "
            "combined on s-0 (the second fails 'Exclusivity flag on'); keep one kind or use network.backend: netem") in p
    assert any(x.startswith("devices[0].network.direction: Pumba's netem shapes egress only") for x in p)
    assert any(x.startswith("devices[0].network.rate: 1.5mbit is not a rate Pumba takes") for x in p)


def test_app_argument_strings():
    imp = Impairment.model_validate({"delay": {"time_ms": 20, "jitter_ms": 5, "distribution": "normal"},
                                     "loss": {"percent": 10}, "direction": "both"})
    assert impair_spec(imp) == "dir=both,delay=20ms,jitter=5ms,dist=normal,loss=10%"
    assert ge_spec(imp) is None
    full = Impairment.model_validate({"delay": {"time_ms": 0.25, "jitter_ms": 0.1, "correlation": 30},
                                      "loss": {"gilbert_elliott": {"p": 1, "r": 25}}, "rate": "250kbit",
                                      "duplicate": {"percent": 1, "correlation": 2},
                                      "corrupt": {"percent": 0.5}, "direction": "ingress"})
    assert impair_spec(full) == ("dir=ingress,delay=250us,jitter=100us,delay-corr=30%,dist=uniform,"
                                 "rate=250kbit,dup=1%,dup-corr=2%,corrupt=0.5%")
    assert ge_spec(full) == "p=1%,r=25%,1-h=100%,1-k=0%"
    args = app_args(full, seed=7, device="cpu-0")
    assert args[:4] == ["--impair", impair_spec(full), "--impair-ge", ge_spec(full)]
    assert args[4] == "--impair-seed" and args[5] == app_args(full, 7, "cpu-0")[5] != app_args(full, 7, "cpu-1")[5]


def test_app_backend_record_and_noop_remove():
    plan = resolve_impairments([{"group": "cpu", "count": 2, "network": {"loss": {"percent": 2}}}])
    b = AppBackend(plan, seed=3)
    assert b.device_args("cpu-9") == []
    rec = b.apply()
    assert rec["backend"] == "app"
    assert rec["devices"]["cpu-1"]["applied"][:2] == ["--impair", "dir=egress,loss=2%"]
    assert b.remove() == b.remove() == {"removed": True, "devices": []}
