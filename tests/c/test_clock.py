"""common/clock.h and common/rxstamp.h: the REALTIME->MONOTONIC mapping of kernel receive stamps
(tightest bracket, refresh, clock steps) and the stamps of real loopback datagrams."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_clock_map_and_kernel_stamps(tmp_path):
    exe = tmp_path / "clock_check"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                    f"-I{ROOT / 'common'}", "-o", str(exe),
                    str(Path(__file__).parent / "src" / "clock_check.c")], check=True)
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    lines = dict((ln.split()[0], ln.split()[1:]) for ln in res.stdout.splitlines())
    assert res.returncode == 0, res.stdout + res.stderr
    expected = {"bracket_ns", "outside_bracket_ns", "keeps_tighter", "takes_tighter",
                "follows_step", "no_refresh_early", "refresh_due", "stamped",
                "kernel_outside_send_read_ns", "absent_is_zero"}
    assert set(lines) == expected
    assert all(v[1] == "ok" for v in lines.values())
    assert int(lines["stamped"][0]) == 200
