"""common/clock.h and common/rxstamp.h: the REALTIME->MONOTONIC mapping of kernel receive stamps
(tightest bracket, refresh, clock steps) and the stamps of real loopback datagrams."""
from testkit.ccheck import run_c_check


def test_clock_map_and_kernel_stamps(tmp_path):
    rc, lines, out = run_c_check("clock_check", tmp_path)
    assert rc == 0, out
    expected = {"bracket_ns", "outside_bracket_ns", "keeps_tighter", "takes_tighter",
                "follows_step", "no_refresh_early", "refresh_due", "stamped",
                "kernel_outside_send_read_ns", "absent_is_zero"}
    assert set(lines) == expected
    assert all(v[1] == "ok" for v in lines.values())
    assert int(lines["stamped"][0]) == 200
