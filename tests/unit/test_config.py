"""Config validation: one exact "key.path: message" per problem, never a traceback."""
from pathlib import Path

import pytest
import yaml

from wotbench.configfile.yaml_loader import config_from_dict, load_config
from wotbench.deploy.resolve import cd_node_address, device_addresses, dump_resolved, resolve
from wotbench.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MIN = {"name": "t", "devices": [{"group": "cpu"}]}


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as e:
        config_from_dict(raw)
    assert e.value.exit_code == 2
    return e.value.problems


def with_group(**kw):
    return {"name": "t", "devices": [{"group": "cpu", **kw}]}


SHIPPED = sorted(p for p in CONFIGS.rglob("*.yaml")   # not the validation manifest or sweep matrices
                 if not p.name.endswith("scenarios.yaml") and not p.name.endswith(".matrix.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(CONFIGS)) for p in SHIPPED])
def test_shipped_configs_load(path):
    """Every config we ship loads and resolves (a newcomer's first run must not hit a config error)."""
    assert len(SHIPPED) >= 5
    cfg = load_config(path)
    if path.parent == CONFIGS:
        assert cfg.name == path.stem
    r = resolve(cfg, cores=[0, 1])
    assert r.contention_detector.service_time_ms != "auto" and r.contention_detector.mode != "auto"


def test_defaults():
    cfg = config_from_dict(MIN)
    assert cfg.duration_s == 60 and cfg.seed == 1 and cfg.backend == "docker" and cfg.trace is None
    g = cfg.devices[0]
    assert (g.count, g.threads, g.mode, g.resources, g.methods, g.network) == (1, 1, "busy", 10, {"GET": 1.0}, None)
    assert g.service_time.dist == "exponential" and g.service_time.mean == 5
    assert cfg.gateways.wait == "auto" and cfg.contention_detector.service_time_ms == "auto"
    assert cfg.placement.reserved_os_cores == 1 and cfg.network.subnet == "172.28.0.0/16"


def test_negative_value():
    raw = {"name": "t", "devices": [{"group": "a"}, {"group": "b", "service_time": {"dist": "exponential", "mean": -5}}]}
    assert problems(raw) == ["devices[1].service_time.mean: must be > 0, got -5"]


def test_wrong_type():
    assert problems(with_group(count="many")) == ["devices[0].count: must be an integer, got 'many'"]
    assert problems({**MIN, "duration_s": "long"}) == ["duration_s: must be a number, got 'long'"]
    assert problems({**MIN, "gateways": [1]}) == ["gateways: must be a mapping, got a list [1]"]


def test_retransmission_of_non_requests_is_refused_with_the_fix():
    assert problems({**MIN, "gateways": {"message_type": "non", "retransmit": True}}) == [
        "gateways.retransmit: true with message_type non: RFC 7252 retransmits CON requests "
        "only; set message_type: con or remove retransmit"]
    ok = config_from_dict({**MIN, "gateways": {"message_type": "con", "retransmit": True}})
    assert ok.gateways.retransmit


def test_unknown_key_did_you_mean():
    raw = with_group(serivce_time={"dist": "exponential", "mean": 5})
    assert problems(raw) == ["devices[0].serivce_time: unknown key, did you mean 'service_time'?"]
    assert problems({**MIN, "gatways": {}}) == ["gatways: unknown key, did you mean 'gateways'?"]
    p = problems({**MIN, "zzz": 1})
    assert p[0].startswith("zzz: unknown key (allowed: name, duration_s")


def test_missing_required():
    assert problems({"devices": [{"group": "a"}]}) == ["name: required key missing"]
    assert problems({"name": "x"}) == ["devices: required key missing"]
    assert problems({"name": "x", "devices": []}) == ["devices: must have at least 1 item(s)"]
    assert problems(with_group(service_time={"dist": "gamma", "mean": 5})) == \
        ["devices[0].service_time.cv: required for gamma (coefficient of variation)"]


def test_bad_enum():
    assert problems(with_group(mode="fast")) == ["devices[0].mode: must be 'sleep' or 'busy', got 'fast'"]
    assert problems(with_group(mode="bussy")) == \
        ["devices[0].mode: must be 'sleep' or 'busy', got 'bussy' (did you mean 'busy'?)"]
    assert problems({**MIN, "gateways": {"wait": "spin"}}) == \
        ["gateways.wait: must be 'busy', 'hybrid' or 'auto', got 'spin'"]


def test_distribution_rules():
    assert problems(with_group(service_time={"dist": "pareto", "mean": 5, "shape": 0.8})) == \
        ["devices[0].service_time.shape: must be > 1 for pareto (finite mean), got 0.8"]
    assert problems(with_group(rit={"dist": "exponential", "mean": 5, "cv": 2})) == \
        ["devices[0].rit.cv: not used by exponential (exponential has cv 1; use gamma or weibull for another cv)"]


def test_many_problems_reported_together():
    p = problems({"name": "Bad", "devices": [{"group": "a", "count": 0, "mode": "x"}]})
    assert len(p) == 3
    assert "devices[0].count: must be >= 1, got 0" in p


def test_semantic_checks():
    assert problems({"name": "t", "devices": [{"group": "a"}, {"group": "a"}]}) == \
        ["devices[1].group: duplicate group name 'a' (also devices[0])"]
    p = problems({"name": "t", "devices": [{"group": "a", "count": 300, "per_container": 1}], "network": {"subnet": "10.0.0.0/24"}})
    assert p[0].startswith("network.subnet: 10.0.0.0/24 has room for 245 devices")
    assert problems({**MIN, "placement": {"cpus": [1, 1]}}) == ["placement.cpus: core ids must be unique, got [1, 1]"]


def test_yaml_syntax_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: x\ndevices:\n  - group: a\n   count: 2\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert e.value.problems[0].startswith("line 4, column 4: YAML syntax error")
    assert str(e.value).startswith(f"{f}: line 4, column 4")


def test_file_not_found(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "nope.yaml")
    assert e.value.problems == ["file not found"] and str(tmp_path / "nope.yaml") in str(e.value)


def test_empty_and_non_mapping(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_config(f)
    f.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"\(top level\): must be a mapping"):
        load_config(f)


def test_file_name_in_message(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: t\ndevices: [{group: a, threads: 0}]\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value) == f"{f}: devices[0].threads: must be >= 1, got 0"


def test_recorded_trace_paths_relative_to_config(tmp_path):
    (tmp_path / "rec" / "resources").mkdir(parents=True)
    (tmp_path / "rec" / "trace.csv").write_text("device_id,send_time_us,method,uri\n")
    f = tmp_path / "c.yaml"
    f.write_text("name: t\ntrace: rec/trace.csv\ndevices: [{group: a}]\n")
    cfg = load_config(f)
    assert cfg.trace.file == str(tmp_path / "rec" / "trace.csv") and cfg.trace.resources is None
    f.write_text("name: t\ntrace: {file: missing.csv}\ndevices: [{group: a}]\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert e.value.problems[0] == f"trace.file: file not found: {tmp_path / 'missing.csv'}"


def test_network_placeholder_accepts_null():
    cfg = config_from_dict(with_group(network=None))
    assert cfg.devices[0].network is None


def test_resolve_auto_values():
    raw = {"name": "t", "devices": [
        {"group": "a", "count": 2, "mode": "busy", "service_time": {"dist": "deterministic", "mean": 10},
         "rit": {"dist": "exponential", "mean": 100}},          # 20 req/s in total
        {"group": "b", "count": 6, "mode": "sleep", "service_time": {"dist": "deterministic", "mean": 2},
         "rit": {"dist": "exponential", "mean": 100}}]}         # 60 req/s in total
    r = resolve(config_from_dict(raw), cores=[0, 1])
    assert r.contention_detector.service_time_ms == pytest.approx((20 * 10 + 60 * 2) / 80)
    assert r.contention_detector.mode == "sleep"
    assert r.gateways.wait == "hybrid"
    assert resolve(config_from_dict(raw), cores=list(range(8))).gateways.wait == "busy"


def test_dump_resolved_roundtrip(tmp_path):
    r = resolve(load_config(CONFIGS / "20dev.yaml"), cores=[0, 1])
    p = dump_resolved(r, tmp_path / "config.resolved.yaml")
    again = load_config(p)
    assert again.model_dump() == r.model_dump()
    assert yaml.safe_load(p.read_text())["contention_detector"]["service_time_ms"] == 5.0


def test_device_addresses():
    cfg = config_from_dict({"name": "t", "devices": [{"group": "a", "count": 2, "per_container": 1},
                                                     {"group": "b", "count": 1500, "per_container": 1}]})
    addrs = device_addresses(cfg)
    assert addrs[0] == ("a-0", "a", 0, "172.28.0.10", 5683, "a-0")
    assert addrs[2] == ("b-0", "b", 2, "172.28.0.12", 5683, "b-0")
    # past 1004 devices the second /22 bridge block starts at 172.28.4.10 (wotbench.deploy.addressing)
    assert addrs[1004].ip == "172.28.4.10"
    assert addrs[-1].ip == "172.28.5.251" and addrs[-1].name == "b-1499"   # 4.0 + 10 + 497
    assert len({a.ip for a in addrs}) == 1502
    assert cd_node_address(cfg) == ("cd-node", "cd", 1502, "172.28.5.252", 5683, "cd-node")
    assert device_addresses(cfg, subnet="10.9.0.0/16")[0].ip == "10.9.0.10"


def test_devices_of_the_wrong_type_is_a_message_not_a_traceback():
    assert problems({"name": "t", "devices": 5}) == ["devices: must be a list, got an integer 5"]


def test_infinite_numbers_are_rejected_where_they_are_written():
    got = problems({"name": "t", "duration_s": float("inf"),
                    "devices": [{"group": "a", "rit": {"dist": "exponential", "mean": float("inf")}}]})
    assert got == ["duration_s: input should be a finite number",
                   "devices[0].rit.mean: input should be a finite number"]


def test_payloads_beyond_the_block_wise_limit_are_rejected_before_any_run():
    """The emulators cap bodies at 1 MiB (block-wise above 1024 bytes); the config must say so,
    not the GE after deploy."""
    got = problems(with_group(payload_bytes=2_000_000, request_payload_bytes=1_048_577))
    assert got == ["devices[0].payload_bytes: must be <= 1048576, got 2000000",
                   "devices[0].request_payload_bytes: must be <= 1048576, got 1048577"]
    c = config_from_dict(with_group(payload_bytes=16384, request_payload_bytes=4096))
    assert c.ge_block_size() == 1024                 # bodies above one datagram: block-wise
    assert config_from_dict(with_group(payload_bytes=1024)).ge_block_size() is None


def test_block_size_must_be_a_power_of_two_in_16_1024():
    assert problems({**with_group(), "gateways": {"block_size": 100}}) == [
        "gateways.block_size: must be a power of two in 16..1024 (SZX 0..6), got 100"]
    assert problems({**with_group(), "gateways": {"block_size": 2048}}) == [
        "gateways.block_size: must be a power of two in 16..1024 (SZX 0..6), got 2048"]
    assert config_from_dict({**with_group(), "gateways": {"block_size": 16}}).ge_block_size() == 16


def test_observable_payload_stays_one_datagram():
    got = problems(with_group(payload_bytes=2048, observe={"period_ms": 100}))
    assert got == ["devices[0].payload_bytes: 2048 with observe, expected at most 1024 "
                   "(notifications are one datagram)"]


def test_response_path_keys():
    """devices[].response and contention_detector.response: validated, defaulted, and passed to
    wot-device as --response."""
    from wotbench.runner.deployment.components import DeviceRun
    assert problems(with_group(response="fast")) == \
        ["devices[0].response: must be 'auto', 'piggyback' or 'separate', got 'fast'"]
    assert problems({**MIN, "contention_detector": {"response": "piggyback-ish"}}) == \
        ["contention_detector.response: must be 'auto', 'piggyback' or 'separate', "
         "got 'piggyback-ish' (did you mean 'piggyback'?)"]
    cfg = config_from_dict(with_group(response="separate"))
    assert cfg.devices[0].response == "separate"
    assert cfg.contention_detector.response == "piggyback"
    assert config_from_dict(MIN).devices[0].response == "auto"
    run = DeviceRun(name="cpu-0", id=0, group="cpu", role="device", address="127.0.0.1",
                    cpuset="1", resources=Path("r.csv"), log_dir=Path("l"), stdout=Path("o"),
                    response=cfg.devices[0].response)
    args = run.args("r.csv", "l", None)
    assert args[args.index("--response") + 1] == "separate"
