"""The end of a connected run: what was measured becomes a run directory like every other run's
(CONTRACTS §4): ``run.json``, ``series/connected_*.csv``, ``summary.json`` (a
:class:`~wotbench.rundir.summary.Summary` with the ``connected`` block), ``report.html``, and
``connected-summary.json`` (the components' totals in one file, as before). Runs also after a
failure or Ctrl-C: it keeps what was measured."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from wotbench.config.schema import Config
from wotbench.connected import analysis, summary as csummary
from wotbench.connected.totals import read_components, summarize
from wotbench.rundir import RunDir, atomic
from wotbench.rundir.layout import RPC_LOG
from wotbench.rundir.record import HostRecord, RunRecord, TestWindow
from wotbench.rundir.summary import Summary
from wotbench.stamps import iso_stamp


def _rtts(inp: analysis.Inputs) -> tuple[np.ndarray, np.ndarray]:
    """Round trip (send → reply) and from the schedule of every ok RPC after the warm-up, ms."""
    if inp.app_dir is None or not (inp.app_dir / RPC_LOG).exists():
        return np.zeros(0), np.zeros(0)
    import pandas as pd
    j = pd.read_csv(inp.app_dir / RPC_LOG, usecols=["sched_ns", "send_ns", "reply_ns",
                                                          "outcome"])
    ok = j[(j["outcome"] == "ok") & (j["sched_ns"] >= inp.warmup_end_ns)]
    return ((ok["reply_ns"] - ok["send_ns"]) / 1e6).to_numpy(float), \
        ((ok["reply_ns"] - ok["sched_ns"]) / 1e6).to_numpy(float)


def _with_slo(cfg: Optional[Config], inp: analysis.Inputs, s: Summary) -> Summary:
    """The config's ``slo:`` judged on the RPCs; exit code 4 when missed on a faithful run."""
    from wotbench.analysis import slo_judge as sloa
    from wotbench.connected import slo
    block = None if cfg is None else slo.evaluate(
        cfg, inp.app_dir / RPC_LOG if inp.app_dir else None, inp.warmup_end_ns, inp.duration_s)
    if block is None:
        return s
    v = s.verdict.model_copy(update={"exit_code": sloa.exit_code(s.verdict.status, block)})
    return s.model_copy(update={"slo": sloa.with_verdict(block, v.status), "verdict": v})


def _with_sut(rd: RunDir, inp: analysis.Inputs, s: Summary, series: dict) -> Summary:
    """The edge server's CPU and memory (``monitor/sut.csv``) as a single-host run's SUT:
    ``sut_resources`` and ``series/sut_resources.csv``, per contention window."""
    from wotbench.analysis import sut_resources as sutm
    block, sut_series = sutm.analyse(rd, inp.test_start_ns, inp.duration_s,
                                     s.run.params.contention.window_s)
    if block is None:
        return s
    series["sut_resources"] = sut_series
    return s.model_copy(update={"sut_resources": block})


def write_run_dir(run_dir: Path, name: str, inp: analysis.Inputs, *, cfg: Optional[Config],
                  interrupted: bool, tolerance: float, think_min_ms: float,
                  log=print) -> Summary:
    """``cfg``: the run's config (its ``slo:`` is judged; None: no SLO, e.g. a directory made by
    hand), the one it wrote to config.resolved.yaml."""
    rd = RunDir(run_dir)
    rd.write_run(RunRecord(
        name=name, run_id=run_dir.name, backend="process",
        host=HostRecord(hostname=socket.gethostname(), kernel=os.uname().release,
                        machine=os.uname().machine, cpus=os.cpu_count(),
                        python=sys.version.split()[0]),
        test=TestWindow(start_mono_ns=inp.test_start_ns, duration_s=inp.duration_s),
        t0_mono_ns=inp.test_start_ns, interrupted=interrupted, written_at_utc=iso_stamp()))
    files = read_components(inp.engine_dirs, inp.app_dir)   # once: the figures and the totals
    block, series, _ = analysis.analyse(inp, files)
    rtt, sched = _rtts(inp)
    s = csummary.build(block, series, rtt, sched, name=name, run_dir=str(run_dir),
                       test_start_ns=inp.test_start_ns, duration_s=inp.duration_s,
                       interrupted=interrupted, tolerance=tolerance, think_min_ms=think_min_ms)
    s = _with_slo(cfg, inp, s)
    s = _with_sut(rd, inp, s, series)
    rd.series_dir.mkdir(exist_ok=True)
    for key, df in series.items():
        with atomic.replacing_path(rd.series(key)) as tmp:
            df.to_csv(tmp, index=False, float_format="%.6g")
    rd.write_summary(s)
    # the components' totals (as before summary.json existed), with the run's verdict
    legacy = summarize(files, inp.engine_dirs, inp.app_dir, inp.devices,
                       bool(inp.extra.get("attached_all")), inp.warmup_end_ns, inp.extra,
                       block=block)
    legacy["verdict"] = s.verdict.model_dump(mode="json")
    atomic.write_json(rd.connected_summary_json, legacy)
    try:
        from wotbench.report import render
        render(run_dir)
    except Exception as e:   # the data stay; `wotbench report RUN_DIR` can try again
        log(f"report.html not written: {type(e).__name__}: {e}")
    return s

