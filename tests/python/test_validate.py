"""Table logic of the validation driver (wotbench.validate) on fake run results."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wotbench import validate as v


def fake_run(*, status="none", flagged=(), episodes=(), dev_p50=(0.1, 0.1, 0.1), window=10.0,
             rd_dev=0.1, onset=None):
    dev_windows = [{"start_s": i * window, "end_s": (i + 1) * window, "p50_rd": x, "count": 50}
                   for i, x in enumerate(dev_p50)]
    fl = [{"start_s": a, "end_s": b} for a, b in flagged]
    if onset is None and fl:
        onset = fl[0]["start_s"]
    return {
        "run_dir": "/x",
        "episodes": [{"name": f"hog-{i}", "kind": k, "cores": [1], "start_s": a, "end_s": b}
                     for i, (k, a, b) in enumerate(episodes)],
        "contention": {"status": status, "reason": "r", "onset_s": onset, "window_s": window,
                       "windows_tested": len(dev_p50), "windows_flagged": len(fl),
                       "baseline": None, "flagged_windows": fl},
        "cd_windows": [], "dev_windows": dev_windows, "rd_devices_p50": rd_dev,
        "rd_cd_cal_p50": 0.05, "rd_cd_test_p50": 0.06, "verdict": "trustworthy",
    }


def test_clean_pass_and_false_alarm():
    ev = v.evaluate_run(fake_run(), "clean")
    assert ev["passed"] and ev["checks"] == {"no_false_alarm": True}
    assert ev["contention_present"] is False and ev["onset_matched"] is True
    ev = v.evaluate_run(fake_run(status="detected", flagged=[(10, 20)]), "clean")
    assert not ev["passed"] and ev["cd_false_windows"] == [[10, 20]]


def test_clean_inconclusive_is_not_a_pass():
    ev = v.evaluate_run(fake_run(status="inconclusive"), "clean")
    assert not ev["passed"] and ev["checks"]["cd_answered"] is False


def test_episode_detected_onset_matched():
    run = fake_run(status="detected", flagged=[(10, 20)], episodes=[("cpu", 10, 20)],
                   dev_p50=(0.1, 1.2, 0.12))
    ev = v.evaluate_run(run, "episodes")
    assert ev["passed"], ev["checks"]
    assert ev["episodes"][0]["cd_flagged"] and ev["episodes"][0]["devices_rose"]
    assert ev["devices_onset_s"] == 10 and ev["cd_onset_s"] == 10 and ev["episode_onset_s"] == 10


def test_episode_missed():
    run = fake_run(status="none", episodes=[("cpu", 10, 20)], dev_p50=(0.1, 1.2, 0.1))
    ev = v.evaluate_run(run, "episodes")
    assert not ev["passed"]
    assert ev["checks"]["every_episode_flagged"] is False
    assert ev["checks"]["onset_matched"] is False      # devices rose, CD silent


def test_false_window_outside_episode():
    run = fake_run(status="detected", flagged=[(0, 10), (10, 20)], episodes=[("cpu", 10, 20)],
                   dev_p50=(0.1, 1.2, 0.1))
    ev = v.evaluate_run(run, "episodes")
    assert ev["cd_false_windows"] == [[0, 10]]
    assert ev["checks"]["every_episode_flagged"] and not ev["checks"]["no_false_window"]
    assert ev["checks"]["onset_matched"]               # 0 vs 10: within one window
    assert not ev["passed"]


def test_onset_two_windows_late_is_not_matched():
    run = fake_run(status="detected", flagged=[(30, 40)], episodes=[("cpu", 10, 40)],
                   dev_p50=(0.1, 1.0, 1.0, 1.0, 0.1))
    ev = v.evaluate_run(run, "episodes")
    assert ev["checks"]["every_episode_flagged"]
    assert ev["devices_onset_s"] == 10 and ev["cd_onset_s"] == 30
    assert ev["onset_matched"] is False


def test_partial_overlap_counts_as_flagged():
    run = fake_run(status="detected", flagged=[(10, 20)], episodes=[("cpu", 15, 25)],
                   dev_p50=(0.1, 0.5, 0.5, 0.1))
    ev = v.evaluate_run(run, "episodes")
    assert ev["episodes"][0]["cd_flagged"] and not ev["cd_false_windows"]


def test_agree_both_silent_and_disagree():
    run = fake_run(status="none", episodes=[("membw", 10, 20), ("cache", 30, 40)],
                   dev_p50=(0.1, 0.105, 0.1, 0.1))
    ev = v.evaluate_run(run, "agree")
    assert ev["passed"] and ev["onset_matched"] is True
    run = fake_run(status="none", episodes=[("membw", 10, 20)], dev_p50=(0.1, 0.5, 0.1))
    ev = v.evaluate_run(run, "agree")
    assert not ev["passed"] and ev["checks"]["cd_agrees_with_devices"] is False


def test_device_rise_reference_excludes_episodes():
    d = v.device_rise([{"start_s": 0, "end_s": 10, "p50_rd": 0.0},
                       {"start_s": 10, "end_s": 20, "p50_rd": 1.0},
                       {"start_s": 20, "end_s": 30, "p50_rd": 0.0}],
                      [{"start_s": 10, "end_s": 20}])
    assert d["reference_rt_ratio"] == pytest.approx(1.0)
    assert [w["rose"] for w in d["windows"]] == [False, True, False]
    assert d["onset_s"] == 10
    # rise threshold: 10 % of the response time, strictly
    d = v.device_rise([{"start_s": 0, "end_s": 10, "p50_rd": 0.0},
                       {"start_s": 10, "end_s": 20, "p50_rd": 0.1}], [])
    assert d["windows"][1]["rose"] is False
    assert v.device_rise([], [])["onset_s"] is None


def _series_run(rd, status):
    return {"rd_devices_p50": rd, "rd_cd_cal_p50": 0.05, "rd_cd_test_p50": rd,
            "contention": {"status": status, "windows_flagged": 1 if status == "detected" else 0,
                           "windows_tested": 2}, "verdict": "x", "run_dir": "/r"}


def test_series_onset_within_one_step():
    pts = [(20, _series_run(0.5, "detected")), (5, _series_run(0.1, "none")),
           (10, _series_run(0.15, "none")), (15, _series_run(0.3, "detected"))]
    ev = v.evaluate_series(pts)
    assert [p["value"] for p in ev["points"]] == [5, 10, 15, 20]
    assert ev["devices_onset"] == 15 and ev["cd_onset"] == 15 and ev["onset_steps_apart"] == 0
    assert ev["passed"]


def test_series_cd_two_steps_late_fails():
    pts = [(5, _series_run(0.1, "none")), (10, _series_run(0.4, "none")),
           (15, _series_run(0.6, "none")), (20, _series_run(1.0, "detected"))]
    ev = v.evaluate_series(pts)
    assert ev["devices_onset"] == 10 and ev["cd_onset"] == 20 and ev["onset_steps_apart"] == 2
    assert not ev["passed"]


def test_series_never_rises_never_flags_passes_and_inconclusive_fails():
    pts = [(5, _series_run(0.1, "none")), (10, _series_run(0.12, "none"))]
    assert v.evaluate_series(pts)["passed"]
    pts = [(5, _series_run(0.1, "inconclusive")), (10, _series_run(0.12, "none"))]
    ev = v.evaluate_series(pts)
    assert not ev["passed"] and ev["checks"]["cd_answered"] is False


def test_render_table_rows():
    ok = {"name": "V-cpu-hog", "load": {"before": 0.3, "after": 0.9},
          "evaluation": v.evaluate_run(fake_run(status="detected", flagged=[(10, 20)],
                                                episodes=[("cpu", 10, 20)],
                                                dev_p50=(0.1, 1.2, 0.1)), "episodes")}
    sk = {"name": "V-clean-light", "skipped": "host never quiet", "load": {"before": 2.0}}
    sc = {"name": "V-scale", "evaluation": v.evaluate_series(
        [(5, _series_run(0.1, "none")), (10, _series_run(0.5, "detected"))])}
    fl = {"name": "V-membw", "evaluation": None, "error": "no summary.json"}
    t = v.render_table([ok, sk, sc, fl])
    assert "| V-cpu-hog | cpu 10–20 | detected | 10–20 |" in t and "PASS" in t
    assert "0.30→0.90" in t
    assert "not run: host never quiet" in t
    assert "V-scale n=5" in t and "V-scale n=10" in t and "CD onset n=10" in t
    assert "run failed: no summary.json" in t


def test_busy_processes_filters_own_tree():
    ps = ("  10 /usr/bin/python -m pytest tests\n"
          "  11 bash\n"
          "  12 /work/main/.venv/bin/wotbench run x.yaml\n"
          "  13 /work/main/.venv/bin/python -m wotbench.validate\n"
          "  14 gcc -O2 x.c\n")
    got = v.busy_processes(ps, exclude={13})
    assert [g.split()[0] for g in got] == ["10", "12", "14"]


def test_load_run_from_files(tmp_path: Path):
    (tmp_path / "series").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({
        "cd": {"device": "cd-node", "service_time_us": 5000, "mode": "busy", "interval_s": 1.0,
               "calibration_s": 30},
        "contention": [{"name": "hog-0-cpu", "kind": "cpu", "cores": [1], "start_s": 10,
                        "end_s": 20}]}))
    (tmp_path / "summary.json").write_text(json.dumps({
        "contention": {"status": "detected", "onset_s": 10.0, "params": {"window_s": 10.0},
                       "windows_tested": 3, "windows_flagged": 1,
                       "flagged_windows": [{"start_s": 10.0, "end_s": 20.0}]},
        "rd": {"overall": {"rd": {"p50": 0.2}}, "cd": {"calibration": {"p50": 0.05},
                                                       "test": {"p50": 0.4}}},
        "verdict": {"status": "contention", "reasons": []}, "overall": {"devices": 5}}))
    with (tmp_path / "series" / "rd_over_time.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["window_start_s", "window_end_s", "device", "count", "p50_rd", "p95_rd", "mean_rd"])
        for i, x in enumerate([0.1, 1.0, 0.1]):
            w.writerow([i * 10, i * 10 + 10, "all", 50, x, x, x])
            w.writerow([i * 10, i * 10 + 10, "cd-node", 10, x, x, x])
    with (tmp_path / "series" / "contention_windows.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["window", "start_s", "end_s", "samples", "lost", "median_rd", "shift", "ratio",
                    "p_value", "tested", "flagged"])
        w.writerow([0, 0, 10, 10, 0, 0.05, 0, 1, 0.5, True, False])
        w.writerow([1, 10, 20, 10, 0, 1.0, 0.95, 1.9, 0.0001, True, True])
    run = v.load_run(tmp_path)
    assert len(run["dev_windows"]) == 3 and run["episodes"][0]["end_s"] == 20.0
    assert run["cd_windows"][1]["flagged"] is True
    ev = v.evaluate_run(run, "episodes")
    assert ev["passed"] and ev["rd_cd_test_p50"] == 0.4


def test_manifest_is_valid():
    root = Path(__file__).resolve().parents[2]
    scs = v.read_manifest(root / "configs" / "validation" / "scenarios.yaml")
    names = [s["name"] for s in scs]
    assert {"V-clean-light", "V-clean-sleep", "V-cpu-hog", "V-membw", "V-scale"} <= set(names)
    for s in scs:
        assert (root / "configs" / "validation" / s["config"]).is_file()


def test_manifest_rejects_bad_expect(tmp_path: Path):
    p = tmp_path / "m.yaml"
    p.write_text("scenarios:\n  - {name: a, config: a.yaml, expect: maybe}\n")
    with pytest.raises(ValueError, match="expect must be"):
        v.read_manifest(p)


def test_simulate_rule_separates_null_and_big_shift():
    pool = [0.05, 0.06, 0.07, 0.08, 0.06, 0.05, 0.09, 0.07, 0.06, 0.3]
    null = v.simulate_rule(pool, n_cal=30, n_win=10, windows=3, shift=0.0, trials=30)
    big = v.simulate_rule(pool, n_cal=30, n_win=10, windows=3, shift=1.0, trials=30)
    assert null["false_alarm"] <= 0.1
    assert big["detected"] == 1.0
