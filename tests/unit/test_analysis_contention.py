"""The contention rule on synthetic CD series: no false alarms, realistic shifts found in time."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis_fixtures import cd_series
from cd_module.verdict import ContentionParams, assess

P = ContentionParams()


def test_no_false_alarm_on_clean_series_with_steal_spikes():
    # 200 seeds, 1–2 ms steal spikes on 10 % of the probes (≥ 5× the rate seen on the host)
    alarms = [seed for seed in range(200)
              if assess(cd_series(seed, steal_prob=0.10), 60, P)[0].status != "none"]
    assert alarms == []


def test_no_false_alarm_with_heavy_steal_and_many_samples():
    # 0.2 s probes (50 per window, 50 calibration samples) and 15 % spikes: more power,
    # still the magnitude floor keeps clean runs quiet
    for seed in range(40):
        b, _ = assess(cd_series(seed, interval_s=0.2, steal_prob=0.15), 60, P)
        assert b.status == "none", (seed, b.reason)


@pytest.mark.parametrize("kind", ["constant", "uniform"])
@pytest.mark.parametrize("shift", [0.5, 1.0, 3.0])
def test_realistic_shift_is_flagged_with_onset_within_one_window(kind, shift):
    for seed in range(60):
        t0 = float(np.random.default_rng(seed + 1000).uniform(0, 40))
        b, w = assess(cd_series(seed, shift=shift, shift_start_s=t0, shift_kind=kind,
                                steal_prob=0.05), 60, P)
        assert b.status == "detected", (seed, t0, b.reason)
        assert t0 - P.window_s <= b.onset_s <= t0 + P.window_s, (seed, t0, b.onset_s)
        assert b.max_shift > 0.3 * shift
        assert b.max_ratio > 1.0
        # windows wholly before the shift are never flagged
        before = w[w["end_s"] <= t0]
        assert not before["flagged"].any()


def test_window_samples_mode_and_magnitudes():
    s = cd_series(1, shift=1.0, shift_start_s=30, shift_kind="constant", steal_prob=0.0)
    b, w = assess(s, 60, ContentionParams(window_samples=10))
    assert b.status == "detected"
    assert len(w) == 6 and w["samples"].tolist() == [10] * 6
    assert b.onset_s == pytest.approx(30, abs=0.1)
    assert b.median_shift == pytest.approx(1.0, abs=0.05)
    base_r = 1 + b.baseline.median_rd
    assert b.max_ratio == pytest.approx((base_r + 1.0) / base_r, rel=0.05)


def test_too_few_calibration_samples_is_inconclusive():
    s = cd_series(2, cal_s=5, shift=3.0, shift_start_s=0)
    b, w = assess(s, 60, P)
    assert b.status == "inconclusive" and "5 calibration samples" in b.reason
    assert not w["tested"].any()


def test_sparse_windows_are_not_tested_and_no_data_is_not_checked():
    s = cd_series(3, interval_s=3.0, cal_s=30)  # ~3 samples per 10 s window
    b, w = assess(s, 60, P)
    assert b.status == "inconclusive" and "window" in b.reason
    b, _ = assess(None, 60, P)
    assert b.status == "not_checked"


def test_lost_probes_count_as_slowest_not_zero():
    s = cd_series(4, steal_prob=0.0)
    test_idx = s.index[(s["t_s"] >= 20) & (s["t_s"] < 30)]
    s.loc[test_idx[:7], "outcome"] = "timeout"
    s.loc[test_idx[:7], "rd"] = np.nan
    b, w = assess(s, 60, P)
    assert b.status == "detected"
    row = w[w["start_s"] == 20].iloc[0]
    assert row["lost"] == 7 and row["flagged"]
    # unsent probes are simply ignored
    s2 = cd_series(4, steal_prob=0.0)
    s2.loc[s2["t_s"] > 40, "outcome"] = "unsent"
    b2, w2 = assess(s2, 60, P)
    assert b2.status == "none"
    assert w2[w2["start_s"] >= 50]["samples"].sum() == 0


def _with_rt(df, service_ms=5.0, extra_ms=0.0):
    """Give a synthetic CD series response times (rt = S·(1 + R_d)), optionally slowed throughout."""
    df = df.copy()
    df["rt_ms"] = service_ms * (1.0 + df["rd"]) + extra_ms
    df["rd"] = (df["rt_ms"] - service_ms) / service_ms
    return df


def test_contended_calibration_is_flagged_absolutely():
    """Another workload on the device cores from the start inflates the baseline itself: the
    relative window rule sees no change, the absolute baseline check must still flag it."""
    b, _ = assess(_with_rt(cd_series(3, steal_prob=0.0), extra_ms=8.0), 60, P)
    assert b.baseline.absolute.elevated is True
    assert b.windows_flagged == 0 and b.status == "detected"
    assert "already slowed during calibration" in b.reason


def test_quiet_calibration_is_not_elevated_across_seeds():
    for seed in range(50):
        b, _ = assess(_with_rt(cd_series(seed, steal_prob=0.10)), 60, P)
        assert b.baseline.absolute.elevated is False, seed
        assert b.status == "none", seed


def test_a_cd_flag_without_a_ratio_is_worded_not_crashed():
    """A window where the CD node lost most of its probes has a shift but no ratio."""
    from cd_module.verdict import combine
    from wotbench.rundir.evidence import EvidenceBlock
    from wotbench.rundir.summary import FlaggedWindow
    block = assess(cd_series(3), 20, P)[0].model_copy(update={
        "status": "detected",
        "flagged_windows": [FlaggedWindow(start_s=10.0, end_s=20.0, shift=None, ratio=None,
                                          p_value=0.001)]})
    out = combine(block, EvidenceBlock())
    assert out.flagged_windows[0].evidence == ["CD node R_d median rose by an unknown amount"]
