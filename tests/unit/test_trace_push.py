"""Device-originated lines of a recorded trace (wotbench.workload.trace_push, `>METHOD`): the
GE's reader skips them, the devices replay them from their push schedule; every bad line is
FILE:LINE before the run."""
import shutil
from pathlib import Path

import pytest
import yaml

from wotbench.configfile.yaml_loader import load_config
from wotbench.errors import ConfigError
from wotbench.rundir import RunDir
from wotbench.runner import push_run as runner_push
from wotbench.workload import trace_push
from wotbench.workload.trace_io import read_trace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "recorded-push.yaml"
HEAD = "device_id,send_time_us,method,uri,payload_bytes\n"


def test_example_trace_splits_between_the_ge_and_the_devices():
    src = ROOT / "traces" / "example-3dev-push" / "trace.csv"
    ge = read_trace(src)
    assert len(ge) == 599 and not ge.method.str.startswith(">").any()   # example-3dev's lines
    lines = trace_push.read_device_lines(src)
    assert len(lines) == 63 and {d.op for d in lines} == {"trace-post", "trace-get"}
    assert {(d.host, d.port, d.path) for d in lines} == {("store", None, "readings/{device}")}


def test_schedules_replay_the_recorded_instants(tmp_path):
    cfg = load_config(EXAMPLE)
    assert runner_push.pushing(cfg) == {"meter-0", "meter-1", "meter-2"}
    rd = RunDir(tmp_path / "run")
    counts = runner_push.write_schedules(rd, runner_push.render_schedules(cfg))
    assert counts == {"meter-0": 21, "meter-1": 21, "meter-2": 21}
    rows = rd.push_schedule("meter-1").read_text().splitlines()
    assert rows[1].startswith("test,trace-post,500137,POST,con,")
    store = [a for a in runner_push.device_addresses(cfg) if a.group == "store"][0]
    assert f",{store.ip}:{store.port},readings/meter-1,," in rows[1]
    assert rows[1].endswith("," + (b"x" * 48).hex() + ",0")     # never retransmitted
    assert rows[-1].startswith("test,trace-get,19899999,GET,con,")


def _cfg(tmp_path, trace_text):
    (tmp_path / "res").mkdir()
    for d in range(2):
        (tmp_path / "res" / f"m-{d}.csv").write_text("path,service_time_us,mode,payload_bytes\nr0,0,sleep,4\n")
    (tmp_path / "t.csv").write_text(HEAD + trace_text)
    c = {"name": "t", "backend": "process", "duration_s": 2,
         "trace": {"file": "t.csv", "resources": "res"},
         "devices": [{"group": "m", "count": 2},
                     {"group": "rd", "server": {"command": ["coap-server-notls"]}, "paths": ["x"],
                      "requests": False}]}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(c))
    return load_config(p)


@pytest.mark.parametrize("line,why", [
    ("0,10,>FETCH,coap://rd/x,0", "method '>FETCH', expected >GET, >PUT, >POST or >DELETE"),
    ("0,10,>POST,coap://10.0.0.1/x,0", "an IP address target needs its port"),
    ("0,10,>POST,coap://rd:5683/x,0", "a device group target takes no port"),
    ("0,10,>POST,coaps://rd/x,0", "expected coap://TARGET[:PORT]/path"),
    ("0,10,>POST,coap://rd/x,2000", "payload_bytes '2000', expected an integer 0..1024"),
    ("0,10,>POST,coap://rd/{value},0", "path field {value}"),
    ("0,10,>POST,coap://rd/x,0,3", "client given on a device-originated line"),
    ("0,10,>POST,coap://rd/x,0\n0,5,>POST,coap://rd/x,0", "before device 0's previous line's 10"),
])
def test_bad_device_lines_name_file_and_line(tmp_path, line, why):
    (tmp_path / "t.csv").write_text(HEAD + "1,0,GET,coap://h/r0,0\n" + line + "\n")
    with pytest.raises(ConfigError) as e:
        trace_push.read_device_lines(tmp_path / "t.csv")
    text = "\n".join(e.value.problems)
    n = 3 + line.count("\n")
    assert f"{tmp_path / 't.csv'}:{n}: " in text and why in text, text


@pytest.mark.parametrize("line,why", [
    ("5,10,>POST,coap://rd/x,0", "device_id 5 but the config has 3 devices"),
    ("2,10,>POST,coap://rd/x,0", "device rd-0 is a server/external component"),
    ("0,10,>POST,coap://nowhere/x,0", "target 'nowhere' is not a device group of this run"),
    ("0,10,>POST,coap://m/x,0", "the sending device's own group"),
])
def test_device_lines_are_checked_against_the_config(tmp_path, line, why):
    cfg = _cfg(tmp_path, "0,0,GET,coap://h/r0,0\n" + line + "\n")
    with pytest.raises(ConfigError) as e:
        runner_push.pushing(cfg)
    text = "\n".join(e.value.problems)
    assert f"trace.file: {tmp_path / 't.csv'}:3: " in text and why in text, text


def test_a_trace_without_device_lines_pushes_nothing(tmp_path):
    cfg = _cfg(tmp_path, "0,0,GET,coap://h/r0,0\n1,5,PUT,coap://h/r0,3\n")
    assert runner_push.pushing(cfg) == set() and len(read_trace(tmp_path / "t.csv")) == 2
