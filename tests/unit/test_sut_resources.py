"""The system under test's own CPU and memory: the monitor's sampler on real processes and on a
cgroup-shaped directory, the per-window analysis (CPU exact from cumulative counters, the
high-water-mark rule for peaks), the summary block and the run report's table."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis_fixtures import TEST_START_NS, make_run
from wotbench.analysis import analyze
from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.sut_resources import analyse
from wotbench.config.schema import Config
from wotbench.monitor.sut_sampler import SutSampler, sut_groups
from wotbench.rundir import RunDir
from wotbench.rundir.sut import MIB, SUT_COLUMNS, read_sut_samples

# a parent that forks a child: the child touches 40 MiB and burns CPU ~0.6 s, then exits; the
# parent reaps it (its CPU moves to the parent's cutime/cstime) and sleeps
TREE = ("import os, time\n"
        "if os.fork() == 0:\n"
        "    x = bytearray(40 * 2**20)\n"
        "    x[::4096] = b'1' * len(x[::4096])\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.6: pass\n"
        "    time.sleep(0.6)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "time.sleep(0.6)\n")


def _rd(tmp_path: Path) -> RunDir:
    rd = RunDir(tmp_path)
    rd.monitor_dir.mkdir(parents=True)
    return rd


def _sample_until_exit(s: SutSampler, proc: subprocess.Popen, every: int = 4) -> None:
    i = 0
    while proc.poll() is None:
        s.sample(time.monotonic_ns(), everything=i % every == 0)
        i += 1
        time.sleep(0.1)


def test_sampler_follows_a_process_tree_and_keeps_only_the_sut(tmp_path):
    rd = _rd(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", TREE])
    s = SutSampler(rd, {"coap"})
    assert s.watch("coap-0", "device", "coap", proc.pid, {})
    assert not s.watch("emu-0", "device", "emu", proc.pid, {})     # a wot-device group
    assert not s.watch("ge-0", "ge", None, proc.pid, {})
    _sample_until_exit(s, proc)
    s.close()
    rows = read_sut_samples(rd.sut_csv)
    assert {r.component for r in rows} == {"coap-0"} and {r.source for r in rows} == {"proc"}
    assert max(r.processes for r in rows) == 2          # the child was seen
    # the child's 40 MiB counted in the tree's RSS; its CPU stays counted after it is reaped
    assert max(r.rss_bytes or 0 for r in rows) >= 40 * MIB
    cpu = [r.cpu_ns for r in rows if r.cpu_ns is not None]
    assert cpu == sorted(cpu) and cpu[-1] >= 0.5e9


def test_no_sut_component_no_file(tmp_path):
    rd = _rd(tmp_path)
    s = SutSampler(rd, {"coap"})
    assert not s.watch("cpu-0", "device", "cpu", 1, {})
    s.sample(time.monotonic_ns(), True)
    s.close()
    assert not rd.sut_csv.exists()
    assert analyse(rd, 0, 10.0, 10.0) == (None, None)


def test_the_sut_groups_are_the_configs_groups_with_a_server():
    """The runner hands the monitor the groups of its typed config that run a server."""
    cfg = Config.model_validate({"name": "t", "duration_s": 5, "devices": [
        {"group": "coap", "count": 2, "server": {"command": ["coap-server-notls"]}},
        {"group": "http", "count": 1, "server": {"command": ["nginx"]}},
        {"group": "emu", "count": 3}]})
    assert sut_groups(cfg.devices) == {"coap", "http"}
    assert sut_groups(cfg.devices[2:]) == set()


def test_sampler_reads_a_container_from_its_cgroup(tmp_path):
    """Docker: CPU from cpuacct.usage, memory cgroup usage and high-water mark, the processes
    from cgroup.procs (here a directory shaped like cgroup v1, holding a real pid)."""
    rd = _rd(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        acct, mem = tmp_path / "cpuacct" / "docker" / "c1", tmp_path / "memory" / "docker" / "c1"
        for d in (acct, mem):
            d.mkdir(parents=True)
            (d / "cgroup.procs").write_text(f"{proc.pid}\n")
        (acct / "cpuacct.usage").write_text("123456789\n")
        (mem / "memory.usage_in_bytes").write_text("7000000\n")
        (mem / "memory.max_usage_in_bytes").write_text("9000000\n")
        s = SutSampler(rd)
        assert s.watch("proxy", "proxy", None, None, {"cpuacct": acct, "cpu": acct, "memory": mem})
        s.sample(time.monotonic_ns(), True)
        s.close()
    finally:
        proc.kill()
        proc.wait()
    [row] = read_sut_samples(rd.sut_csv)
    assert (row.role, row.group, row.source, row.cpu_ns) == ("proxy", "proxy", "cgroup", 123456789)
    assert (row.mem_usage_bytes, row.mem_max_usage_bytes, row.processes) == (7000000, 9000000, 1)
    assert row.rss_bytes > 0 and row.hwm_bytes >= row.rss_bytes    # the real process's VmRSS


# ----------------------------------------------------------------------------- analysis
def _write(rd: RunDir, rows: list[dict]) -> None:
    lines = [",".join(SUT_COLUMNS)]
    for r in rows:
        full = {"role": "server", "group": "coap", "source": "cgroup", "processes": 1, **r}
        lines.append(",".join("" if full.get(c) is None else str(full[c]) for c in SUT_COLUMNS))
    rd.sut_csv.write_text("\n".join(lines) + "\n")


def _series(component: str, t_s: list[float], cpu_cores: float, rss_mib: list[float],
            hwm_mib: list[float], processes: int = 1) -> list[dict]:
    return [{"mono_ns": TEST_START_NS + int(t * 1e9), "component": component,
             "cpu_ns": int(t * 1e9 * cpu_cores) + 10**9, "rss_bytes": int(r * MIB),
             "hwm_bytes": int(h * MIB), "processes": processes}
            for t, r, h in zip(t_s, rss_mib, hwm_mib)]


def test_windows_cpu_and_the_high_water_mark_rule(tmp_path):
    rd = _rd(tmp_path)
    t = [float(x) for x in range(0, 21)]                   # a sample per second, 0..20 s
    rss = [10.0] * 5 + [30.0] + [12.0] * 15                # a 30 MiB spike at 5 s, window 0
    hwm = [10.0] * 5 + [35.0] * 16                         # the real peak, 35, between samples
    rows = _series("coap-0", t, 0.25, rss, hwm)
    rss1 = [5.0] * 21
    rows += _series("coap-1", t, 0.5, rss1, [50.0] * 21)   # its peak happened before the test
    _write(rd, rows)
    block, series = analyse(rd, TEST_START_NS, 20.0, 10.0)
    c0, c1 = block.components["coap-0"], block.components["coap-1"]
    assert [w.cpu_cores for w in c0.windows] == pytest.approx([0.25, 0.25])
    assert [w.cpu_cores for w in c1.windows] == pytest.approx([0.5, 0.5])
    w0, w1 = c0.windows
    assert (w0.rss_peak_bytes, w0.peak_exact) == (35 * MIB, True)   # the mark rose in window 0
    assert (w1.rss_peak_bytes, w1.peak_exact) == (12 * MIB, False)  # else the largest sample
    assert (c1.windows[0].rss_peak_bytes, c1.windows[0].peak_exact) == (5 * MIB, False)
    assert w0.rss_mean_bytes == pytest.approx(sum(rss[:10]) / 10 * MIB)
    assert block.total.cpu_cores == pytest.approx(0.75)
    assert [w.cpu_cores for w in block.total_windows] == pytest.approx([0.75, 0.75])
    assert list(series["component"].unique()) == ["coap-0", "coap-1"] and len(series) == 4


def test_a_process_tree_peak_is_never_called_exact(tmp_path):
    """Summed VmHWM of several processes bounds the tree's peak from above: not exact."""
    rd = _rd(tmp_path)
    t = [float(x) for x in range(0, 11)]
    _write(rd, _series("coap-0", t, 0.1, [20.0] * 11, [20.0] * 3 + [40.0] * 8, processes=2))
    block, _ = analyse(rd, TEST_START_NS, 10.0, 10.0)
    w = block.components["coap-0"].windows[0]
    assert (w.rss_peak_bytes, w.peak_exact) == (20 * MIB, False)


def test_too_few_samples_give_no_cpu_figure(tmp_path):
    rd = _rd(tmp_path)
    _write(rd, _series("coap-0", [0.0, 3.0], 0.5, [1.0, 1.0], [1.0, 1.0]))
    block, _ = analyse(rd, TEST_START_NS, 10.0, 10.0)
    assert block.components["coap-0"].windows[0].cpu_cores is None


def test_a_bad_row_names_the_file_and_line(tmp_path):
    rd = _rd(tmp_path)
    _write(rd, _series("coap-0", [0.0, 1.0], 0.5, [1.0, 1.0], [1.0, 1.0]))
    text = rd.sut_csv.read_text().replace(",server,", ",database,", 1)
    rd.sut_csv.write_text(text)
    with pytest.raises(AnalysisError, match=r"sut.csv:2: role"):
        analyse(rd, TEST_START_NS, 10.0, 10.0)


def test_summary_and_report_carry_the_sut_resources(tmp_path):
    run_dir = tmp_path / "run"
    make_run(run_dir, duration_s=5, seed=3)
    rd = RunDir(run_dir)
    rd.monitor_dir.mkdir(exist_ok=True)
    _write(rd, _series("proxy", [x * 0.5 for x in range(11)], 0.2, [3.0] * 11, [3.0] * 11))
    s = analyze(run_dir)
    assert s.sut_resources is not None
    assert s.sut_resources.total.cpu_cores == pytest.approx(0.2)
    assert RunDir(run_dir).read_summary().sut_resources == s.sut_resources   # round trip
    assert (run_dir / "series" / "sut_resources.csv").is_file()
    from wotbench.report.sut import resources
    r = resources(s.sut_resources)
    assert r["total"]["cores"] == pytest.approx(0.2) and r["rows"][0]["name"] == "proxy"
    assert len(r["windows"]) == 1 and r["windows"][0]["rss_peak_mib"] == pytest.approx(3.0)
