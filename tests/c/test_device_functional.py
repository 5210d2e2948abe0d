"""wot-device functional tests (ASan+UBSan build): bad input. The CoAP behaviour, overload and
interop checks run for wot-device and wot-fleet alike in test_fleet_same.py."""
import re
import subprocess

import pytest

from testkit.device import HEADER, Device

RES = "r0,0,sleep,16\nsub/r1,1000,busy,0\nslow,200000,sleep,4\n"


def test_bad_response_flag(device_asan_bin, tmp_path):
    for bad in (["--response", "later"], ["--piggyback-max-us", "-1"]):
        d = Device(device_asan_bin, tmp_path, RES, *bad)
        res = subprocess.run(d.cmd, capture_output=True, text=True, timeout=10)
        assert res.returncode == 2 and bad[0] in res.stderr, res.stderr


BAD = {
    "missing header": ("r0,1,sleep,1\n", 1, "header"),
    "wrong header": ("path,service_time_us,mode\nr0,1,sleep\n", 1, "header"),
    "empty": ("", 0, "empty"),
    "no resources": (HEADER, 1, "no resources"),
    "too few fields": (HEADER + "r0,1,sleep\n", 2, "3 fields"),
    "too many fields": (HEADER + "r0,1,sleep,1,2\n", 2, "5 fields"),
    "leading slash": (HEADER + "/r0,1,sleep,1\n", 2, "starts with '/'"),
    "empty path": (HEADER + ",1,sleep,1\n", 2, "empty path"),
    "space in path": (HEADER + "r 0,1,sleep,1\n", 2, "invalid character"),
    "duplicate": (HEADER + "r0,1,sleep,1\n# c\n\nr0,2,busy,1\n", 5, "duplicate"),
    "negative time": (HEADER + "r0,-1,sleep,1\n", 2, "service_time_us"),
    "float time": (HEADER + "r0,1.5,sleep,1\n", 2, "service_time_us"),
    "bad mode": (HEADER + "r0,1,spin,1\n", 2, "bad mode"),
    "bad payload": (HEADER + "r0,1,busy,x\n", 2, "payload_bytes"),
    "payload too big": (HEADER + "r0,1,busy,1048577\n", 2, "payload_bytes"),
    "reserved path": (HEADER + ".well-known/core,1,busy,1\n", 2, "reserved"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_resource_file(device_asan_bin, tmp_path, case):
    text, line, what = BAD[case]
    f = tmp_path / "res.csv"
    f.write_text(text)
    p = subprocess.run([str(device_asan_bin), "--resources", str(f), "--log-dir", str(tmp_path),
                        "--listen", "127.0.0.1:1"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert re.fullmatch(rf"{re.escape(str(f))}:{line}: .*{re.escape(what)}.*, expected .+\n",
                        p.stderr), p.stderr


def test_bad_cli(device_asan_bin, tmp_path):
    f = tmp_path / "res.csv"
    f.write_text(HEADER + "r0,1,sleep,1\n")
    base = [str(device_asan_bin), "--resources", str(f), "--log-dir", str(tmp_path)]
    for extra in (["--threads", "0"], ["--queue", "x"], ["--listen", "nohost:1"],
                  ["--listen", "127.0.0.1:99999"], ["extra"]):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (extra, p.stderr)
    p = subprocess.run([str(device_asan_bin), "--resources", str(f), "--log-dir",
                        str(tmp_path / "missing")], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
