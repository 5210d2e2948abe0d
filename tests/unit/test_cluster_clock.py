"""wotbench.distributed.clock: offset and round trip from four stamps, minimum-delay filtering,
the bound, T0 on a cell's monotonic clock."""
from __future__ import annotations

import pytest

from wotbench.distributed.clock import CellClock, Exchange, check, estimate, t0_mono_ns

MS = 1_000_000


def exchange(t1, offset, out, back, server=0):
    """An exchange on a path of ``out``/``back`` one-way delays to a cell whose clock is
    ``offset`` ahead, answering after ``server`` ns."""
    t2 = t1 + out + offset
    t3 = t2 + server
    return Exchange(t1_ns=t1, t2_ns=t2, t3_ns=t3, t4_ns=t3 - offset + back)


def test_symmetric_path_gives_the_exact_offset_and_round_trip():
    e = exchange(10 * MS, offset=3 * MS, out=200_000, back=200_000, server=50_000)
    assert e.offset_ns == 3 * MS and e.delay_ns == 400_000 and e.valid


def test_asymmetry_stays_within_half_the_round_trip():
    e = estimate([exchange(0, offset=-2 * MS, out=900_000, back=100_000)])
    assert e.offset_ns != -2 * MS
    assert abs(e.offset_ns - (-2 * MS)) <= e.error_ns == 500_000


def test_the_minimum_delay_exchange_wins():
    burst = [exchange(0, 5 * MS, 3 * MS, 100_000), exchange(10 * MS, 5 * MS, 60_000, 60_000),
             exchange(20 * MS, 5 * MS, 100_000, 4 * MS)]
    e = estimate(burst)
    assert e.delay_ns == 120_000 and e.offset_ns == 5 * MS and (e.samples, e.valid) == (3, 3)


def test_an_exchange_with_a_clock_step_is_ignored_and_none_left_is_an_error():
    stepped = Exchange(t1_ns=100, t2_ns=50, t3_ns=40, t4_ns=200)   # the cell's clock went back
    good = exchange(0, MS, 1000, 1000)
    assert not stepped.valid
    assert estimate([stepped, good]).valid == 1
    with pytest.raises(ValueError, match="no valid clock exchange"):
        estimate([stepped])


def _cell(node, offset, rtt, after_offset=None):
    before = estimate([exchange(0, offset, rtt // 2, rtt // 2)])
    after = None if after_offset is None else estimate([exchange(0, after_offset, rtt // 2,
                                                                 rtt // 2)])
    return CellClock(node=node, before=before, after=after)


def test_bound_refuses_before_t0_and_flags_after_naming_the_node():
    cells = [_cell("n1", 100_000, 200_000, after_offset=150_000),
             _cell("n2", 3 * MS, 200_000, after_offset=3 * MS),            # off before
             _cell("n3", 0, 4 * MS),                                        # cannot vouch
             _cell("n4", 0, 200_000, after_offset=2 * MS)]                  # drifted
    c = check(cells, bound_ns=MS)
    assert [r.split(":")[0] for r in c.refused] == ["n2", "n3"]
    assert "its clock is off" in c.refused[0] and "round trip" in c.refused[1]
    assert "chrony" in c.refused[0]
    assert [f.split(":")[0] for f in c.flagged] == ["n2", "n4"]
    assert "drift 2.000 ms" in c.flagged[1]


def test_start_skew_is_the_two_largest_errors():
    cells = [_cell("a", 0, 200_000), _cell("b", 0, 600_000), _cell("c", 0, 1_000_000)]
    assert check(cells, bound_ns=10 * MS).start_skew_ns == 800_000
    assert check(cells[:1], bound_ns=10 * MS).start_skew_ns == 100_000


def test_t0_lands_on_the_cells_monotonic_clock():
    # the cell's wall clock is 2 ms ahead; read together: wall 1000 s, monotonic 50 s
    t0 = t0_mono_ns(t0_wall_ns=1005 * 10**9, offset_ns=2 * MS, wall_now_ns=1000 * 10**9,
                    mono_now_ns=50 * 10**9)
    assert t0 == 55 * 10**9 + 2 * MS
