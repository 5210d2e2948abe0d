"""Table logic of the validation study (wotbench.validation) on fake run results."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from summary_factory import make_summary
from wotbench.rundir import CdRecord, EpisodeRecord, RunDir, RunRecord
from wotbench.monitor.quiet import busy_processes
from wotbench.validation.facts import load_run
from wotbench.validation.research import simulate_rule
from wotbench.validation.rules import device_rise, evaluate_run, evaluate_series
from wotbench.validation.scenarios import read_manifest


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
    ev = evaluate_run(fake_run(), "clean")
    assert ev["passed"] and ev["checks"] == {"no_false_alarm": True}
    assert ev["contention_present"] is False and ev["onset_matched"] is True
    ev = evaluate_run(fake_run(status="detected", flagged=[(10, 20)]), "clean")
    assert not ev["passed"] and ev["cd_false_windows"] == [[10, 20]]


def test_clean_inconclusive_is_not_a_pass():
    ev = evaluate_run(fake_run(status="inconclusive"), "clean")
    assert not ev["passed"] and ev["checks"]["cd_answered"] is False


def test_episode_detected_onset_matched():
    run = fake_run(status="detected", flagged=[(10, 20)], episodes=[("cpu", 10, 20)],
                   dev_p50=(0.1, 1.2, 0.12))
    ev = evaluate_run(run, "episodes")
    assert ev["passed"], ev["checks"]
    assert ev["episodes"][0]["cd_flagged"] and ev["episodes"][0]["devices_rose"]
    assert ev["devices_onset_s"] == 10 and ev["cd_onset_s"] == 10 and ev["episode_onset_s"] == 10


def test_episode_missed():
    run = fake_run(status="none", episodes=[("cpu", 10, 20)], dev_p50=(0.1, 1.2, 0.1))
    ev = evaluate_run(run, "episodes")
    assert not ev["passed"]
    assert ev["checks"]["every_episode_flagged"] is False
    assert ev["checks"]["onset_matched"] is False      # devices rose, CD silent


def test_false_window_outside_episode():
    run = fake_run(status="detected", flagged=[(0, 10), (10, 20)], episodes=[("cpu", 10, 20)],
                   dev_p50=(0.1, 1.2, 0.1))
    ev = evaluate_run(run, "episodes")
    assert ev["cd_false_windows"] == [[0, 10]]
    assert ev["checks"]["every_episode_flagged"] and not ev["checks"]["no_false_window"]
    assert ev["checks"]["onset_matched"]               # 0 vs 10: within one window
    assert not ev["passed"]


def test_onset_two_windows_late_is_not_matched():
    run = fake_run(status="detected", flagged=[(30, 40)], episodes=[("cpu", 10, 40)],
                   dev_p50=(0.1, 1.0, 1.0, 1.0, 0.1))
    ev = evaluate_run(run, "episodes")
    assert ev["checks"]["every_episode_flagged"]
    assert ev["devices_onset_s"] == 10 and ev["cd_onset_s"] == 30
    assert ev["onset_matched"] is False


def test_partial_overlap_counts_as_flagged():
    run = fake_run(status="detected", flagged=[(10, 20)], episodes=[("cpu", 15, 25)],
                   dev_p50=(0.1, 0.5, 0.5, 0.1))
    ev = evaluate_run(run, "episodes")
    assert ev["episodes"][0]["cd_flagged"] and not ev["cd_false_windows"]


def test_agree_both_silent_and_disagree():
    run = fake_run(status="none", episodes=[("membw", 10, 20), ("cache", 30, 40)],
                   dev_p50=(0.1, 0.105, 0.1, 0.1))
    ev = evaluate_run(run, "agree")
    assert ev["passed"] and ev["onset_matched"] is True
    run = fake_run(status="none", episodes=[("membw", 10, 20)], dev_p50=(0.1, 0.5, 0.1))
    ev = evaluate_run(run, "agree")
    assert not ev["passed"] and ev["checks"]["cd_agrees_with_devices"] is False


def test_device_rise_reference_excludes_episodes():
    d = device_rise([{"start_s": 0, "end_s": 10, "p50_rd": 0.0},
                       {"start_s": 10, "end_s": 20, "p50_rd": 1.0},
                       {"start_s": 20, "end_s": 30, "p50_rd": 0.0}],
                      [{"start_s": 10, "end_s": 20}])
    assert d["reference_rt_ratio"] == pytest.approx(1.0)
    assert [w["rose"] for w in d["windows"]] == [False, True, False]
    assert d["onset_s"] == 10
    # rise threshold: 10 % of the response time, strictly
    d = device_rise([{"start_s": 0, "end_s": 10, "p50_rd": 0.0},
                       {"start_s": 10, "end_s": 20, "p50_rd": 0.1}], [])
    assert d["windows"][1]["rose"] is False
    assert device_rise([], [])["onset_s"] is None


def _series_run(rd, status):
    return {"rd_devices_p50": rd, "rd_cd_cal_p50": 0.05, "rd_cd_test_p50": rd,
            "contention": {"status": status, "windows_flagged": 1 if status == "detected" else 0,
                           "windows_tested": 2}, "verdict": "x", "run_dir": "/r"}


def test_series_onset_within_one_step():
    pts = [(20, _series_run(0.5, "detected")), (5, _series_run(0.1, "none")),
           (10, _series_run(0.15, "none")), (15, _series_run(0.3, "detected"))]
    ev = evaluate_series(pts)
    assert [p["value"] for p in ev["points"]] == [5, 10, 15, 20]
    assert ev["devices_onset"] == 15 and ev["cd_onset"] == 15 and ev["onset_steps_apart"] == 0
    assert ev["passed"]


def test_series_cd_two_steps_late_fails():
    pts = [(5, _series_run(0.1, "none")), (10, _series_run(0.4, "none")),
           (15, _series_run(0.6, "none")), (20, _series_run(1.0, "detected"))]
    ev = evaluate_series(pts)
    assert ev["devices_onset"] == 10 and ev["cd_onset"] == 20 and ev["onset_steps_apart"] == 2
    assert not ev["passed"]


def test_series_never_rises_never_flags_passes_and_inconclusive_fails():
    pts = [(5, _series_run(0.1, "none")), (10, _series_run(0.12, "none"))]
    assert evaluate_series(pts)["passed"]
    pts = [(5, _series_run(0.1, "inconclusive")), (10, _series_run(0.12, "none"))]
    ev = evaluate_series(pts)
    assert not ev["passed"] and ev["checks"]["cd_answered"] is False


def test_busy_processes_filters_own_tree():
    ps = ("  10 /usr/bin/python -m pytest tests\n"
          "  11 bash\n"
          "  12 /work/main/.venv/bin/wotbench run x.yaml\n"
          "  13 /work/main/.venv/bin/wotbench study\n"
          "  14 gcc -O2 x.c\n")
    got = busy_processes(ps, exclude={13})
    assert [g.split()[0] for g in got] == ["10", "12", "14"]


def test_busy_processes_count_programs_not_arguments():
    """A command waiting in flock (or a timeout/shell wrapper around one) uses no CPU, nor does a
    grep for 'wotbench'; what they start is listed itself once it runs."""
    ps = ("  20 flock /tmp/wotbench-exclusive.lock .venv/bin/wotbench run x.yaml\n"
          "  21 timeout 400 flock /tmp/wotbench-exclusive.lock make test\n"
          "  22 /bin/bash -c cd /work/x && pytest -q\n"
          "  23 .venv/bin/python -m pytest tests/unit -q\n"
          "  24 grep -a wotbench/__init__ run.log\n"
          "  25 /work/wt-x/.venv/bin/python -m wotbench.cli trace --stats t.csv\n"
          "  26 /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet x.c\n"
          "  27 docker build -t wotbench/device .\n"
          "  28 tail -f /work/wt-x/wotbench.log\n")
    assert [g.split()[0] for g in busy_processes(ps, exclude=set())] == ["23", "25", "26", "27"]


def test_load_run_from_files(tmp_path: Path):
    (tmp_path / "series").mkdir()
    rd = RunDir(tmp_path)
    rd.write_run(RunRecord(
        cd=CdRecord(device="cd-node", service_time_us=5000, mode="busy", interval_s=1.0,
                    calibration_s=30),
        contention=[EpisodeRecord(name="hog-0-cpu", kind="cpu", cores=[1], start_s=10, end_s=20)]))
    rd.write_summary(make_summary(devices=5, verdict="contention", rd_devices=0.2,
                                  rd_cd_calibration=0.05, rd_cd_test=0.4,
                                  flagged_windows=((10.0, 20.0),)))
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
    run = load_run(tmp_path)
    assert len(run["dev_windows"]) == 3 and run["episodes"][0]["end_s"] == 20.0
    assert run["cd_windows"][1]["flagged"] is True
    ev = evaluate_run(run, "episodes")
    assert ev["passed"] and ev["rd_cd_test_p50"] == 0.4


def test_manifest_is_valid():
    root = Path(__file__).resolve().parents[2]
    scs = read_manifest(root / "cd-module" / "validation" / "scenarios.yaml")
    names = [s["name"] for s in scs]
    assert {"V-clean-light", "V-clean-sleep", "V-cpu-hog", "V-membw", "V-scale"} <= set(names)
    for s in scs:
        assert (root / "cd-module" / "validation" / s["config"]).is_file()


@pytest.mark.parametrize("text, message", [
    ("scenarios: [x\n", "not valid YAML"),
    ("scenarios: {a: 1}\n", "expected 'scenarios:' with a list"),
    ("scenarios:\n  - {name: a, config: a.yaml, expect: clean}\n"
     "  - {name: a, config: b.yaml, expect: clean}\n", "scenario name given twice: a"),
    ("scenarios:\n  - {name: s, config: a.yaml, expect: scale, vary: {key: x}}\n",
     "vary must be {key: KEY, values: [V1, ...]}"),
])
def test_manifest_problems_name_the_file(tmp_path: Path, text, message):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        read_manifest(p)
    assert str(e.value).startswith(f"{p}: ")
    with pytest.raises(ValueError, match="file not found"):
        read_manifest(tmp_path / "none.yaml")


def test_manifest_rejects_bad_expect(tmp_path: Path):
    p = tmp_path / "m.yaml"
    p.write_text("scenarios:\n  - {name: a, config: a.yaml, expect: maybe}\n")
    with pytest.raises(ValueError, match="expect must be"):
        read_manifest(p)


def test_simulate_rule_separates_null_and_big_shift():
    pool = [0.05, 0.06, 0.07, 0.08, 0.06, 0.05, 0.09, 0.07, 0.06, 0.3]
    null = simulate_rule(pool, n_cal=30, n_win=10, windows=3, shift=0.0, trials=30)
    big = simulate_rule(pool, n_cal=30, n_win=10, windows=3, shift=1.0, trials=30)
    assert null["false_alarm"] <= 0.1
    assert big["detected"] == 1.0
