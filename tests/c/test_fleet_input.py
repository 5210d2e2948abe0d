"""wot-fleet's refusals (docs/CONTRACTS.md §3b): a bad devices file names FILE:LINE and what
was expected (exit 2), features the engine does not have are refused rather than ignored,
the CLI is checked, and environment limits (file descriptors, a taken address) exit 1 with
the limit and the fix named."""
import re
import socket
import subprocess

import pytest

from testkit.fleet import DEVICES_HEADER, Spec, build, raise_nofile, write_devices
from testkit.device import HEADER

H = DEVICES_HEADER + "\n"
OK = "0,d0,127.0.0.1:5683,res.csv,1,8,auto,1000\n"

# case: (devices file text, line named, words in the message)
BAD = {
    "empty": ("", 0, "empty file"),
    "missing header": (OK, 1, "header"),
    "extra column (push)": (H.strip() + ",push\n" + OK.strip() + ",x\n", 1, "push"),
    "no devices": (H + "# nothing\n", 2, "no devices"),
    "too few fields": (H + "0,d0,127.0.0.1:5683,res.csv,1,8,auto\n", 2, "7 fields"),
    "bad index": (H + "x,d0,127.0.0.1:5683,res.csv,1,8,auto,1000\n", 2, "bad index"),
    "negative index": (H + "-1,d0,127.0.0.1:5683,res.csv,1,8,auto,1000\n", 2, "bad index"),
    "empty name": (H + "0,,127.0.0.1:5683,res.csv,1,8,auto,1000\n", 2, "empty name"),
    "listen without port": (H + "0,d0,127.0.0.1,res.csv,1,8,auto,1000\n", 2, "bad listen"),
    "listen ipv6": (H + "0,d0,[::1]:5683,res.csv,1,8,auto,1000\n", 2, "bad listen"),
    "listen port 0": (H + "0,d0,127.0.0.1:0,res.csv,1,8,auto,1000\n", 2, "bad listen"),
    "slots 0": (H + "0,d0,127.0.0.1:5683,res.csv,0,8,auto,1000\n", 2, "bad slots"),
    "slots 1025": (H + "0,d0,127.0.0.1:5683,res.csv,1025,8,auto,1000\n", 2, "bad slots"),
    "queue x": (H + "0,d0,127.0.0.1:5683,res.csv,1,x,auto,1000\n", 2, "bad queue"),
    "response": (H + "0,d0,127.0.0.1:5683,res.csv,1,8,later,1000\n", 2, "bad response"),
    "piggyback": (H + "0,d0,127.0.0.1:5683,res.csv,1,8,auto,1.5\n", 2, "piggyback_max_us"),
    "duplicate index": (H + OK + "\n0,d1,127.0.0.2:5683,res.csv,1,8,auto,1000\n", 4,
                        "index already used on line 2"),
    "duplicate listen": (H + OK + "1,d1,127.0.0.1:5683,res.csv,1,8,auto,1000\n", 3,
                         "listen address:port already used on line 2"),
    "missing resource file": (H + "0,d0,127.0.0.1:5683,nope.csv,1,8,auto,1000\n", 2,
                              "bad resource file"),
    "bad resource file": (H + "0,d0,127.0.0.1:5683,bad.csv,1,8,auto,1000\n", 2,
                          "bad resource file"),
    "impair_seed without impair": (H.strip() + ",impair,impair_ge,impair_seed\n"
                                   + OK.strip() + ",,,7\n", 2, "impair_seed without impair"),
    "impair column twice": (H.strip() + ",impair,impair\n" + OK.strip() + ",,\n", 1,
                            "column 'impair'"),
    "bad impair spec": (H.strip() + ",impair\n" + OK.strip() + ",dir=up\n", 2, "bad impair"),
    "well-known/core above a datagram": (H + "0,d0,127.0.0.1:5683,many.csv,1,8,auto,1000\n", 2,
                                         "/.well-known/core listing"),
}

OBS_HEADER = ("path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
              "notify_jitter_us,notify_service_us,notify_type,max_age_s\n")


@pytest.fixture(scope="module")
def fleet_asan_bin():
    return build("wot-fleet-asan")


def run(binary, *args, **kw):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=30, **kw)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_devices_file(fleet_asan_bin, tmp_path, case):
    text, line, what = BAD[case]
    (tmp_path / "res.csv").write_text(HEADER + "r0,0,sleep,1\n")
    (tmp_path / "bad.csv").write_text(HEADER + "r0,1,spin,1\n")
    (tmp_path / "obs.csv").write_text(OBS_HEADER + "r0,0,sleep,1,none,0,0,0,con,60\n"
                                      "o,0,sleep,1,deterministic,1000,0,0,non,60\n")
    (tmp_path / "big.csv").write_text(HEADER + "r0,0,sleep,2048\n")
    (tmp_path / "many.csv").write_text(HEADER + "".join(f"resource/number/{k},0,sleep,1\n"
                                                         for k in range(60)))
    f = tmp_path / "devices.csv"
    f.write_text(text)
    p = run(fleet_asan_bin, "--devices", f, "--log-dir", tmp_path)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"{re.escape(str(f))}:{line}: .*{re.escape(what)}.*, expected .+", last), \
        p.stderr
    assert "runtime error" not in p.stderr and "AddressSanitizer" not in p.stderr
    assert not (tmp_path / "ready").exists()
    if case == "bad resource file":   # the resource file's own line first
        assert p.stderr.startswith(f"{tmp_path / 'bad.csv'}:2: bad mode"), p.stderr


def test_bad_cli(fleet_asan_bin, tmp_path):
    devices = write_devices(tmp_path, [Spec(0, "r0,0,sleep,1\n")])
    base = ["--devices", devices, "--log-dir", tmp_path]
    for extra, word in ((["--loops", "0"], "--loops"), (["--loops", "2"], "--loops"),
                        (["--loops", "2", "--workers", "1"], "--workers"),
                        (["--log-capacity", "-1"], "--log-capacity"), (["--cpus", "a"], "--cpus"),
                        (["extra"], "positional")):
        p = run(fleet_asan_bin, *base, *extra)
        assert p.returncode == 2 and word in p.stderr, (extra, p.stderr)
    p = run(fleet_asan_bin, "--devices", devices, "--log-dir", tmp_path / "missing")
    assert p.returncode == 2 and "--log-dir" in p.stderr


def test_fd_limit_refused_with_the_fix(fleet_asan_bin, tmp_path):
    specs = [Spec(i, "r0,0,sleep,1\n", ("127.0.0.1", 20000 + i)) for i in range(100)]
    devices = write_devices(tmp_path, specs)
    p = run(fleet_asan_bin, "--devices", devices, "--log-dir", tmp_path, "--loops", "2",
            preexec_fn=raise_nofile(64))
    assert p.returncode == 1, p.stderr
    assert "RLIMIT_NOFILE 64 < 122 file descriptors needed (100 device sockets + 22)" in p.stderr
    assert "ulimit -n 122" in p.stderr
    assert not (tmp_path / "ready").exists()


def test_address_in_use_names_the_line(fleet_asan_bin, tmp_path):
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    specs = [Spec(0, "r0,0,sleep,1\n"), Spec(1, "r0,0,sleep,1\n", ("127.0.0.1", port))]
    devices = write_devices(tmp_path, specs)
    p = run(fleet_asan_bin, "--devices", devices, "--log-dir", tmp_path)
    taken.close()
    assert p.returncode == 1, p.stderr
    assert f"{devices}:3: cannot bind 127.0.0.1:{port}: Address already in use" in p.stderr
    assert not (tmp_path / "ready").exists()
