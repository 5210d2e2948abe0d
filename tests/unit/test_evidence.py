"""The kernel evidence of host contention: the counters' parsers, the process scan's
classification, the monitor's evidence files, and the rules on a synthetic run whose devices'
run-queue wait is set by the test (docs/VALIDATION.md "Evidence")."""
from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest
import pandas as pd

from analysis_fixtures import TEST_START_NS, make_run
from wotbench.analysis import analyze
from wotbench.monitor.foreign import FOREIGN_COLUMNS, ForeignScan, parse_cpu_list, parse_stat
from wotbench.monitor.host_counters import parse_pressure, parse_proc_stat
from wotbench.monitor.recorder import Monitor
from wotbench.rundir import RunDir
from wotbench.labels import PROCESS_ENV


def test_proc_stat_and_pressure_parsers():
    text = ("cpu  10 0 5 100 0 0 0 0 0 0\n"
            "cpu0 1 2 3 40 5 6 7 8 0 0\n"
            "cpu1 10 0 0 50 0 0 0 3\nintr 1 2\n")
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    got = parse_proc_stat(text)
    assert got[0] == ((1 + 2 + 3 + 6 + 7) * tick, 8 * tick, (40 + 5) * tick)
    assert got[1] == (10 * tick, 3 * tick, 50 * tick)
    assert parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\n"
                          "full avg10=0.00 avg60=0.00 avg300=0.00 total=56\n") == (1234, 56)
    assert parse_pressure("some avg10=1.0 total=9\n") == (9, None)


def test_stat_line_with_odd_comm_and_cpu_lists():
    comm, f = parse_stat("42 (a) b (c)) S 1 42 42 0 -1 4194560 0 0 0 0 7 3 0 0 20 0 1 0 99")
    assert comm == "a) b (c)" and f[0] == "S" and f[11:13] == ["7", "3"]
    assert parse_cpu_list("0-2,5\n") == {0, 1, 2, 5}
    assert parse_cpu_list("1") == {1}


def _busy(seconds: float, env: dict | None = None) -> subprocess.Popen:
    """A CPU-bound grandchild pinned to core 0 (its parent is a shell, not the test process,
    which the scan counts as the harness), bounded by ``timeout``, in its own session so that
    :func:`_stop` ends all of it."""
    return subprocess.Popen(["sh", "-c", f"timeout {seconds} taskset -c 0 sh -c "
                             f"'while :; do :; done' & wait"], env=env, start_new_session=True)


def _stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, 9)
    except ProcessLookupError:
        pass
    p.wait()


def test_scan_names_an_outside_busy_loop_and_another_runs_process():
    scan = ForeignScan("this-run", {0})
    host = _busy(2)
    other = _busy(2, env={**os.environ, PROCESS_ENV: "other-run"})
    try:
        time.sleep(0.3)
        scan.sample(time.monotonic_ns())
        time.sleep(0.6)   # 60 ticks: each loop's half of the core is 10x the 5 % asked below
        rows = scan.sample(time.monotonic_ns())
    finally:
        for p in (host, other):
            _stop(p)
        scan.close()
    df = pd.DataFrame(rows, columns=FOREIGN_COLUMNS)
    loops = df[(df["comm"] == "sh") & (df["core"] == 0)]
    kinds = set(zip(loops["owner_kind"], loops["owner"]))
    assert ("host", "") in kinds and ("wotbench", "other-run") in kinds
    # two loops share core 0: each got a real part of it (more than 5 %: on a loaded host
    # other work shares the core too, so half of it is not what a loop gets), and never more
    # than the interval
    assert (loops["cpu_ns"] > 0.05 * loops["interval_ns"]).all()
    assert (loops["cpu_ns"] <= loops["interval_ns"] * 1.05 + 2e7).all()


def _session(sid: int) -> set[int]:
    """The pids of a session (the busy loop's shell, timeout and the loop itself)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                _, f = parse_stat(open(f"/proc/{d}/stat").read())
            except (OSError, ValueError):
                continue
            if int(f[3]) == sid:
                out.add(int(d))
    return out


def _scan_twice(scan: ForeignScan, p: subprocess.Popen, first_s: float, then_s: float
                ) -> tuple[list, set[int]]:
    """The rows of a second scan ``then_s`` after a first at ``first_s``, and the pids of the
    process's session; the process is ended and the scan closed."""
    try:
        time.sleep(first_s)
        scan.sample(time.monotonic_ns())
        time.sleep(then_s)
        # the session before and after the scan: on a loaded host a scan can take long enough
        # for the bounded loop to end
        before = _session(p.pid)
        return scan.sample(time.monotonic_ns()), before | _session(p.pid)
    finally:
        _stop(p)
        scan.close()


def test_scan_skips_the_runs_own_processes():
    scan = ForeignScan("this-run", {0})
    mine = _busy(2, env={**os.environ, PROCESS_ENV: "this-run"})
    rows, pids = _scan_twice(scan, mine, 0.3, 0.5)
    assert len(pids) >= 2                      # the shell, timeout, the loop
    assert not [r for r in rows if r[2] in pids]
    assert not [r for r in rows if r[2] == os.getpid()]


def test_monitor_writes_the_evidence_files_and_its_sources(tmp_path):
    rd = RunDir(tmp_path)
    m = Monitor(rd, interval_s=0.2, collectl=False, run_id="r", run_cores={0})
    m.start()
    time.sleep(0.5)
    m.stop()
    sources = json.loads(rd.monitor_sources_json.read_text())
    assert set(sources) >= {"thread_runqueue_wait", "per_core_cpu", "steal", "cpu_pressure",
                            "process_scan"}
    cores = pd.read_csv(rd.cores_csv)
    assert len(cores) >= 2 and set(cores["core"]) == set(range(os.cpu_count()))
    for _, g in cores.groupby("core"):                        # cumulative, per core
        assert (np.diff(g["busy_ns"].to_numpy()) >= 0).all()
    assert list(pd.read_csv(rd.foreign_csv).columns)[:3] == ["mono_ns", "interval_ns", "pid"]
    cost = json.loads(rd.monitor_cost_json.read_text())
    assert cost["samples"] >= 2 and cost["process_scan_cpu_ns"] > 0
    assert 0 < cost["share_of_a_core"] < 1


def _add_monitor(d, wait_of_cpu: list[float], cpu_share: float = 0.3, window_s: float = 10,
                 foreign: list[tuple] = ()):
    """monitor/ files for make_run's devices (pinned to core 1): per 10 s window, the devices'
    run-queue wait is ``wait_of_cpu[i]`` times their CPU time."""
    rd = RunDir(d)
    rd.monitor_dir.mkdir(exist_ok=True)
    run = json.loads(rd.run_json.read_text())
    names = [x["name"] for x in run["devices"]]
    rows, cpu, wait = [], 0.0, 0.0
    t = TEST_START_NS - int(10e9)
    step = int(1e9)
    while t <= TEST_START_NS + int(len(wait_of_cpu) * window_s * 1e9):
        i = int((t - TEST_START_NS) // int(window_s * 1e9))
        k = wait_of_cpu[i] if 0 <= i < len(wait_of_cpu) else 0.1
        for name in names:
            rows.append([t, name, "device", int(cpu), int(wait), "", "", ""])
        cpu += cpu_share * step / len(names)
        wait += k * cpu_share * step / len(names)
        t += step
    pd.DataFrame(rows, columns=["mono_ns", "component", "role", "cpu_ns", "runqueue_ns",
                                "nr_periods", "nr_throttled", "throttled_ns"]).to_csv(
        rd.cgroups_csv, index=False)
    pd.DataFrame(list(foreign), columns=["mono_ns", "interval_ns", "pid", "comm", "owner_kind",
                                         "owner", "core", "cpu_ns"]).to_csv(rd.foreign_csv,
                                                                            index=False)
    rd.monitor_sources_json.write_text(json.dumps(
        {"thread_runqueue_wait": None, "per_core_cpu": None, "steal": None,
         "cpu_pressure": None, "process_scan": None}))


def _loop_rows(pid: int, core: int, share: float, seconds: range, comm: str = "sh",
               kind: str = "host", owner: str = "") -> list[tuple]:
    """monitor/foreign.csv rows of one outside process: ``share`` of ``core`` each second."""
    return [(TEST_START_NS + int(s * 1e9), int(1e9), pid, comm, kind, owner, core,
             int(share * 1e9)) for s in seconds]


def _light_run(path, seed: int, duration_s: float = 30):
    """3 busy devices of 5 ms at 20 req/s each, no CD node."""
    return make_run(path, duration_s=duration_s, n_devices=3, rate_per_device=20,
                    service_us=[5000], cd=False, seed=seed)


def test_cpu_wait_flags_the_window_and_names_the_antagonist(tmp_path):
    d = _light_run(tmp_path / "r", seed=3)
    sh = _loop_rows(4242, core=1, share=0.6, seconds=range(11, 21))
    _add_monitor(d, [0.2, 3.0, 0.2], foreign=sh)
    s = analyze(d)
    c = s.contention
    assert c.status == "detected" and [w.start_s for w in c.flagged_windows] == [10.0]
    w = c.flagged_windows[0]
    assert w.shown_by == ["cpu_wait"]
    text = " ".join(w.evidence)
    # the amount first (wait 3.0 of CPU time against the run's own 0.2, per request), then the
    # kernel's measures behind it and what else ran there
    assert "devices on core 1: the host added" in text and "severe; tolerance 5 % of R" in text
    assert "waited for the CPU" in text
    assert "`sh` (pid 4242, outside the testbed) used 0.60 of the core" in text
    pw = next(p for p in s.evidence.windows[1].places if p.place == "core 1")
    own = next(p for p in s.evidence.windows[0].places if p.place == "core 1")
    # added = the window's wait per request minus the run's own level (0.2 of CPU time here),
    # never more than the measured R (this fixture's wait, 3 x CPU, exceeds its R)
    assert pw.added_ms == pytest.approx(min(pw.wait_ms_per_request - own.wait_ms_per_request,
                                            pw.r_ms), rel=0.1)
    assert pw.beyond_tolerance and pw.grade == "severe" and pw.added_low_ms > 0
    assert not own.beyond_tolerance and own.grade == "none"
    assert s.verdict.status == "contention" and s.verdict.exit_code == 3


def _third_party_run(path, episode_s: range, added_ms: float, seed: int = 9,
                     on_path: bool = True):
    """3 third-party servers (run.json devices[].server, no device log, no resource file) on
    core 1 at 20 req/s each; monitor/cgroups.csv written from the GE's answers: each second a
    server used 50 us of CPU per request it answered and waited for the CPU 0.3 x that x Exp(1)
    per request (its own level, with its scatter), plus Exp(``added_ms``) per request in the
    seconds of ``episode_s`` (while an outside loop used 0.6 of core 1), which the request's R
    carries too when ``on_path`` (else the wait fell between requests). Returns the run dir
    and the true added wait per request of each 10 s window."""
    d = make_run(path, duration_s=30, n_devices=3, rate_per_device=20, service_us=[200],
                 cd=False, seed=seed, missing_logs=("cpu-0", "cpu-1", "cpu-2"))
    rd = RunDir(d)
    run = json.loads(rd.run_json.read_text())
    for dev in run["devices"]:
        dev["server"], dev["resources"] = "command coap-server-notls -A {address}", None
    rd.run_json.write_text(json.dumps(run))
    req_path = d / "ge" / "ge-0" / "requests.csv"
    req = pd.read_csv(req_path)
    ok = (req["outcome"] == "ok").to_numpy()
    second = (req["sent_ns"].fillna(-1) // int(1e9)).astype(int).to_numpy()
    rng = np.random.default_rng(seed)
    a = np.where(ok & np.isin(second, list(episode_s)),
                 rng.exponential(max(added_ms, 1e-9) * 1e6, len(req)), 0.0)
    if on_path:
        req["received_ns"] = (req["received_ns"] + np.round(a)).round().astype("Int64")
        req.to_csv(req_path, index=False)
    rows, extra, count = [], np.zeros(3), np.zeros(3)
    for i, dev in enumerate(run["devices"]):
        mine = ok & (req["device"].to_numpy() == i)
        cpu = wait = 0.0
        for t in range(-10, 31):
            rows.append([TEST_START_NS + t * int(1e9), dev["name"], "device", int(cpu),
                         int(wait), "", "", ""])
            sel = mine & (second == t)
            n = int(sel.sum()) if 0 <= t < 30 else 0
            c = 50e3 * n
            cpu += c + rng.uniform(0, 5e3)               # a little housekeeping
            wait += 0.3 * c * rng.exponential(1.0, n).mean() if n else 0.0
            wait += a[sel].sum() if n else 0.0
            if 0 <= t < 30:
                extra[t // 10] += a[sel].sum()
                count[t // 10] += n
    rd.monitor_dir.mkdir(exist_ok=True)
    pd.DataFrame(rows, columns=["mono_ns", "component", "role", "cpu_ns", "runqueue_ns",
                                "nr_periods", "nr_throttled", "throttled_ns"]).to_csv(
        rd.cgroups_csv, index=False)
    # a scan row covers the second before its instant
    sh = _loop_rows(4242, core=1, share=0.6, seconds=range(episode_s.start + 1,
                                                            episode_s.stop + 1))
    pd.DataFrame(sh, columns=["mono_ns", "interval_ns", "pid", "comm", "owner_kind", "owner",
                              "core", "cpu_ns"]).to_csv(rd.foreign_csv, index=False)
    rd.monitor_sources_json.write_text(json.dumps(
        {"thread_runqueue_wait": None, "per_core_cpu": None, "steal": None,
         "cpu_pressure": None, "process_scan": None}))
    return d, extra / count / 1e6


def test_a_third_party_servers_host_share_from_its_wait_and_the_ges_answers(tmp_path):
    """No device log (libcoap's coap-server): the requests per second are the GE's answers
    from each server, its S its CPU time per request, its run-queue wait the kernel's; the
    host's share is computed as a device's, and the episode window is flagged with an
    amount close to the truth, the others are not."""
    d, truth = _third_party_run(tmp_path / "byo", range(10, 20), added_ms=0.2)
    s = analyze(d)
    places = [next(p for p in w.places if p.place == "core 1") for w in s.evidence.windows]
    assert [p.requests for p in places] == [pytest.approx(600, rel=0.15)] * 3
    ep = places[1]
    assert ep.added_by == "cpu_wait" and ep.added_ms == pytest.approx(truth[1], rel=0.15)
    assert ep.r_ms < 1.0 and ep.added_low_ms > 0.05 * ep.r_ms and ep.beyond_tolerance
    assert [p.beyond_tolerance for p in places] == [False, True, False]
    # S = its CPU time per request: 50 us
    assert ep.service_ms_per_request == pytest.approx(0.05, rel=0.1)
    hs = s.evidence.host_share
    assert hs.per_place["core 1"].noise_from.startswith("cpu_wait: the run's own noise: 2 "
                                                        "quiet window(s)")
    assert set(hs.per_device) == {"cpu-0", "cpu-1", "cpu-2"}
    assert all(ps.added_ms is not None for ps in hs.per_device.values())
    w = s.contention.flagged_windows
    assert [x.start_s for x in w] == [10.0] and w[0].shown_by == ["cpu_wait"]
    assert "devices on core 1: the host added" in " ".join(w[0].evidence)
    # the same servers, nothing added: no window flagged, each with its amount
    d2, _ = _third_party_run(tmp_path / "byo-clean", range(0), added_ms=0.0, seed=10)
    s2 = analyze(d2)
    assert s2.contention.status == "none"
    assert all(next(p for p in w.places if p.place == "core 1").added_ms is not None
               for w in s2.evidence.windows)


def test_a_third_party_servers_wait_off_the_requests_path_is_capped_by_its_r(tmp_path):
    """Measured with coap-server under a duty-100 loop: it waited for the CPU 0.15 ms per
    request while its R did not rise (the wait fell between requests). Without a device log
    the rise of R caps the amount: nothing added, nothing flagged, and noise_from says so."""
    d, truth = _third_party_run(tmp_path / "off", range(10, 20), added_ms=0.2, on_path=False)
    s = analyze(d)
    ep = next(p for p in s.evidence.windows[1].places if p.place == "core 1")
    assert truth[1] > 0.15 and ep.wait_ms_per_request > 0.15
    assert ep.added_ms < 0.02 and not ep.beyond_tolerance
    assert s.contention.status == "none"
    assert "at most the rise of its response time" in \
        s.evidence.host_share.per_place["core 1"].noise_from


def test_clean_windows_say_none_and_missing_sources_are_named(tmp_path):
    d = _light_run(tmp_path / "c", seed=4)
    _add_monitor(d, [0.2, 0.25, 0.2])
    s = analyze(d)
    assert s.contention.status == "none" and not s.contention.flagged_windows
    assert s.verdict.status == "trustworthy"
    # the same run without the threads' run-queue wait: no claim of "none"
    rd = RunDir(d)
    rd.monitor_sources_json.write_text(json.dumps({"thread_runqueue_wait": "no schedstat here"}))
    s = analyze(d)
    assert s.contention.status == "not_checked"
    assert s.contention.evidence_missing["thread_runqueue_wait"] == "no schedstat here"
    assert any("no schedstat here" in r for r in s.verdict.reasons)


def test_an_outside_process_without_effect_is_named_but_not_flagged(tmp_path):
    d = _light_run(tmp_path / "n", seed=5)
    sh = _loop_rows(77, core=0, share=0.5, seconds=range(1, 11))
    _add_monitor(d, [0.2, 0.2, 0.2], foreign=sh)
    s = analyze(d)
    assert s.contention.status == "none"
    assert any("`sh` (pid 77, outside the testbed) used 0.50 of the core in 0-10 s" in n
               for n in s.contention.notes)
    assert any("pid 77" in r for r in s.verdict.reasons)


def test_another_wotbench_run_on_a_run_core_is_flagged(tmp_path):
    d = _light_run(tmp_path / "o", seed=6, duration_s=20)
    other = [row for s in range(11, 20) for row in _loop_rows(
        900 + s, core=1, share=0.1, seconds=range(s, s + 1), comm="wot-device", kind="wotbench",
        owner="light-20261124")]
    _add_monitor(d, [0.2, 0.2], foreign=other)
    s = analyze(d)
    w = s.contention.flagged_windows
    assert [x.start_s for x in w] == [10.0] and w[0].shown_by == ["other_run"]
    assert "another WoTbench run (light-20261124)" in w[0].evidence[0]


def test_a_window_beyond_the_last_core_sample_is_null_not_nan(tmp_path):
    """cores.csv stops before the test ends (the monitor stopped early): steal of the last
    window is unknown, and summary.json (JSON has no NaN) is still written."""
    d = _light_run(tmp_path / "s", seed=7)
    _add_monitor(d, [0.2, 0.2, 0.2])
    rd = RunDir(d)
    rows = [[TEST_START_NS + int(s * 1e9), c, int(s * 1e9), 0, 0] for s in range(-5, 15)
            for c in (0, 1)]
    pd.DataFrame(rows, columns=["mono_ns", "core", "busy_ns", "steal_ns", "idle_ns"]).to_csv(
        rd.cores_csv, index=False)
    s = analyze(d)
    last = s.evidence.windows[-1].places
    assert any(p.place == "core 1" for p in last)
    assert all(p.steal_share is None for p in last)
    assert json.loads(rd.summary_json.read_text())["evidence"]["windows"][0]["places"]


def _with_cd_node(d, cd_wait: float, window_wait: tuple[int, float] | None = None) -> None:
    """run.json's CD node record and its own run-queue wait (``cd_wait`` of its CPU time; in
    10 s window ``window_wait[0]``: ``window_wait[1]``)."""
    rd = RunDir(d)
    run = json.loads(rd.run_json.read_text())
    run["cd_node"] = {"name": "cd-node", "role": "cd-node", "cpuset": "1",
                      "resources": "trace/resources/cd-node.csv"}
    rd.run_json.write_text(json.dumps(run))
    cg = pd.read_csv(rd.cgroups_csv)
    rows = []
    cpu = wait = 0.0
    for t in sorted(set(cg["mono_ns"])):
        rows.append([t, "cd-node", "cd-node", int(cpu), int(wait), "", "", ""])
        i = (t - TEST_START_NS) // int(10e9)
        k = window_wait[1] if window_wait is not None and i == window_wait[0] else cd_wait
        cpu += 0.01e9
        wait += k * 0.01e9
    pd.concat([cg, pd.DataFrame(rows, columns=cg.columns)]).to_csv(rd.cgroups_csv, index=False)


def test_a_cd_flag_the_kernel_contradicts_is_a_note_not_a_flag(tmp_path):
    """The CD rule fires in 10-20 s, but the kernel measured that window and saw neither the
    CD node nor the devices wait: the CD rule's 5 % false-alarm rate, not the host."""
    d = make_run(tmp_path / "cd", duration_s=30, n_devices=3, rate_per_device=20,
                 service_us=[5000], cd=True, cd_shift=1.0, cd_shift_start_s=10, seed=8)
    _add_monitor(d, [0.2, 0.2, 0.2])
    _with_cd_node(d, cd_wait=0.05)
    s = analyze(d)
    c = s.contention
    assert c.cd_status == "detected" and c.status == "none" and not c.flagged_windows
    assert any("not counted as host distortion" in n and "CD node R_d median rose" in n
               for n in c.notes)
    assert s.verdict.status == "trustworthy"
    # the same CD rise with the CD node waiting for its core then (2.0 of its CPU time in
    # 10-20 s against its own 0.05): flagged, by both. (Before the host share, a wait of 2.0
    # through the whole run flagged every window; a level the CD node has all through the run
    # is now its own level, and only what the host added beyond it counts.)
    d2 = make_run(tmp_path / "cd2", duration_s=30, n_devices=3, rate_per_device=20,
                  service_us=[5000], cd=True, cd_shift=1.0, cd_shift_start_s=10, seed=8)
    _add_monitor(d2, [0.2, 0.2, 0.2])
    _with_cd_node(d2, cd_wait=0.05, window_wait=(1, 2.0))
    c2 = analyze(d2).contention
    assert c2.status == "detected"
    assert any("cd" in w.shown_by and "cpu_wait" in w.shown_by for w in c2.flagged_windows)


def test_a_program_started_through_taskset_is_named_by_what_it_runs():
    """taskset execs into the program: the scan names the program, with its command line,
    not the launcher it saw first (issue 31)."""
    scan = ForeignScan("this-run", {0})
    # sleep first, so the scan sees `sh` (then `taskset`) before the exec into the loop
    p = subprocess.Popen(["sh", "-c", "exec timeout 3 sh -c 'sleep 0.4; exec taskset -c 0 "
                          "sh -c \"while :; do :; done\"'"], start_new_session=True)
    rows, ours = _scan_twice(scan, p, 0.2, 0.8)
    df = pd.DataFrame(rows, columns=FOREIGN_COLUMNS)
    # ours only (a shared host); the loop's CPU: 50 ms of its 0.6 s at least, even on a loaded
    # host
    busy = df[df["pid"].isin(ours) & (df["cpu_ns"] > 0.05e9)]
    assert len(busy) == 1
    row = busy.iloc[0]
    # the command as it is after both execs, not the "sh -c 'sleep 0.4; exec taskset ...'" the
    # first scan saw for the same pid
    assert row["comm"] == "sh" and row["cmdline"] == "sh -c while :; do :; done"


def test_the_harness_descendants_in_its_session_are_the_runs_and_a_wotbench_is_named():
    scan = ForeignScan("this-run", {0})
    # a grandchild of the harness in the harness's session (a helper the harness started):
    # the run's own; the same loop in a session of its own: an outside process
    mine = subprocess.Popen(["sh", "-c", "timeout 2 taskset -c 0 sh -c 'while :; do :; done'"])
    theirs = _busy(2)
    try:
        time.sleep(0.3)
        scan.sample(time.monotonic_ns())
        time.sleep(0.5)
        rows = scan.sample(time.monotonic_ns())
        mine_pids = {int(x) for x in open(f"/proc/{mine.pid}/task/{mine.pid}/children").read().split()}
        mine_pids |= {int(x) for c in list(mine_pids) for x in
                      open(f"/proc/{c}/task/{c}/children").read().split()}
    finally:
        mine.kill()
        for pid in mine_pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        mine.wait()
        _stop(theirs)
        scan.close()
    df = pd.DataFrame(rows, columns=FOREIGN_COLUMNS)
    assert not df[df["pid"].isin(mine_pids)].shape[0]
    assert (df[df["comm"] == "sh"]["owner_kind"] == "host").any()
    assert scan.classify(999999, "wotbench", 1, "/x/.venv/bin/python /x/.venv/bin/wotbench run c.yaml") == \
        ("wotbench", "")
    assert scan.classify(999999, "python3", 1, "python3 -m wotbench.cli run c.yaml") == ("wotbench", "")
    assert scan.classify(999999, "python3", 1, "python3 -m other") == ("host", "")
    # a program of the package that is not the harness (the study's antagonist) is outside
    assert scan.classify(999999, "python3", 1, "/v/bin/python3 -m wotbench.validation.dutyhog "
                         "--duty 0.45") == ("host", "")
