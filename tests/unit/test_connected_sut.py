"""A connected run's edge server as the SUT (wotbench.connected.sut): the monitor's sampler
started on the server's pid follows its process tree into monitor/sut.csv and stops; a
connected run directory with that file gets summary.json ``sut_resources`` and the report's
table, like a single-host run's ``server:`` SUT."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from test_connected_rundir import MS, T0, _apps, _engine, _sched
from wotbench.connected.analysis import Inputs
from wotbench.connected.finish import write_run_dir
from wotbench.connected.sut import EdgeSutSampler, privileges
from wotbench.rundir import RunDir
from wotbench.rundir.sut import MIB, SUT_COLUMNS

# a "server": a master that forks a worker; the worker touches 30 MiB, burns 0.3 s of CPU and
# says so (the test waits for that, not for a fixed time)
SERVER = ("import os, sys, time\n"
          "if os.fork() == 0:\n"
          "    x = bytearray(30 * 2**20)\n"
          "    x[::4096] = b'1' * len(x[::4096])\n"
          "    t = time.process_time()\n"
          "    while time.process_time() - t < 0.3: pass\n"
          "    print('burnt', flush=True)\n"
          "    time.sleep(30)\n"
          "    os._exit(0)\n"
          "time.sleep(30)\n")


def test_the_sampler_follows_the_servers_tree_from_its_pid_and_stops(tmp_path):
    rd = RunDir(tmp_path)
    (tmp_path / "monitor").mkdir()
    p = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE,
                         start_new_session=True)      # its group: the worker goes with it
    try:
        s = EdgeSutSampler(rd, interval_s=0.05, log=lambda *_: None).start(p.pid)
        assert s._thread is not None and s._thread.is_alive()
        assert p.stdout.readline() == b"burnt\n"                # >= 0.3 s: >= 6 intervals
        procs = privileges(p.pid)
        s.stop()                                                # its last sample: after the burn
        assert s._thread is None and len(s.sampler) == 0       # the thread ended, files closed
        rows = list(csv.DictReader(open(rd.sut_csv)))
        n = len(rows)
        time.sleep(0.2)
        assert len(list(csv.DictReader(open(rd.sut_csv)))) == n  # nothing after the stop
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert n >= 5 and {r["component"] for r in rows} == {"edge-server"}
    assert {(r["role"], r["group"], r["source"]) for r in rows} == {("server", "edge-server", "proc")}
    last = rows[-1]
    assert int(last["processes"]) == 2                        # the master and its worker
    assert int(last["cpu_ns"]) >= 0.25e9 and int(last["rss_bytes"]) >= 30 * MIB
    assert len(procs) == 2 and all(q["uid"] == os.getuid() for q in procs), procs


def test_a_connected_run_directory_with_the_servers_samples_has_sut_resources(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "monitor").mkdir(parents=True)
    with open(run_dir / "monitor" / "sut.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUT_COLUMNS)
        for k in range(-2, 12):            # 0.25 core, 8 MiB, from before the test to after it
            w.writerow([T0 + k * 1000 * MS, "edge-server", "server", "edge-server", "proc",
                        (k + 2) * 250 * MS, 8 * MIB, 8 * MIB, "", "", 3])
    eng = _engine(run_dir / "engines" / "e-conn0" / "out")
    inp = Inputs(engine_dirs=[eng], app_dir=_apps(run_dir / "apps"),
                 sched_csv=_sched(run_dir / "monitor" / "connected-sched.csv", 0.1), devices=4,
                 test_start_ns=T0, duration_s=10.0, warmup_end_ns=T0,
                 extra={"attached_all": True, "attach_s": 0.5, "engines_s": 20.0,
                        "load_before": [0.5, 0.4, 0.3], "load_after": [0.6, 0.4, 0.3]})
    write_run_dir(run_dir, "conn-test", inp, cfg=None, interrupted=False, tolerance=0.05,
                  think_min_ms=40, log=lambda *_: None)
    rd = RunDir(run_dir)
    sut = rd.read_summary().sut_resources
    edge = sut.components["edge-server"]
    assert edge.role == "server" and edge.source == "proc"
    assert edge.test.cpu_cores == pytest.approx(0.25) and sut.total.cpu_cores == pytest.approx(0.25)
    assert edge.test.rss_mean_bytes == 8 * MIB and len(sut.total_windows) == len(edge.windows) >= 1
    assert rd.series("sut_resources").is_file()
    html = (run_dir / "report.html").read_text()
    table = html.split('id="table-connected-sut-resources"')[1].split("</table>")[0]
    assert "edge-server (whole test)" in table and "0.250" in table
