"""Cumulative counters across a restarted component (wotbench.monitor.counters)."""
import numpy as np

from wotbench.monitor.counters import monotone


def test_a_drop_continues_from_the_last_value_and_gaps_stay_gaps():
    cum = np.array([10.0, 20.0, np.nan, 2.0, 5.0, 1.0, 4.0])
    out = monotone(cum)
    # 20 carried over the first restart, 25 over the second; the unread sample stays unread
    assert np.isnan(out[2])
    assert out[[0, 1, 3, 4, 5, 6]].tolist() == [10.0, 20.0, 22.0, 25.0, 26.0, 29.0]
    assert (np.diff(out[np.isfinite(out)]) >= 0).all()


def test_a_series_without_a_drop_is_unchanged():
    cum = np.array([0.0, 3.0, 3.0, 9.0])
    assert monotone(cum).tolist() == cum.tolist()
    assert monotone(np.array([5.0])).tolist() == [5.0]
