"""The analysis of a connected run across hosts (:mod:`wotbench.distributed.connected_coord`):
each cell's own run directory (its applications' RPCs, joined with every cell's device logs;
its engines' own part; its processes' run-queue wait) and the merged one (every RPC, every
engine, the server's samples). A cell's stamps are its node's CLOCK_MONOTONIC; the merged
files move each cell's onto the coordinator's by the cell's T0 (``t - t0_cell + t0_here``),
so round trips (two stamps of one application) are unchanged and the cells' seconds line up
within the start skew the clock check reports."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pandas as pd

from wotbench.config.schema import Config
from wotbench.connected.analysis import Inputs
from wotbench.connected.finish import write_run_dir
from wotbench.connected.totals import app_file
from wotbench.distributed.merge import Requests
from wotbench.distributed.verdict import ClusterVerdict
from wotbench.rundir import MergedRunDir, RunDir
from wotbench.rundir.connected_cell import CellFile
from wotbench.rundir.connected_files import RpcSummary
from wotbench.rundir.layout import RPC_LOG, RPC_SUMMARY
from wotbench.rundir.summary import Outcomes, ResponseTimes, RtStats, Summary
from cd_module.tolerance import parse_tolerance

RPC_TIMES = ("sched_ns", "send_ns", "reply_ns", "reply_read_ns")
SUMMED = ("apps", "rpcs", "measured", "measured_sent", "measured_ok", "offered_per_s",
          "sent_per_s", "answered_per_s", "ok", "timeout", "rejected", "lost", "overflow",
          "unsent_down", "unsent_write", "sent", "post_2xx", "post_202", "late_replies",
          "unmatched", "others", "events_in",
          "app_disconnects", "sub_disconnects", "bytes_out", "bytes_in",
          "replies_kernel_stamped", "replies_user_stamped")


def engine_dirs(cell: Path) -> list[Path]:
    return RunDir(cell).engine_outs()


def _inputs(cell: Path, info: CellFile, duration_s: float, **kw) -> Inputs:
    apps = RunDir(cell).apps_dir
    return Inputs(engine_dirs=engine_dirs(cell),
                  app_dir=apps if (apps / RPC_SUMMARY).exists() else None,
                  sched_csv=RunDir(cell).connected_sched_csv, devices=info.devices,
                  test_start_ns=info.t0_mono_ns, duration_s=duration_s,
                  warmup_end_ns=info.warmup_end_ns, extra=info.extra(), **kw)


def _judge(cfg: Config, run_dir: Path, name: str, inp: Inputs) -> Summary:
    apps = cfg.applications
    return write_run_dir(run_dir, name, inp, cfg=cfg, interrupted=False,
                         tolerance=parse_tolerance(cfg.verdict.tolerance)["tolerance_share"],
                         think_min_ms=apps.send_lag_scale_ms if apps else 0,
                         log=lambda m: print(f"wotbench: {name}: {m}", flush=True))


def analyse_cell(cell: Path, node: str, info: CellFile, infos: dict[str, CellFile], cfg: Config,
                 resolved: str, md: MergedRunDir) -> Summary:
    """The cell's summary.json and report.html in its own directory (``info``: its cell.json,
    read by the coordinator with T0 known)."""
    RunDir(cell).config_resolved.write_text(resolved)
    join = [d for n in sorted(infos) for d in engine_dirs(md.cell_dir(n))]
    inp = _inputs(cell, info, float(cfg.duration_s), join_dirs=join)
    return _judge(cfg, cell, f"{cfg.name}-{node}", inp)


def _rebased_rpcs(md: MergedRunDir, infos: dict[str, CellFile], t0_here: int,
                  dest: Path) -> None:
    """Every cell's rpc-log.csv on this host's clock, and their rpc-summary.json summed."""
    frames, sums = [], {k: 0 for k in SUMMED}
    duration, rows_full = 0.0, False
    for n, info in sorted(infos.items()):
        apps = RunDir(md.cell_dir(n)).apps_dir
        if not (apps / RPC_LOG).exists() or not (apps / RPC_SUMMARY).exists():
            continue
        f = pd.read_csv(apps / RPC_LOG, dtype={"id": str})
        for c in RPC_TIMES:
            if c in f:             # reply_read_ns: absent in a file of an older build
                f[c] = (f[c] - info.t0_mono_ns + t0_here).astype("Int64")
        frames.append(f)
        s = app_file(apps)
        for k in SUMMED:
            sums[k] += getattr(s, k) or 0
        duration = max(duration, s.duration_s or 0.0)
        rows_full = rows_full or s.rows_full
    dest.mkdir(parents=True, exist_ok=True)
    if frames:
        pd.concat(frames, ignore_index=True).to_csv(dest / RPC_LOG, index=False)
    # the processes' own percentiles do not add up: summary.json has the merged ones
    merged = RpcSummary(**sums, duration_s=duration, rows_full=rows_full, latency_ns=None,
                        send_lag_ns=None)
    # the keys set here only, as before: a field no cell's file sums stays absent
    (dest / RPC_SUMMARY).write_text(json.dumps(
        merged.model_dump(mode="json", exclude_unset=True)) + "\n")


def _rebased_sched(md: MergedRunDir, infos: dict[str, CellFile], t0_here: int,
                   dest: Path) -> None:
    """The server's samples (this host) and every cell's, named ``node/component``."""
    frames = []
    edge = RunDir(md.path).edge_sched_csv
    if edge.exists():
        frames.append(pd.read_csv(edge))
    for n, info in sorted(infos.items()):
        f = RunDir(md.cell_dir(n)).connected_sched_csv
        if f.exists():
            df = pd.read_csv(f)
            df["mono_ns"] = df["mono_ns"] - info.t0_mono_ns + t0_here
            df["component"] = n + "/" + df["component"].astype(str)
            frames.append(df)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if frames:
        pd.concat(frames, ignore_index=True).to_csv(dest, index=False)


def analyse_merged(merged: Path, cfg: Config, resolved: str, infos: dict[str, CellFile],
                   t0_here: int, edge_running: Optional[bool], v: ClusterVerdict) -> Summary:
    """The merged summary.json (every RPC and engine) with the run's verdict: the worst
    cell's (each cell's evidence judges its own host); the SLO from every RPC decides 0/4."""
    md, rd = MergedRunDir(merged), RunDir(merged)
    rd.config_resolved.write_text(resolved)
    _rebased_rpcs(md, infos, t0_here, rd.apps_dir)
    _rebased_sched(md, infos, t0_here, rd.connected_sched_csv)
    dirs = [d for n in sorted(infos) for d in engine_dirs(md.cell_dir(n))]
    warm = t0_here + (cfg.applications.warmup_s if cfg.applications else 0) * 1_000_000_000
    first = infos[min(infos)]
    extra = {"attached_all": all(i.attached_all for i in infos.values()),
             "attach_s": max((i.attach_s or 0) for i in infos.values()),
             "engines_s": max((i.engines_s or 0) for i in infos.values()),
             "load_before": first.load_before, "load_after": first.load_after,
             "edge_running_at_end": edge_running,
             "sched_missing": next((i.sched_missing for i in infos.values()
                                    if i.sched_missing), None)}
    inp = Inputs(engine_dirs=dirs,
                 app_dir=rd.apps_dir if (rd.apps_dir / RPC_LOG).exists() else None,
                 sched_csv=rd.connected_sched_csv,
                 devices=sum(i.devices for i in infos.values()), test_start_ns=t0_here,
                 duration_s=float(cfg.duration_s), warmup_end_ns=warm, extra=extra,
                 several_hosts=True)
    s = _judge(cfg, merged, cfg.name, inp)
    own = [f"the merged figures alone (every cell's RPCs and processes) would say "
           f"{s.verdict.status}" + (f": {s.verdict.reasons[0]}" if s.verdict.reasons else "")]
    missed = s.slo is not None and s.slo.status != "met"
    code = 3 if v.status != "trustworthy" else 4 if missed or v.exit_code == 4 else 0
    verdict = s.verdict.model_copy(update={"status": v.status, "exit_code": code,
                                           "reasons": list(v.reasons) + own})
    slo = s.slo
    if slo is not None:   # its caveat follows the run's verdict, not the merged figures' own
        from wotbench.analysis import slo_judge as sloa
        slo = sloa.with_verdict(slo.model_copy(update={"testbed_caveat": None}), v.status)
    s = s.model_copy(update={"verdict": verdict, "slo": slo,
                             "run": s.run.model_copy(update={"backend": "swarm"})})
    RunDir(merged).write_summary(s)
    try:   # again: its banner shows the run's verdict, not the merged figures' own
        from wotbench.report import render
        render(merged)
    except Exception as e:  # noqa: BLE001 - the data stay; `wotbench report` can try again
        print(f"wotbench: report.html not re-rendered: {type(e).__name__}: {e}", flush=True)
    return s


def requests_of(s: Summary) -> Requests:
    o = s.overall
    return Requests(requests=o.requests, sent=o.sent, outcomes=o.outcomes,
                    response_time_ms=o.response_time_ms)


def no_requests() -> Requests:
    return Requests(requests=0, sent=0, outcomes=Outcomes(),
                    response_time_ms=ResponseTimes(from_sent=RtStats(), from_scheduled=RtStats()))
