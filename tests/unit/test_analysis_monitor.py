"""wotbench.analysis.monitor: CPU per core, per component and per device group, from monitor
files with known rates (the numbers the report's CPU figures and the sweep's Fig 5 draw)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wotbench.analysis import monitor as mon
from wotbench.rundir import RunDir

START_NS = 5_000_000_000_000
GROUPS = {"cpu-0": "cpu", "cpu-1": "cpu"}
# component -> (CPU seconds per second, run-queue seconds per second, sampling offset in s)
USE = {"cpu-0": (0.25, 0.002, 0.0), "cpu-1": (0.50, 0.0, 0.03), "ge-0": (0.10, 0.0, 0.01)}


def _write_cgroups(rd: RunDir, seconds: int = 6) -> None:
    rows = []
    for comp, (cpu, rq, offset) in USE.items():
        for k in range(seconds):
            t = k + offset
            rows.append({"mono_ns": START_NS + round(t * 1e9), "component": comp, "role": "x",
                         "cpu_ns": round(cpu * t * 1e9), "runqueue_ns": round(rq * t * 1e9)})
    rd.monitor_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(rd.cgroups_csv, index=False)


def _write_cpu(rd: RunDir) -> None:
    t = np.arange(-2, 11)                       # two samples before the test start
    busy0 = np.where(t < 0, 100.0, 20.0)
    rd.monitor_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"utc_s": 1_700_000_000 + t, "mono_ns": START_NS + t * 1_000_000_000,
                  "[CPU:0]Idle%": 100 - busy0, "[CPU:0]Totl%": busy0,
                  "[CPU:1]Idle%": 40.0}).to_csv(rd.cpu_csv, index=False)


@pytest.fixture
def rd(tmp_path):
    rd = RunDir(tmp_path)
    _write_cgroups(rd)
    _write_cpu(rd)
    return rd


def test_cpu_per_component_is_the_counter_rate(rd):
    block, series = mon.analyse(rd, START_NS, 10.0, GROUPS)
    comps = series["cpu_components"]
    for comp, (cpu, rq, _) in USE.items():
        c = comps[comps["component"] == comp]
        assert len(c) == 5                       # six samples, five differences
        assert np.allclose(c["cpu_pct"], cpu * 100)
        assert np.allclose(c["runq_ms_per_s"], rq * 1000)
    assert block.cpu_components_missing is None


def test_a_device_group_is_summed_at_each_interval(rd):
    _, series = mon.analyse(rd, START_NS, 10.0, GROUPS)
    g = series["cpu_groups"]
    cpu = g[g["group"] == "cpu"]
    # cpu-1 samples 30 ms after cpu-0: rounded to 0.1 s, the two meet in one row per interval
    assert list(cpu["t_s"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert np.allclose(cpu["cpu_pct"], 75.0) and set(cpu["devices"]) == {2}
    assert np.allclose(cpu["runq_ms_per_s"], 2.0)
    ge = g[g["group"] == "ge-0"]                 # not a device: its own row, no group size
    assert np.allclose(ge["cpu_pct"], 10.0) and ge["devices"].isna().all()


def test_the_monitors_own_group_rows_are_the_group_when_devices_are_sampled_in_batches(tmp_path):
    """With many devices the monitor reads them in rotating batches (a device's counters every
    few intervals) and writes '<group>-*' rows with the sums of their latest counters: those
    rows, not a sum of whichever devices happened to be read, are the group."""
    rd = RunDir(tmp_path)
    rows = []
    for k in range(6):
        t = float(k)
        dev = "cpu-0" if k % 2 == 0 else "cpu-1"      # one device per interval, alternating
        rows.append({"mono_ns": START_NS + round(t * 1e9), "component": dev, "role": "device",
                     "cpu_ns": round(0.4 * t * 1e9), "runqueue_ns": 0})
        rows.append({"mono_ns": START_NS + round(t * 1e9), "component": "cpu-*",
                     "role": "device-group", "cpu_ns": round(0.75 * t * 1e9), "runqueue_ns": 0})
    rd.monitor_dir.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(rd.cgroups_csv, index=False)
    _, series = mon.analyse(rd, START_NS, 10.0, GROUPS)
    g = series["cpu_groups"]
    assert list(g["group"].unique()) == ["cpu"] and set(g["devices"]) == {2}
    assert np.allclose(g["cpu_pct"], 75.0) and len(g) == 5


def test_cpu_per_core_and_the_host_mean_during_the_test(rd):
    block, series = mon.analyse(rd, START_NS, 10.0, GROUPS)
    cores = series["cpu_cores"]
    assert set(cores["core"]) == {"0", "1"}
    # core 1 has only Idle%: busy = 100 - idle
    assert np.allclose(cores.loc[cores["core"] == "1", "busy_pct"], 60.0)
    # the samples before the start (core 0 at 100 %) are not part of the test's mean
    assert block.host_cpu_busy_pct == pytest.approx((20.0 + 60.0) / 2)
    assert block.cpu_cores_missing is None


def test_raw_collectl_file_when_the_runner_left_no_cpu_csv(tmp_path):
    rd = RunDir(tmp_path)
    (rd.monitor_dir / "collectl").mkdir(parents=True)
    (rd.monitor_dir / "collectl" / "host-20250101.cpu").write_text(
        "# collectl\n#UTC [CPU:0]Idle% [CPU:0]Totl%\n1700000000 70 30\n1700000001 50 50\n")
    cores, why = mon.cpu_cores(rd, START_NS)
    assert why is None and list(cores["t_s"]) == [0, 1] and list(cores["busy_pct"]) == [30, 50]


def test_why_a_series_is_missing(tmp_path):
    block, series = mon.analyse(RunDir(tmp_path), START_NS, 10.0, GROUPS)
    assert series == {} and block.host_cpu_busy_pct is None
    assert "no monitor/ directory" in block.cpu_cores_missing
    assert "cgroups.csv is missing" in block.cpu_components_missing
    rd = RunDir(tmp_path)
    rd.monitor_dir.mkdir()
    pd.DataFrame({"mono_ns": [1], "component": ["x"]}).to_csv(rd.cgroups_csv, index=False)
    _, why = mon.cpu_components(rd, START_NS)
    assert "lacks mono_ns/component/cpu_ns" in why


def test_device_cpu_per_request_integrates_the_test_window_only():
    import pandas as pd

    from wotbench.analysis.monitor import cpu_per_request_us
    # group "a": 50 % of a core from t=-1 to t=4 (1 s samples); the test is 0..3 s
    rows = [{"group": "a", "t_s": float(t), "cpu_pct": 50.0} for t in range(-1, 5)]
    rows += [{"group": "ge-0", "t_s": float(t), "cpu_pct": 90.0} for t in range(0, 4)]
    df = pd.DataFrame(rows)
    out = cpu_per_request_us(df, 3.0, {"a": 300, "b": 10, "c": 0})
    assert out == {"a": pytest.approx(1.5 / 300 * 1e6)}   # 3 s x 0.5 core over 300 requests
    assert cpu_per_request_us(None, 3.0, {"a": 1}) == {}
