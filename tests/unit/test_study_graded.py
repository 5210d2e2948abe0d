"""The graded study's scoring (wotbench/validation/graded.py) on synthetic windows: the
confusion matrix per intensity, the amount's error, naming, clean runs, the targets' words,
the paired ground truth, and the manifest's twin check."""
from __future__ import annotations

import pandas as pd
import pytest

from wotbench.validation import graded
from wotbench.validation.graded import WindowScore
from wotbench.validation.scenarios import read_manifest


def _w(intensity: str, inflation: float, flagged: bool, added: float | None = None,
       named: bool | None = None, window: int = 0, tol: float = 0.3,
       se: float = 0.02) -> WindowScore:
    return WindowScore(scenario="s", intensity=intensity, seed=1, window=window,
                       start_s=10.0 * window, end_s=10.0 * (window + 1), in_episode=True,
                       requests=100, twin_r_ms=6.0, inflation_ms=inflation, tolerance_ms=tol,
                       inflated=inflation > tol, flagged=flagged, added_ms=added, named=named,
                       inflation_se_ms=se, truth=graded.truth_side(inflation, se, tol))


def test_windows_without_ground_truth_are_counted_apart():
    w = _w("a", 2.0, True, 2.0, True)
    w.inflated, w.not_scored = None, "the twin's own verdict flagged this window"
    c = graded.confusion([w, _w("a", 0.0, False, 0.0)])
    assert c["windows"] == 1 and c["not_scored"] == 1 and c["tp"] == 0 and c["tn"] == 1


def test_confusion_counts_rates_amount_error_and_naming():
    ws = [_w("a", 2.0, True, 1.8, True), _w("a", 1.0, True, 1.3, False),   # tp, tp (+30 %)
          _w("a", 0.5, False, 0.2),                                         # fn
          _w("a", 0.1, True, 0.4), _w("a", 0.0, False, 0.0), _w("a", 0.05, False, 0.0)]
    c = graded.confusion(ws)
    assert (c["tp"], c["fn"], c["fp"], c["tn"]) == (2, 1, 1, 2)
    assert c["detected"] == pytest.approx(2 / 3) and c["false_rate"] == pytest.approx(1 / 3)
    # errors: -10 %, +30 %, -60 %: one of three within +-25 %
    assert c["added_within_25"] == pytest.approx(1 / 3)
    assert c["added_rel_err_median"] == pytest.approx(-0.1)
    assert c["named"] == 0.5 and c["named_of"] == 2


def test_score_per_intensity_and_targets_met_only_when_measured():
    ws = [_w("duty 0.45", 2.0, True, 2.1, True), _w("duty 0.45", 0.0, False, 0.0),
          _w("duty 0.15", 0.2, False, 0.1)]
    clean = [{"scenario": f"c{i % 4}", "run_dir": "x", "windows": 3, "flagged": 0}
             for i in range(20)]
    r = graded.score(ws, clean)
    assert set(r["per_intensity"]) == {"duty 0.45", "duty 0.15"}
    assert r["per_intensity"]["duty 0.15"]["detected"] is None      # nothing inflated there
    assert r["met"] == {"detected": True, "false_rate": True, "clean_false_windows": True,
                        "added_within": True, "named": True, "clean_runs": True}
    text = graded.render(r)
    assert "| duty 0.45 | 2 (0) | 1 | 0 | 0 | 1 | 100 % | 0 % |" in text
    assert "| false windows in clean runs | 0 of 60 in 20 runs (4 shapes) | 0 | yes |" in text
    # no clean runs and nothing inflated: "not measured", never "met"
    r2 = graded.score([_w("x", 0.0, False, 0.0)], [])
    assert r2["met"]["detected"] is None and r2["met"]["clean_false_windows"] is None
    assert r2["met"]["clean_runs"] is False
    assert "| inflated windows flagged | — (0 of 0) | ≥ 95 % | not measured |" in graded.render(r2)
    # one false window in a clean run fails that target
    bad = graded.score(ws, clean[:19] + [{"scenario": "c0", "run_dir": "y", "windows": 3,
                                           "flagged": 1}])
    assert bad["met"]["clean_false_windows"] is False


def _requests(d, rows):
    (d / "ge" / "ge-0").mkdir(parents=True)
    pd.DataFrame(rows, columns=["index", "device", "sent_ns", "received_ns",
                                "received_kernel_ns", "outcome"]).to_csv(
        d / "ge" / "ge-0" / "requests.csv", index=False)


def test_paired_requests_match_by_index_and_use_the_kernel_stamp(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _requests(a, [(0, 0, 1_000_000, 9_000_000, 8_000_000, "ok"),
                  (1, 1, 2_000_000, 12_000_000, "", "ok"),          # no kernel stamp: user
                  (2, 0, 3_000_000, "", "", "timeout")])
    _requests(b, [(0, 0, 1_000_000, 7_000_000, 6_000_000, "ok"),
                  (1, 1, 2_000_000, 8_000_000, 7_900_000, "ok"),
                  (2, 0, 3_000_000, 9_000_000, 9_000_000, "ok")])
    m = graded.paired_requests(a, b).sort_values("index")
    assert list(m["index"]) == [0, 1]
    assert list(m["r_ms"]) == [7.0, 10.0] and list(m["twin_r_ms"]) == [5.0, 5.9]


def test_intensity_labels():
    assert graded.intensity_label({"kind": "duty-loop", "duty": 0.45, "workers": 2}) == \
        "duty 0.45 x2 pinned nice 0 user"
    assert graded.intensity_label({"kind": "duty-loop", "duty": 1, "pinned": False, "nice": 19,
                                   "kernel": True}) == "duty 1 x1 free nice 19 kernel"
    assert graded.intensity_label(None) == "none"


def test_a_twin_must_be_a_clean_scenario_of_the_same_config(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("scenarios:\n  - {name: C, config: a.yaml, expect: clean}\n"
                 "  - {name: E, config: b.yaml, expect: episodes, twin: C}\n")
    with pytest.raises(ValueError, match="twin 'C' must be a clean scenario of the same config"):
        read_manifest(m)
    m.write_text("scenarios:\n  - {name: C, config: a.yaml, expect: clean}\n"
                 "  - {name: E, config: a.yaml, expect: episodes, twin: C}\n")
    assert [s["name"] for s in read_manifest(m)] == ["C", "E"]


def test_the_shipped_graded_manifest_reads():
    root = graded.Path(__file__).resolve().parents[2]
    scs = read_manifest(root / "cd-module/validation/graded.scenarios.yaml")
    assert sum(1 for s in scs if s.get("twin")) >= 15


def test_resolution_merges_flagged_windows_and_measures_the_errors():
    from wotbench.validation.resolution import compare, spans
    flags = [(0, 2, False), (2, 4, False), (4, 6, True), (6, 8, True), (8, 10, False),
             (10, 12, True)]
    assert spans(flags) == [(4, 6 + 2), (10, 12)]
    r = compare(spans(flags), (5.0, 9.0))
    # flagged 4-8 and 10-12 against the episode 5-9: onset 1 s early, end 3 s late
    assert r["onset_err_s"] == -1.0 and r["end_err_s"] == 3.0
    assert r["covered"] == 0.75 and r["outside_s"] == 3.0
    assert compare([], (5.0, 9.0))["covered"] == 0.0
    assert compare([(0, 2)], None) == {"onset_err_s": None, "end_err_s": None, "covered": None,
                                       "outside_s": 2}


def test_the_amount_net_of_the_twins_own_is_a_separate_reading_not_the_target():
    # the run's amount 1.5 ms against an inflation of 1.0 (+50 %: outside ±25 %); the twin's own
    # amount in that window 0.4 ms: net 1.1 ms (+10 %: inside). The target keeps the raw figure.
    w = _w("a", 1.0, True, 1.5, True)
    w.twin_added_ms = 0.4
    no_twin = _w("a", 2.0, True, 2.0, True)        # no twin amount: not in the net reading
    c = graded.confusion([w, no_twin])
    assert c["added_within_25"] == pytest.approx(0.5)
    assert c["net_of_twin_within_25"] == pytest.approx(1.0)
    text = graded.render(graded.score([w, no_twin], []))
    assert text.splitlines()[2].endswith("| 100 % |")


def test_episode_share_and_the_devices_amount_of_a_window():
    from types import SimpleNamespace as P
    assert graded.episode_share((15.0, 25.0), 10.0, 20.0) == pytest.approx(0.5)
    assert graded.episode_share((15.0, 25.0), 30.0, 40.0) == 0.0
    assert graded.episode_share(None, 0.0, 10.0) == 0.0
    places = [P(place="core1", requests=300, added_ms=1.0), P(place="core1b", requests=100,
              added_ms=3.0), P(place="ge-0", requests=999, added_ms=9.0),
              P(place="core0", requests=50, added_ms=None)]
    assert graded._devices_added(places, {"core1", "core1b", "core0"}) == pytest.approx(1.5)
    assert graded._devices_added(places, {"nowhere"}) is None


def test_windows_whose_truth_cannot_tell_are_counted_apart_from_the_targets():
    # inflation 0.36 +- 1.96 x 0.08 ms straddles the tolerance of 0.3 ms: the truth cannot say
    # on which side the window is, so its miss counts neither way; the point truth keeps it
    assert graded.truth_side(0.36, 0.08, 0.3) == "cannot tell"
    assert graded.truth_side(0.60, 0.08, 0.3) == "beyond"
    assert graded.truth_side(0.05, 0.08, 0.3) == "within"
    ws = [_w("a", 0.36, False, 0.1, se=0.08),                 # missed, but cannot tell
          _w("a", 1.0, True, 1.1, True), _w("a", 0.8, True, 0.7, True),
          _w("a", 0.0, False, 0.0)]
    c = graded.confusion(ws)
    assert c["detected"] == pytest.approx(2 / 3)               # the point truth
    cl = c["clear"]
    assert (cl["beyond"], cl["within"], cl["cannot_tell"]) == (2, 1, 1)
    assert cl["detected"] == 1.0 and cl["false_rate"] == 0.0
    r = graded.score(ws, [])
    assert r["measured"]["detected"] == 1.0 and r["met"]["detected"] is True
    text = graded.render(r)
    assert "1 cannot tell (0 of them flagged)" in text and "67 % of the inflated" in text

