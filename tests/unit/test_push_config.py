"""devices[].push: config checks, schedule rendering and the setup verdict (issue 23)."""
import json

import pytest
import yaml

from wotbench.configfile.yaml_loader import load_config
from wotbench.errors import ConfigError
from wotbench.runner import push_run as runner_push
from wotbench.workload import cbor
from wotbench.workload.push_schedule import HEADER, PushRenderError, device_rows
from wotbench.rundir import RunDir

RD = {"group": "rd", "server": {"command": ["coap-server-notls", "-A", "{address}"]},
      "paths": ["time"], "requests": False}
REGISTER = {"op": "register", "phase": "setup", "target": "rd",
            "path": "rd?ep={device}&lt=60", "format": "link-format", "body": "</t>"}
READING = {"op": "reading", "target": "rd", "path": "@location", "format": "senml+json",
           "type": "non", "interval": {"dist": "deterministic", "mean": 500},
           "value": {"dist": "normal", "mean": 21.5, "cv": 0.05},
           "body": [{"n": "{device}/t", "v": "{value}", "t": "{time_s}"}]}


def cfg_file(tmp_path, push, **extra):
    c = {"name": "p", "backend": "process", "duration_s": 2,
         "devices": [RD, {"group": "s", "count": 3, "requests": False, "push": push}], **extra}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(c))
    return p


def problems(tmp_path, push, **extra):
    with pytest.raises(ConfigError) as e:
        load_config(cfg_file(tmp_path, push, **extra))
    return "\n".join(e.value.problems)


def test_schedule_renders_every_device(tmp_path):
    cfg = load_config(cfg_file(tmp_path, [REGISTER, READING,
                                          {"op": "bye", "phase": "teardown", "target": "rd",
                                           "method": "DELETE", "path": "@location"}]))
    devs = runner_push.push_devices(cfg)
    assert [d.name for d in devs] == ["s-0", "s-1", "s-2"]
    assert {d.targets[0] for d in devs} == {"172.28.0.10:5683"}   # the rd group's device
    rows = device_rows(devs[1], cfg.devices[1].push, cfg.duration_s, cfg.seed)
    assert [r.phase for r in rows] == ["setup"] + ["test"] * 4 + ["teardown"]
    assert rows[0].path == "rd?ep=s-1&lt=60" and rows[0].content_format == 40
    assert rows[0].payload == b"</t>"
    times = [r.at_us for r in rows[1:5]]
    assert times == sorted(times) and times[0] < 500_000 and all(t < 2_000_000 for t in times)
    assert [b - a for a, b in zip(times, times[1:])] == [500_000] * 3   # deterministic interval
    body = json.loads(rows[1].payload)
    assert body[0]["n"] == "s-1/t" and isinstance(body[0]["v"], float)   # typed, not a string
    assert body[0]["t"] == round(rows[1].at_us / 1e6, 6)
    assert rows[1].content_format == 110 and rows[1].type == "non"
    assert rows[-1].line().startswith("teardown,bye,0,DELETE,con,172.28.0.10:5683,@location,,")
    # the same seed renders the same schedule
    again = device_rows(devs[1], cfg.devices[1].push, cfg.duration_s, cfg.seed)
    assert [r.line() for r in again] == [r.line() for r in rows]


def test_cbor_bodies():
    assert cbor.dumps([{"n": "a", "v": 1}]) == bytes.fromhex("81a2616e6161617601")
    assert cbor.dumps(-1) == b"\x20" and cbor.dumps(1000) == b"\x19\x03\xe8"
    assert cbor.dumps(1.5) == bytes.fromhex("fb3ff8000000000000")


def test_template_that_does_not_render_names_key_and_device(tmp_path):
    bad = dict(READING, format="json", body='{"v": {value}, "id": {device}}')   # {device} unquoted
    cfg = load_config(cfg_file(tmp_path, [REGISTER, bad]))
    d = runner_push.push_devices(cfg)[0]
    with pytest.raises(PushRenderError) as e:
        device_rows(d, cfg.devices[1].push, cfg.duration_s, cfg.seed)
    assert "devices[1].push[1]" in str(e.value) and "device s-0" in str(e.value)
    assert "not JSON" in str(e.value) and "fix the template" in str(e.value)
    big = dict(READING, format="text", body="x" * 1030 + "{device}")
    cfg = load_config(cfg_file(tmp_path, [REGISTER, big]))
    with pytest.raises(PushRenderError, match=r"devices\[1\]\.push\[1\]\.body: renders to 1033 bytes"):
        device_rows(runner_push.push_devices(cfg)[0], cfg.devices[1].push, 2, 1)


@pytest.mark.parametrize("push,key,text", [
    ([dict(READING, path="x/{nope}")], "devices[1].push[0]", "unknown template field {nope}"),
    ([dict(READING, interval=None)], "devices[1].push[0]", "phase test needs `interval`"),
    ([dict(REGISTER, interval={"dist": "exponential", "mean": 5})], "devices[1].push[0]",
     "expected no `interval`"),
    ([dict(READING, target="nowhere")], "devices[1].push[0].target", "not a device group"),
    ([dict(READING, target="localhost:5683")], "devices[1].push[0].target", "IP:PORT"),
    ([READING], "devices[1].push[0].path", "@location needs a setup op"),
    ([dict(READING, value=None)], "devices[1].push[0]", "`value` (its distribution) is not given"),
    ([dict(REGISTER, path="@location")], "devices[1].push[0]", "@location in a setup op"),
    ([dict(READING, path="r", retransmit=True)], "devices[1].push[0]",
     "retransmit: true with type non: RFC 7252 retransmits CON requests only"),
    ([dict(REGISTER, retransmit=True)], "devices[1].push[0]",
     "retransmit: true in phase setup: expected it in phase test only"),
])
def test_bad_push_config_names_the_key(tmp_path, push, key, text):
    p = problems(tmp_path, push)
    assert key in p and text in p


def test_push_on_a_server_group_and_with_dtls_refused(tmp_path):
    c = {"name": "p", "backend": "process",
         "devices": [dict(RD, push=[dict(REGISTER, target="s")]), {"group": "s"}]}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(c))
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert any("devices[0].push[0]: a server/external group cannot push" in x
               for x in e.value.problems)


def _setup_file(rd: RunDir, name: str, rows: list[str]) -> None:
    rd.device_dir(name).mkdir(parents=True, exist_ok=True)
    cols = "index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome," \
           "retransmissions,received_kernel_ns,phase,op"
    rd.push_setup(name).write_text(cols + "\n" + "\n".join(rows) + "\n")


def test_failed_setup_stops_naming_device_op_and_answer(tmp_path):
    cfg = load_config(cfg_file(tmp_path, [REGISTER, READING]))
    rd = RunDir(tmp_path / "run")
    _setup_file(rd, "s-0", ["0,1,POST,rd?ep=s-0&lt=60,0,1,2,2.01,ok,0,2,setup,register"])
    _setup_file(rd, "s-1", ["0,2,POST,rd?ep=s-1&lt=60,0,1,2,4.00,error,0,2,setup,register"])
    _setup_file(rd, "s-2", ["0,3,POST,rd?ep=s-2&lt=60,0,1,,,timeout,0,,setup,register"])
    with pytest.raises(ConfigError) as e:
        runner_push.wait_setup(cfg, rd, runner_push.first_targets(cfg), timeout_s=1)
    p = e.value.problems
    assert len(p) == 2 and e.value.exit_code == 2
    assert p[0].startswith("devices[1].push[0]: device s-1: setup register POST /rd?ep=s-1&lt=60")
    assert "answered 4.00" in p[0] and "fix the request" in p[0]
    assert "device s-2" in p[1] and "got no answer" in p[1] and "check the target" in p[1]


def test_setup_all_ok_and_start_file(tmp_path):
    cfg = load_config(cfg_file(tmp_path, [REGISTER, READING]))
    rd = RunDir(tmp_path / "run")
    for k in range(3):
        _setup_file(rd, f"s-{k}", [f"0,{k + 1},POST,rd,0,1,2,2.01,ok,0,2,setup,register"])
    assert runner_push.wait_setup(cfg, rd, runner_push.first_targets(cfg), timeout_s=1) >= 0
    runner_push.write_start(rd, ["s-0"], 12345)
    assert rd.push_start("s-0").read_text() == "12345\n"


def test_schedule_header_matches_the_device():
    from pathlib import Path
    src = (Path(__file__).resolve().parents[2] / "wot-device/src/push_load.c").read_text()
    base, _, last = HEADER.rpartition(",")
    assert f'#define HEADER "{base}"' in src and last == "retransmit"
    assert '#define HEADER_RTX HEADER ",retransmit"' in src


def test_a_started_server_gets_a_core_of_its_own_when_one_can_be_spared(tmp_path):
    from wotbench.deploy.plan import make_plan
    cfg = load_config(cfg_file(tmp_path, [REGISTER]))
    big = make_plan(cfg, list(range(6)))        # OS, GE, CD-GE, 3 device cores
    assert big.devices["rd-0"] == "3" and {big.devices[f"s-{k}"] for k in range(3)} <= {"4", "5"}
    small = make_plan(cfg, [0, 1])
    assert small.devices["rd-0"] == small.devices["s-0"] == "1"
    assert any("share the device core(s) 1" in w for w in small.warnings)


def test_retransmit_reaches_the_schedule_of_test_con_rows_only(tmp_path):
    """`retransmit: true` on a test CON op sets the schedule's 10th column of its rows; the
    setup rows (always retransmitted by the device) and the other ops' rows keep 0."""
    retx = dict(READING, op="refresh", type="con", path="r", retransmit=True)
    cfg = load_config(cfg_file(tmp_path, [REGISTER, retx, dict(READING, path="r")]))
    rows = device_rows(runner_push.push_devices(cfg)[0], cfg.devices[1].push, 2, 1)
    flags = {(r.op, r.line().rsplit(",", 1)[1]) for r in rows}
    assert flags == {("register", "0"), ("refresh", "1"), ("reading", "0")}
    assert HEADER.endswith(",retransmit")
