"""wotbench.connected.analysis.sched_figures: a component's CPU and run-queue wait from the
per-second samples of its threads (monitor/connected-sched.csv)."""
from __future__ import annotations

import pytest

from wotbench.connected.analysis import sched_figures

S = 1_000_000_000


def _write(path, rows):
    path.write_text("mono_ns,component,role,cpu_ns,runqueue_ns\n"
                    + "".join(f"{t},{c},{r},{cpu},{w}\n" for t, c, r, cpu, w in rows))


def test_cpu_and_wait_are_what_the_samples_rose_by(tmp_path):
    csv = tmp_path / "s.csv"
    _write(csv, [(0, "eng", "testbed", 100, 10), (S, "eng", "testbed", 600, 110),
                 (2 * S, "eng", "testbed", 1100, 310)])
    [w], series = sched_figures(csv, 0, 2 * S, rpcs=4)
    assert (w.cpu_s, w.runqueue_s) == pytest.approx((1000e-9, 300e-9))
    assert w.wait_per_rpc_ms == pytest.approx(300e-9 * 1e3 / 4)
    assert series["cpu_share"].tolist() == pytest.approx([500 / S, 500 / S])


def test_threads_that_exit_never_make_a_component_run_backwards(tmp_path):
    """An engine stopping (its loop threads gone from the last samples) dropped the sum: a run
    that ended at its attach reported -12 s of CPU per engine (2026-11-27 21:45)."""
    csv = tmp_path / "s.csv"
    _write(csv, [(0, "eng", "testbed", 1000, 500), (S, "eng", "testbed", 3000, 900),
                 (2 * S, "eng", "testbed", 400, 100),          # two of its threads exited
                 (3 * S, "eng", "testbed", 700, 300)])
    [w], _ = sched_figures(csv, 0, 3 * S, rpcs=0)
    assert w.cpu_s == pytest.approx((2000 + 300) * 1e-9)     # the rises, none of the drop
    assert w.runqueue_s == pytest.approx((400 + 200) * 1e-9)
    assert w.wait_of_cpu == pytest.approx(600 / 2300) and w.wait_per_rpc_ms is None
