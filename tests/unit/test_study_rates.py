"""The study's rate rules (wotbench.validation.rates) and the ground truth of its antagonists
(wotbench.validation.facts) on fake runs: window classes, naming, the second run's interval."""
from __future__ import annotations

import pytest

from wotbench.validation.antagonist import AntagonistRecord, SecondRunRecord
from wotbench.validation.facts import antagonist_episode, second_run_interval
from wotbench.validation.rates import (classify, grade_run, grade_series_repeat, grid_windows,
                                       names, summarize, totals)
from wotbench.validation.table import render_table

T0 = 5_000_000_000_000          # the main run's test start, CLOCK_MONOTONIC ns


def run(*, flagged=(), episodes=(), windows=4, window=10.0, ev=None, status=None, cd_status="none"):
    """A fact dict as load_run makes it: ``flagged`` = [(start, shown_by, evidence texts)]."""
    fl = [{"start_s": a, "end_s": a + window, "shown_by": by, "evidence": list(txt)}
          for a, by, txt in flagged]
    return {"episodes": list(episodes), "duration_s": windows * window,
            "evidence_windows": ev if ev is not None else
            [{"start_s": i * window, "end_s": (i + 1) * window, "antagonists": [], "flags": []}
             for i in range(windows)],
            "contention": {"status": status or ("detected" if fl else "none"), "window_s": window,
                           "flagged_windows": fl},
            "cd_status": cd_status}


def ep(a, b, **kw):
    return {"name": "x", "kind": kw.pop("kind", "busy-loop"), "start_s": a, "end_s": b,
            "outer": kw.pop("outer", None), "process": True,
            "name_by": kw.pop("name_by", {"pid": 42, "comm": "sh"}), **kw}


@pytest.mark.parametrize("episode, expect", [
    ((15, 25), "episode"),     # 50 % of 10-20
    ((17, 40), "episode"),     # 30 % exactly counts
    ((18, 40), "edge"),        # 20 %: neither way
    ((20, 30), "clear"),       # touches the end only
    ((0, 10), "clear"),
])
def test_window_classes_by_overlap_share(episode, expect):
    assert classify((10.0, 20.0), [ep(*episode)])[0] == expect


def test_an_outer_bound_makes_edge_windows_not_clear_ones():
    second = ep(12, 25, outer=[3, 33], kind="second-run")
    assert classify((0.0, 10.0), [second])[0] == "edge"      # its deploy: neither way
    assert classify((10.0, 20.0), [second])[0] == "episode"
    assert classify((30.0, 40.0), [second])[0] == "edge"     # its teardown
    assert classify((40.0, 50.0), [second])[0] == "clear"


def test_straddling_episode_detection_false_windows_and_onset():
    # busy loop 15-25 s: windows 10-20 and 20-30 are episode windows (50 % each)
    r = run(episodes=[ep(15, 25)],
            flagged=[(10, ["foreign"], ["core 1: `sh` (pid 42, outside the testbed) used 0.50"]),
                     (30, ["cd"], [])])
    g = grade_run(r)
    assert [w["class"] for w in g["windows"]] == ["clear", "episode", "episode", "clear"]
    c = g["counts"]
    assert c["episode_windows"] == 2 and c["flagged_episode_windows"] == 1
    assert c["flagged_clear_windows"] == 1 and c["clear_windows"] == 2
    assert g["onsets"][0]["delay_s"] == -5 and g["onsets"][0]["within_one_window"]
    assert c["named_windows"] == 1 and c["namable_windows"] == 1
    s = summarize([g], "episodes")
    assert s["detection"] == 0.5 and s["false_windows"] == 1 and s["false_alarm"] == 0.5
    assert s["shown_by"] == {"foreign": 1} and s["false_shown_by"] == {"cd": 1}
    assert s["cd_detection"] == 0 and s["cd_false_windows"] == 1
    assert not s["passed"] and s["checks"]["detection"] is False


def test_onset_two_windows_late_fails_and_a_missed_episode_has_no_delay():
    g = grade_run(run(episodes=[ep(0, 40)], flagged=[(20, ["cpu_wait"], [])]))
    assert g["onsets"][0]["delay_s"] == 20 and not g["onsets"][0]["within_one_window"]
    g = grade_run(run(episodes=[ep(10, 20)]))
    assert g["onsets"][0]["delay_s"] is None and not g["onsets"][0]["within_one_window"]


def test_rates_add_up_over_repeats():
    hit = grade_run(run(episodes=[ep(10, 20)], flagged=[(10, ["cd", "foreign"], [])]))
    miss = grade_run(run(episodes=[ep(10, 20)]))
    s = summarize([hit, hit, miss], "episodes")
    assert s["runs"] == 3 and s["detection"] == pytest.approx(2 / 3)
    assert s["shown_by"] == {"cd": 2, "foreign": 2} and s["cd_detection"] == pytest.approx(2 / 3)
    assert s["onset_pass"] == pytest.approx(2 / 3)
    assert s["naming"] == 0.0     # the busy loop was never named


def test_clean_runs_pass_only_without_false_windows():
    assert summarize([grade_run(run()) for _ in range(3)], "clean")["passed"]
    s = summarize([grade_run(run()), grade_run(run(flagged=[(0, ["wakeup"], [])]))], "clean")
    assert not s["passed"] and s["false_windows"] == 1 and s["false_alarm"] == 1 / 8


@pytest.mark.parametrize("name_by, antagonists, texts, expect", [
    ({"pid": 42, "comm": "sh"}, [{"pid": 42, "comm": "sh", "owner_kind": "host"}], [], True),
    ({"pid": 42, "comm": "sh"}, [{"pid": 43, "comm": "sh", "owner_kind": "host"}], [], False),
    ({"pid": 42, "comm": "sh"}, [], ["core 1: `sh` (pid 42, outside the testbed) used 0.5"], True),
    ({"pid": 42, "comm": "sh"}, [], ["core 1: `sh` (pid 421, outside the testbed)"], False),
    ({"owner_kind": "injected"}, [{"pid": 7, "comm": "hog", "owner_kind": "injected"}], [], True),
    ({"owner_kind": "injected"}, [{"pid": 7, "comm": "hog", "owner_kind": "container"}], [], False),
    ({"owner_kind": "wotbench", "owner": "v-2-20261124T200000Z"},
     [{"pid": 9, "comm": "wot-device", "owner_kind": "wotbench", "owner": "v-2-20261124T200000Z"}],
     [], True),
    ({"owner_kind": "wotbench", "owner": "v-2-20261124T200000Z"},
     [{"pid": 9, "comm": "wot-device", "owner_kind": "wotbench", "owner": "another"}], [], False),
    ({"pid": 50, "comm": "hog", "owner_kind": "container", "owner": "study-antagonist-1"},
     [{"pid": 51, "comm": "hog", "owner_kind": "container", "owner": "study-antagonist-1"}],
     [], True),
    # a launcher's worker (another pid of the same command line), named by its pid in the text
    ({"pid": 60, "comm": "python3", "cmdline": "python3 -m dutyhog --duty 0.45"},
     [{"pid": 61, "comm": "python3", "cmdline": "python3 -m dutyhog --duty 0.45"}],
     ["core 1: `python3` (pid 61, outside the testbed: `python3 -m dutyhog`) used 0.2"], True),
    ({"pid": 60, "comm": "python3", "cmdline": "python3 -m dutyhog --duty 0.45"},
     [{"pid": 61, "comm": "python3", "cmdline": "python3 -m dutyhog --duty 0.45"}], [], False),
    ({"pid": 60, "comm": "python3", "cmdline": "python3 -m dutyhog --duty 0.45"},
     [{"pid": 61, "comm": "python3", "cmdline": "python3 -m other"}],
     ["core 1: `python3` (pid 61, outside the testbed)"], False),
])
def test_naming_match(name_by, antagonists, texts, expect):
    assert names(name_by, antagonists, texts) is expect


def test_naming_reads_the_evidence_window_of_the_flagged_window():
    ev = [{"start_s": i * 10.0, "end_s": i * 10.0 + 10, "flags": [],
           "antagonists": [{"pid": 42, "comm": "sh", "owner_kind": "host"}] if i == 2 else []}
          for i in range(4)]
    g = grade_run(run(episodes=[ep(15, 25)], ev=ev,
                      flagged=[(10, ["cpu_wait"], []), (20, ["foreign"], [])]))
    assert [w.get("named") for w in g["windows"]] == [None, False, True, None]
    assert g["counts"]["named_windows"] == 1 and g["counts"]["namable_windows"] == 2


def test_an_antagonist_that_is_no_process_is_not_in_the_naming_rate():
    overload = dict(ep(0, 40), process=False, name_by=None)
    g = grade_run(run(episodes=[overload], flagged=[(0, ["stretch"], [])]))
    assert g["counts"].get("namable_windows", 0) == 0


def test_the_grid_comes_from_evidence_else_cd_windows_else_the_duration():
    assert grid_windows(run(windows=3))[-1] == (20.0, 30.0)
    r = run(windows=3, ev=[])
    assert grid_windows(r) == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)]
    r = {**r, "duration_s": 25.0}
    assert grid_windows(r)[-1] == (20.0, 25.0)


def _second(**kw) -> SecondRunRecord:
    return SecondRunRecord(out_root="o", argv=["wotbench", "run"], **kw)


def test_second_run_interval_on_the_shared_monotonic_clock():
    second = _second(t0_mono_ns=T0 + 8_500_000_000,
                     test={"start_mono_ns": T0 + 8_500_000_000, "duration_s": 15.0})
    assert second_run_interval(second, T0) == pytest.approx((8.5, 23.5))
    with_cal = _second(t0_mono_ns=T0 - 2_000_000_000,
                       test={"start_mono_ns": T0 + 8_000_000_000, "duration_s": 15.0})
    assert second_run_interval(with_cal, T0) == pytest.approx((-2.0, 23.0))
    assert second_run_interval(_second(t0_mono_ns=T0), T0) is None
    assert second_run_interval(None, T0) is None


ASKED = {"kind": "busy-loop", "core": 1, "start_s": 15.0, "duration_s": 10.0}


def test_antagonist_records_become_episodes_or_say_why_not():
    rec = {"kind": "second-run", "started": True, "start_mono_ns": T0 + 3_000_000_000,
           "end_mono_ns": T0 + 31_000_000_000, "owner_kind": "wotbench", "owner": "v-2-x",
           "second_run": {"out_root": "o", "argv": ["wotbench", "run"],
                          "t0_mono_ns": T0 + 9_000_000_000,
                          "test": {"start_mono_ns": T0 + 9_000_000_000, "duration_s": 15}}}
    e = antagonist_episode(AntagonistRecord(asked=ASKED, **rec), T0)
    assert (e["start_s"], e["end_s"], e["outer"]) == (9.0, 24.0, [3.0, 31.0])
    assert e["name_by"] == {"owner_kind": "wotbench", "owner": "v-2-x"}
    loop = {"kind": "busy-loop", "started": True, "core": 1, "pid": 42, "comm": "sh",
            "start_mono_ns": T0 + 15_000_000_000, "end_mono_ns": T0 + 25_010_000_000}
    e = antagonist_episode(AntagonistRecord(asked=ASKED, **loop), T0)
    assert (e["start_s"], e["cores"], e["name_by"]) == (15.0, [1], {"pid": 42, "comm": "sh",
                                                          "cmdline": None})
    assert e["end_s"] == pytest.approx(25.01)
    never = {"kind": "busy-loop", "started": False, "why_not": "the test start was not seen"}
    assert "the test start was not seen" in antagonist_episode(AntagonistRecord(asked=ASKED, **never), T0)["invalid"]


def _series_run(rd, status, flagged=()):
    r = run(windows=2, flagged=[(a, ["cd"], []) for a in flagged], status=status)
    r["rd_devices_p50"] = rd
    return r


def test_an_overload_series_grades_risen_points_as_episodes():
    pts = [(5, _series_run(0.1, "none")), (15, _series_run(0.15, "none")),
           (25, _series_run(0.6, "detected", flagged=[0, 10]))]
    classes = [cls for _, _, cls in grade_series_repeat(pts)]
    assert classes == ["clear", "edge", "episode"]


def test_table_and_totals_against_the_targets():
    g = grade_run(run(episodes=[ep(15, 25)], flagged=[
        (10, ["foreign"], ["core 1: `sh` (pid 42, outside the testbed) used 0.50"]),
        (20, ["foreign", "cd"], ["core 1: `sh` (pid 42, outside the testbed) used 0.50"])]))
    loop = {"name": "V-host-loop-device", "expect": "episodes", "passed": True,
            "antagonist": {"kind": "busy-loop", "core": "device", "start_s": 15, "duration_s": 10},
            "rates": summarize([g, g, g], "episodes"), "invalid": [], "missing": [],
            "loads": [{"before": 0.3, "after": 0.9}]}
    clean = {"name": "V-clean-light", "expect": "clean", "passed": True, "invalid": [],
             "rates": summarize([grade_run(run())] * 3, "clean"),
             "missing": [{"point": "p002", "why": "no summary.json; antagonist: x"}]}
    failed = {"name": "V-membw", "expect": "episodes", "error": "no summary.json", "rates": None}
    skipped = {"name": "V-cache", "expect": "episodes", "skipped": "host never quiet (load 2)",
               "rates": None, "loads": [{"before": 2.0}]}
    t = totals([loop, clean, failed, skipped])
    assert t["detection"] == 1.0 and t["cd_detection"] == 0.5 and t["false_windows_clean"] == 0
    assert t["naming"] == 1.0 and all(t["meets"].values())
    md = render_table([loop, clean, failed, skipped], t)
    row = next(x for x in md.splitlines() if x.startswith("| V-host-loop-device |"))
    assert "6/6 (100 %)" in row and "3/6" in row and "6/6" in row and "0.30→0.90" in row
    assert "busy-loop on device 15+10 s" in row and row.endswith("PASS |")
    assert "run failed: no summary.json" in md and "not run: host never quiet" in md
    assert "V-clean-light: p002 not graded" in md
    assert "| episode windows flagged | 6/6 (100 %; CD rule alone 50 %) | ≥ 95 % | yes |" in md
    assert {x.count("|") for x in md.splitlines() if x.startswith("| V-")} == {14}


def test_agree_grades_episode_windows_by_the_devices_response_time():
    """membw / cache / GE-core antagonists: a window must be flagged iff the devices felt it."""
    r = run(episodes=[ep(10, 30, kind="membw")],
            flagged=[(10, ["cpu_wait"], []), (20, ["cpu_wait"], [])])
    # the devices' median response time: 1.0 outside, x1.5 in 10-20, unchanged in 20-30
    r["dev_windows"] = [{"start_s": a, "end_s": a + 10, "p50_rd": rd, "count": 100}
                        for a, rd in ((0, 0.0), (10, 0.5), (20, 0.02), (30, 0.0))]
    g = grade_run(r, expect="agree")
    assert [w["class"] for w in g["windows"]] == ["clear", "episode", "clear", "clear"]
    assert g["counts"]["flagged_episode_windows"] == 1
    assert g["counts"]["flagged_clear_windows"] == 1          # 20-30: flagged, not felt
    s = summarize([g], "agree")
    assert s["detection"] == 1.0 and s["false_windows"] == 1 and not s["passed"]
    # the same run graded as plain episodes: both windows are episode windows
    assert grade_run(r)["counts"]["flagged_episode_windows"] == 2


def test_agree_without_a_felt_window_has_no_onset_to_miss():
    """A hog on the GE's core that the devices never felt: nothing flagged is right."""
    r = run(episodes=[ep(15, 25)])
    r["dev_windows"] = [{"start_s": a, "end_s": a + 10, "p50_rd": 0.0, "count": 100}
                        for a in (0, 10, 20, 30)]
    g = grade_run(r, expect="agree")
    assert g["onsets"] == [] and g["counts"].get("episode_windows", 0) == 0
    s = summarize([g], "agree")
    assert s["false_windows"] == 0 and s["passed"]
