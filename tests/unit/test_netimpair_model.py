"""Impairment config: keys, validation messages naming the key, per-device overrides."""
import pytest

from wotbench.netimpair import ImpairmentConfigError, parse_network, resolve_impairments
from wotbench.netimpair.model import rate_bits_per_s


def problems(raw, prefix="devices[0].network"):
    with pytest.raises(ImpairmentConfigError) as e:
        parse_network(raw, prefix)
    return e.value.problems


def test_example_from_the_issue():
    n = parse_network({"delay": {"time_ms": 40, "jitter_ms": 5, "distribution": "normal"},
                       "loss": {"percent": 2}, "direction": "egress"})
    assert n.describe() == "delay 40ms ±5ms normal, loss 2%; egress"
    assert n.kinds() == ["delay", "loss"]


def test_jitter_larger_than_delay_names_the_key():
    assert problems({"delay": {"time_ms": 20, "jitter_ms": 30}}) == [
        "devices[0].network.delay.jitter_ms: 30 ms is larger than the delay time_ms 20 ms "
        "(netem and Pumba need jitter <= delay)"]


@pytest.mark.parametrize("raw, expected", [
    ({"loss": {"percent": 120}}, "devices[0].network.loss.percent: 120 is not a percentage, expected 0..100 (loss)"),
    ({"loss": {"percent": 2, "gilbert_elliott": {"p": 1}}},
     "devices[0].network.loss: give either percent (random loss) or gilbert_elliott (burst loss), not both"),
    ({"loss": {}}, "devices[0].network.loss: give percent (random loss) or gilbert_elliott {p, r, one_minus_h, one_minus_k}"),
    ({"loss": {"gilbert_elliott": {"p": 1, "one_minus_k": -1}}},
     "devices[0].network.loss.gilbert_elliott.one_minus_k: -1 is not a percentage, expected 0..100 (Gilbert-Elliott one_minus_k)"),
    ({"delay": {"time_ms": 0}}, "devices[0].network.delay.time_ms: 0 ms is not a delay, expected > 0 ms (leave out delay for none)"),
    ({"delay": {"time_ms": 1.0004}}, "devices[0].network.delay.time_ms: 1.0004 ms is finer than 1 µs, the finest delay tc and the C programs take"),
    ({"delay": {"time_ms": 10, "correlation": 25}},
     "devices[0].network.delay.correlation: 25% correlation needs jitter_ms > 0 (it correlates the random jitter)"),
    ({"delay": {"time_ms": 10, "distribution": "pareto"}},
     "devices[0].network.delay.distribution: distribution pareto needs jitter_ms > 0 (it shapes the random jitter)"),
    ({"rate": "fast"}, "devices[0].network.rate: 'fast' is not a rate, expected a number with a tc unit: "
                       "bit|kbit|mbit|gbit (bits/s) or bps|kbps|mbps|gbps (bytes/s), e.g. 250kbit"),
    ({"duplicate": {"percent": 101}}, "devices[0].network.duplicate.percent: 101 is not a percentage, expected 0..100 (percent)"),
])
def test_validation_messages(raw, expected):
    assert expected in problems(raw)


def test_unknown_keys_and_bad_enums_are_named():
    p = problems({"delay": {"time": 20}, "direction": "sideways"})
    assert any(x.startswith("devices[0].network.delay.time:") for x in p)
    assert any(x.startswith("devices[0].network.direction:") for x in p)


def test_rate_units():
    assert rate_bits_per_s(parse_network({"rate": "250kbit"}).rate) == 250e3
    assert rate_bits_per_s(parse_network({"rate": "1.5MBit"}).rate) == 1.5e6
    assert rate_bits_per_s(parse_network({"rate": "10kbps"}).rate) == 80e3


def test_overrides_per_device():
    groups = [{"group": "cpu", "count": 3, "network": {
        "delay": {"time_ms": 20}, "loss": {"percent": 2},
        "overrides": {"cpu-1": {"loss": None}, "cpu-2": {"delay": None, "loss": None}}}}]
    plan = resolve_impairments(groups)
    assert list(plan.devices) == ["cpu-0", "cpu-1"]          # cpu-2 is left unimpaired
    assert plan.get("cpu-0").impairment.describe() == "delay 20ms, loss 2%; egress"
    assert plan.get("cpu-1").impairment.describe() == "delay 20ms; egress"
    assert plan.get("cpu-1").key == "devices[0].network.overrides.cpu-1"


def test_override_errors_name_the_device_key():
    assert problems({"delay": {"time_ms": 20}, "overrides": {"cpu-3": {"delay": {"time_ms": 10, "jitter_ms": 11}}}}) == [
        "devices[0].network.overrides.cpu-3.delay.jitter_ms: 11 ms is larger than the delay time_ms 10 ms "
        "(netem and Pumba need jitter <= delay)"]
    assert any("overrides: cpu-3: unknown key(s) latency" in p
               for p in problems({"overrides": {"cpu-3": {"latency": 5}}}))


def test_override_of_unknown_device():
    groups = [{"group": "gw", "count": 2, "network": {"overrides": {"gw-7": {"rate": "1mbit"}}}},
              {"group": "cpu", "count": 1, "network": None}]
    with pytest.raises(ImpairmentConfigError) as e:
        resolve_impairments(groups)
    assert e.value.problems == ["devices[0].network.overrides.gw-7: no device named gw-7 in group gw (gw-0..gw-1)"]


def test_empty_network_impairs_nothing():
    assert not resolve_impairments([{"group": "cpu", "count": 2, "network": {}}])
    assert not resolve_impairments([{"group": "cpu", "count": 2}])
