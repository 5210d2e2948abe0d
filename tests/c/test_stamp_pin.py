"""common/rxstamp_pin.h: the kernel stamps arriving packets only while some socket on the host
asks for it, and turns stamping on again only some time after the next one asks. The pin holds it
on; with it, every answer on a fresh TCP connection the server closes carries its kernel stamp
(the GE's HTTP connection-per-request path, http_prep.c)."""
from testkit.ccheck import run_c_check


def test_pin_keeps_stamps_on_between_connections(tmp_path):
    rc, lines, out = run_c_check("stamp_pin_check", tmp_path)
    assert rc == 0, out
    assert set(lines) == {"switch_on_before", "unpinned_unstamped", "pin_fd", "pin_on_after_us",
                          "pinned_unstamped", "rounds"}
    assert lines["pin_on_after_us"][1] == "ok" and int(lines["pin_on_after_us"][0]) < 200_000
    assert lines["pinned_unstamped"] == ["0", "ok"]
    assert lines["rounds"][0] == "100"
    # without the pin the count depends on the rest of the host: reported, never asserted
    assert int(lines["unpinned_unstamped"][0]) >= 0
