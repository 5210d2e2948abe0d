"""The input checks behind `wotbench check`: every bad line of a trace or a resource file is
named as FILE:LINE (up to csvcheck.MAX_LISTED), judged as the C programs judge it."""
from __future__ import annotations

import pytest

from wotbench.analysis.errors import AnalysisError
from wotbench.csvcheck import MAX_LISTED
from wotbench.errors import ConfigError
from wotbench.workload.trace_io import read_resources, read_trace

URI = "coap://10.0.0.1/r0"


def _problems(read, path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        read(path)
    assert e.value.exit_code == 2
    return e.value.problems


def test_every_bad_trace_line_is_named(tmp_path):
    f = tmp_path / "trace.csv"
    f.write_text("device_id,send_time_us,method,uri\n"
                 f"0,10,GET,{URI}\n"          # 2 fine
                 f"x,20,GET,{URI}\n"          # 3 device_id
                 f"0,5,GET,{URI}\n"           # 4 before line 3's 20
                 "0,30,GET\n"                 # 5 three fields
                 f"0,40,FETCH,{URI}\n"        # 6 method
                 f"0,50,PUT,{URI},1048577\n"  # 7 payload above the block-wise limit
                 f"0,60,PUT,{URI},1024\n")    # 8 fine
    got = _problems(read_trace, f)
    assert [p.split(": ", 1)[0] for p in got] == [f"{f}:{n}" for n in (3, 4, 5, 6, 7)]
    assert "device_id 'x', expected an integer >= 0" in got[0]
    assert "send_time_us 5 is before the previous line's 20" in got[1]
    assert "3 field(s)" in got[2] and "method 'FETCH'" in got[3]
    assert "payload_bytes '1048577', expected an integer 0..1048576" in got[4]


def test_a_long_list_of_bad_lines_is_cut_and_says_so(tmp_path):
    f = tmp_path / "trace.csv"
    f.write_text("".join(f"0,{i},BAD,{URI}\n" for i in range(MAX_LISTED + 5)))
    got = _problems(read_trace, f)
    assert len(got) == MAX_LISTED + 1 and got[-1] == f"{f}: 5 more bad line(s) not listed"


def test_every_bad_resource_line_is_named_as_the_device_would(tmp_path):
    f = tmp_path / "dev-0.csv"
    f.write_text("path,service_time_us,mode,payload_bytes\n"
                 "r0,5000,busy,16\n"           # 2 fine
                 "/r1,5000,busy,16\n"          # 3 leading slash: wot-device refuses it
                 "r2,fast,busy,16\n"           # 4 not an integer
                 "r3,-1,busy,16\n"             # 5 negative
                 "r4,5000,idle,16\n"           # 6 mode
                 "r5,5000,busy,2000000\n"      # 7 payload
                 "r0,1000,sleep,0\n"           # 8 repeats line 2
                 ".well-known/core,1,busy,0\n")  # 9 reserved
    got = _problems(read_resources, f)
    assert [p.split(": ", 1)[0] for p in got] == [f"{f}:{n}" for n in range(3, 10)]
    assert "column path: path '/r1' starts with '/'" in got[0]
    assert "column service_time_us: 'fast' is not an integer" in got[1]
    assert "column service_time_us: -1 is out of range, expected an integer 0..3600000000" in got[2]
    assert "column mode: 'idle' is not one of sleep|busy" in got[3]
    assert "column payload_bytes: 2000000 is out of range, expected an integer 0..1048576" in got[4]
    assert "column path: 'r0' repeats line 2, expected each path once" in got[5]
    assert "reserved" in got[6]


def test_good_resource_file_reads_and_the_analysis_gets_its_own_error(tmp_path):
    f = tmp_path / "dev-0.csv"
    f.write_text("path,service_time_us,mode,payload_bytes\nr0,5000,busy,16\na/b,0,sleep,1024\n")
    df = read_resources(f)
    assert list(df.path) == ["r0", "a/b"] and list(df.service_time_us) == [5000, 0]
    f.write_text("path,service_time_us,mode,payload_bytes\nr0,x,busy,16\nr1,y,busy,16\n")
    with pytest.raises(AnalysisError) as e:
        read_resources(f, AnalysisError)
    assert str(e.value).splitlines() == [
        f"{f}:2: column service_time_us: 'x' is not an integer, expected an integer 0..3600000000",
        f"{f}:3: column service_time_us: 'y' is not an integer, expected an integer 0..3600000000"]


def test_the_body_column_is_read_and_every_bad_body_is_named(tmp_path):
    """The trace's optional last column (the header names it): each request's own body,
    percent-encoded; judged as the GE judges it (gateway-emulator trace.c body_check)."""
    f = tmp_path / "trace.csv"
    f.write_text("device_id,send_time_us,method,uri,payload_bytes,body\n"
                 f'0,10,PUT,{URI},13,{{"a":1%2C"b":2}}\n'   # 2 fine: the comma escaped
                 f"0,20,GET,{URI},,\n"                        # 3 fine: no body
                 f"0,30,POST,{URI},4,\n")                     # 4 fine: filler
    df = read_trace(f)
    assert list(df.body) == ['{"a":1%2C"b":2}', "", ""]
    assert list(df.payload_bytes) == [13, 0, 4]
    f.write_text("device_id,send_time_us,method,uri,payload_bytes,body\n"
                 f"0,10,GET,{URI},,x\n"        # 2 a body with GET
                 f"0,20,PUT,{URI},1,%G1\n"     # 3 bad escape
                 f"0,30,PUT,{URI},3,%41b\n"    # 4 2 bytes, not 3
                 f"0,40,PUT,{URI},2,ok\n")     # 5 fine
    got = _problems(read_trace, f)
    assert got == [f"{f}:2: a body with GET, expected a body only with PUT, POST or PATCH",
                   f"{f}:3: bad %-escape in body, expected %XX with two hex digits",
                   f"{f}:4: body of 2 bytes with payload_bytes 3, expected a body of exactly "
                   "payload_bytes bytes (decoded)"]
    # a raw UTF-8 character is counted in bytes, as the GE counts it
    f.write_text("device_id,send_time_us,method,uri,payload_bytes,body\n"
                 f"0,10,PUT,{URI},2,é\n"       # 2 fine: two bytes
                 f"0,20,PUT,{URI},1,é\n",      # 3 one character, two bytes
                 encoding="utf-8")
    assert _problems(read_trace, f) == [
        f"{f}:3: body of 2 bytes with payload_bytes 1, expected a body of exactly "
        "payload_bytes bytes (decoded)"]
