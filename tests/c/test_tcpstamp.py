"""common/tcpstamp.h: a TCP read with the kernel's receive stamp (the connected devices' engine
and wot-rpcapp read every message through it). The stamp is the arrival of the last segment
the read returned, mapped onto CLOCK_MONOTONIC: not later than the read, 20 ms before a read
made 20 ms after the send, the later segment's for a message in two; a socket that did not ask
has none and the read's own time is used."""
from testkit.ccheck import run_c_check

CHECKS = {"one_read_bytes", "one_kernel_stamped", "one_kernel_not_after_read_ns",
          "one_kernel_after_send_ns", "one_read_lag_ns", "one_used_kernel", "two_read_bytes",
          "two_stamp_of_last_segment_ns", "unasked_bytes", "unasked_kernel_ns",
          "unasked_falls_back_to_read", "empty_read_untouched"}


def test_tcp_reads_carry_the_kernel_stamp_of_their_last_segment(tmp_path):
    rc, lines, out = run_c_check("tcpstamp_check", tmp_path)
    assert rc == 0, out
    assert CHECKS <= set(lines), out
    assert all(lines[k][1] == "ok" for k in CHECKS), out
    # the stamp is the arrival, not the read: the read came >= 20 ms after it, and is later
    assert int(lines["one_read_lag_ns"][0]) >= 19_980_000, out
    assert int(lines["one_kernel_not_after_read_ns"][0]) >= 0, out
