"""A connected run's figures from its components' files (CONTRACTS §3c, §3d) and the kernel's
evidence (``monitor/connected-sched.csv``, :mod:`wotbench.connected.sched`) and which receive
stamp the messages got (:mod:`wotbench.connected.stamps`): the
:class:`~wotbench.rundir.connected_block.ConnectedBlock` of summary.json and the series the
report draws (``series/connected_*.csv``).

The RPC join: the application's row (``send_ns``, ``reply_ns``) meets the device's row
(``arrival_ns``, ``due_ns``, ``end_ns``, ``sent_ns``) by the RPC's id; both stamp
CLOCK_MONOTONIC on this host. The engine's part of a round trip is its timer lateness
(end − due) plus building and writing the reply (sent − end): the testbed's. A timeout whose
device sent the reply was lost by the server; one whose device never got the RPC was not
delivered by the server. Both sides stamp a message by the TCP read that completed it, with
the kernel's receive stamp where there is one (common/tcpstamp.h), so a reader's delay is not
in the server's span: the engine's shows in its timer lateness once it exceeds the service."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from wotbench.analysis.stats import quantiles_of
from wotbench.connected.events import event_figures
from wotbench.connected.rpc_outcomes import unsent_lost
from wotbench.connected.stamps import rx_stamps
from wotbench.connected.totals import ComponentFiles, engine_totals
from wotbench.rundir.connected_files import RpcSummary
from wotbench.rundir.layout import CONN_DEVICES, CONN_LOG_GLOB, RPC_LOG
from wotbench.rundir.connected_block import (Causes, ConnectedBlock, ConnStats,
                                             CountStats, PerDeviceCounts, RpcFigures, SchedWait,
                                             ShareStats, Traffic)

WINDOW_S = 1.0          # the over-time series' bin
# wot-rpcapp's outcomes, exactly one per RPC (overflow: open loop, never sent: the application
# already had its max_outstanding RPCs)
OUTCOMES = ("ok", "timeout", "rejected", "lost", "overflow")
WORST_DEVICES = 20      # devices listed by their disconnects


@dataclass
class Inputs:
    """Where a connected run's files are and the run's clock (from run.py)."""
    engine_dirs: list[Path]
    app_dir: Optional[Path]
    sched_csv: Path
    devices: int
    test_start_ns: int       # the applications' start (or the end of the attach without them)
    duration_s: float
    warmup_end_ns: int
    extra: dict[str, Any]
    # a cell of a run across hosts: every cell's engine dirs, so its applications' RPCs meet
    # their device wherever it is; the engines' own part is then that of this cell's devices
    join_dirs: Optional[list[Path]] = None
    # a merged run across hosts: the engine dirs are on several hosts' clocks (nothing on a
    # device's clock is cut by the run's warm-up; the server → device → server figure omitted)
    several_hosts: bool = False


def _device_log(dirs: list[Path]) -> pd.DataFrame:
    cols = ["device", "id", "arrival_ns", "due_ns", "end_ns", "sent_ns", "outcome"]
    frames = [pd.read_csv(f, dtype={"id": str}) for d in dirs
              for f in sorted(d.glob(CONN_LOG_GLOB))]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def _ms(family, ns: np.ndarray):
    return quantiles_of(family, np.asarray(ns, float) / 1e6)


def _traffic(msgs_out: int, msgs_in: int, b_out: int, b_in: int, secs: float) -> Traffic:
    per = (lambda x: x / secs) if secs > 0 else (lambda x: None)
    kb = (lambda x: x / secs / 1000) if secs > 0 else (lambda x: None)
    return Traffic(messages_out=msgs_out, messages_in=msgs_in, bytes_out=b_out, bytes_in=b_in,
                   messages_out_per_s=per(msgs_out), messages_in_per_s=per(msgs_in),
                   kbytes_out_per_s=kb(b_out), kbytes_in_per_s=kb(b_in))


def rpc_frame(app_dir: Path, dev: pd.DataFrame) -> pd.DataFrame:
    """Every RPC of rpc-log.csv with its device row's stamps (NaN where the device has none)."""
    app = pd.read_csv(app_dir / RPC_LOG, dtype={"id": str})
    sent = dev[dev["outcome"] == "sent"].drop_duplicates("id")
    return app.merge(sent[["id", "arrival_ns", "due_ns", "end_ns", "sent_ns"]], on="id",
                     how="left", suffixes=("", "_dev"))


def _rpc_figures(app: RpcSummary, j: pd.DataFrame, warm: int, dev: pd.DataFrame,
                 one_host: bool = True) -> tuple[RpcFigures, np.ndarray]:
    """``one_host``: the applications, the server and the devices on one host (the
    server → device → server figure is the kernel's boundaries there; omitted otherwise)."""
    m = j[j["sched_ns"] >= warm]
    ok = m[(m["outcome"] == "ok") & m["sent_ns"].notna()]
    rtt = (ok["reply_ns"] - ok["send_ns"]).to_numpy(float)
    mine = (np.maximum(ok["end_ns"] - ok["due_ns"], 0) + (ok["sent_ns"] - ok["end_ns"])
            ).to_numpy(float)
    okall = m[m["outcome"] == "ok"]
    to = m[m["outcome"] == "timeout"]
    arrived = set(dev["id"])
    fig = RpcFigures(
        apps=app.apps, rpcs=app.rpcs, measured=app.measured,
        offered_per_s=app.offered_per_s, sent_per_s=app.sent_per_s,
        answered_per_s=app.answered_per_s, unsent_lost=unsent_lost(app),
        outcomes={k: int(getattr(app, k) or 0) for k in OUTCOMES},
        post_202=app.post_202, late_replies=app.late_replies,
        unmatched=app.unmatched or 0,
        round_trip=_ms(ConnStats, rtt),
        from_schedule=_ms(ConnStats, (okall["reply_ns"] - okall["sched_ns"]).to_numpy(float)),
        send_lag=_ms(ConnStats, (m["send_ns"] - m["sched_ns"]).dropna().to_numpy(float)),
        engine_part=_ms(ConnStats, mine),
        testbed_share=quantiles_of(ShareStats, mine / rtt if len(rtt) else np.zeros(0)),
        replied_not_received=int(to["sent_ns"].notna().sum()),
        not_delivered=int((~to["id"].isin(arrived)).sum()),
        server_device_server=_ms(ConnStats, (ok["sent_ns"] - ok["arrival_ns"]).to_numpy(float))
        if one_host else None)
    return fig, mine


def _own_part(dev: pd.DataFrame, warm: int) -> np.ndarray:
    """The engines' part (timer lateness + writing the reply) of every reply these engines
    sent after the warm-up, from their own stamps alone (one clock: theirs)."""
    s = dev[(dev["outcome"] == "sent") & (dev["arrival_ns"] >= warm)]
    return (np.maximum(s["end_ns"] - s["due_ns"], 0) + (s["sent_ns"] - s["end_ns"])
            ).to_numpy(float)


def rpc_over_time(j: pd.DataFrame, start_ns: int) -> pd.DataFrame:
    """Per second of the test: RPCs by outcome (by send time), replies, round-trip p50/p99."""
    if not len(j):
        return pd.DataFrame(columns=["t_s", "sent", *OUTCOMES, "rt_p50_ms", "rt_p99_ms"])
    # by send time; an RPC never sent (open loop: overflow, or its connection down) by its
    # scheduled time
    t = ((j["send_ns"].fillna(j["sched_ns"]) - start_ns) / 1e9 // WINDOW_S * WINDOW_S
         ).rename("t_s")
    counts = pd.crosstab(t, j["outcome"]).reindex(columns=list(OUTCOMES), fill_value=0)
    counts.insert(0, "sent", j["send_ns"].notna().groupby(t).sum().reindex(counts.index,
                                                                           fill_value=0))
    ok = j["outcome"] == "ok"
    rt = ((j.loc[ok, "reply_ns"] - j.loc[ok, "send_ns"]) / 1e6).groupby(t[ok])
    out = counts.join(rt.quantile(0.5).rename("rt_p50_ms")).join(rt.quantile(0.99)
                                                                 .rename("rt_p99_ms"))
    return out.reset_index()


def sched_figures(path: Path, start_ns: int, end_ns: int, rpcs: int
                  ) -> tuple[list[SchedWait], pd.DataFrame]:
    """Per component: CPU and run-queue wait over [start, end] (the samples nearest inside), and
    the per-window wait share series."""
    if not path.exists():
        return [], pd.DataFrame()
    df = pd.read_csv(path)
    df = df[(df["mono_ns"] >= start_ns - 1_500_000_000) & (df["mono_ns"] <= end_ns + 1_500_000_000)]
    out, series = [], []
    for (name, role), g in df.groupby(["component", "role"], sort=True):
        g = g.sort_values("mono_ns")
        if len(g) < 2:
            continue
        # a sample sums the threads alive then: when threads exit (an engine stopping, a
        # worker gone) the sum drops, and last − first would lose all they ran, even go below
        # zero; adding the rises loses only their last interval
        d = g[["cpu_ns", "runqueue_ns"]].diff().iloc[1:].clip(lower=0)
        cpu = d["cpu_ns"].sum() / 1e9
        wait = d["runqueue_ns"].sum() / 1e9
        out.append(SchedWait(component=name, role=role, cpu_s=cpu, runqueue_s=wait,
                             wait_of_cpu=wait / cpu if cpu > 0 else None,
                             wait_per_rpc_ms=wait * 1e3 / rpcs if rpcs else None))
        span = g["mono_ns"].diff().iloc[1:]
        series.append(pd.DataFrame({"t_s": (g["mono_ns"].iloc[1:] - start_ns) / 1e9,
                                    "component": name, "role": role,
                                    "cpu_share": d["cpu_ns"] / span,
                                    "wait_share": d["runqueue_ns"] / span,
                                    "wait_s": d["runqueue_ns"] / 1e9}))
    return out, (pd.concat(series, ignore_index=True) if series else pd.DataFrame())


def _per_device(dirs: list[Path]) -> Optional[PerDeviceCounts]:
    frames = [pd.read_csv(d / CONN_DEVICES) for d in dirs if (d / CONN_DEVICES).exists()]
    if not frames:
        return None
    df = pd.concat(frames, ignore_index=True)
    disc = df[["server_closed", "reset", "testbed", "protocol_error"]].sum(axis=1)
    worst = df.assign(disconnects=disc)[disc > 0].nlargest(WORST_DEVICES, "disconnects")
    cols = ["device", "name", "protocol", "disconnects", "server_closed", "reset", "testbed",
            "protocol_error", "attaches", "rpcs_in", "replies"]

    def counts(c: str):
        return quantiles_of(CountStats, df[c].to_numpy(float))
    return PerDeviceCounts(
        devices=len(df), rpcs_in=counts("rpcs_in"), replies=counts("replies"),
        attaches=counts("attaches"), with_disconnects=int((disc > 0).sum()),
        never_attached_at_exit=int((df["attached_at_exit"] == 0).sum()),
        worst=[{k: (str(v) if isinstance(v, str) else int(v)) for k, v in r.items()}
               for r in worst[cols].to_dict("records")])


def analyse(inp: Inputs, files: ComponentFiles
            ) -> tuple[ConnectedBlock, dict[str, pd.DataFrame], np.ndarray]:
    """The block, the series (name -> frame) and the engine's part of each measured RPC (ns);
    ``files``: the components' summaries of ``inp``'s directories."""
    eng = files.engines
    loops = [lp for e in eng for lp in e.loop]
    totals = engine_totals(eng)
    disc, cfail = Causes(**totals.disconnects), Causes(**totals.connect_failures)
    lost = totals.testbed
    secs, x = inp.duration_s, inp.extra
    series: dict[str, pd.DataFrame] = {}
    dev = _device_log(inp.join_dirs or inp.engine_dirs)
    own_dev = _device_log(inp.engine_dirs) if inp.join_dirs is not None else dev   # a cell's
    rpc, mine, apps_side, j = None, np.zeros(0), None, None
    app = files.app
    if app is not None and inp.app_dir is not None:
        if app.rows_full:
            lost["app_rows_full"] = 1
        j = rpc_frame(inp.app_dir, dev)
        rpc, mine = _rpc_figures(app, j, inp.warmup_end_ns, dev,
                                 one_host=inp.join_dirs is None and not inp.several_hosts)
        if inp.join_dirs is not None:
            mine = _own_part(own_dev, inp.warmup_end_ns)
            rpc = rpc.model_copy(update={"engine_part": _ms(ConnStats, mine)})
        series["connected_rpc_over_time"] = rpc_over_time(j, inp.test_start_ns)
        apps_side = _traffic(app.sent if app.sent is not None else app.rpcs,
                             app.ok + app.late_replies + (app.events_in or 0), app.bytes_out,
                             app.bytes_in, app.duration_s or secs)
    sched, sched_series = sched_figures(inp.sched_csv, inp.test_start_ns,
                                        inp.test_start_ns + int(secs * 1e9),
                                        rpc.measured if rpc else 0)
    if len(sched_series):
        series["connected_sched"] = sched_series
    late = [lp.timer_late_ns.p99 for lp in loops if lp.timer_late_ns.p99 is not None]
    block = ConnectedBlock(
        devices=inp.devices, engines=len(inp.engine_dirs),
        attached_all=bool(x.get("attached_all")), attach_s=x.get("attach_s"),
        attached_at_exit=sum(e.attached_at_exit for e in eng),
        attaches=sum(e.attaches for e in eng), disconnects=disc, connect_failures=cfail,
        testbed_loss=lost, host_memory_per_device_bytes=x.get("host_memory_per_device_bytes"),
        engine_cpu_s=sum(lp.cpu_ns for lp in loops) / 1e9,
        engine_timer_late_p99_ms=max(late) / 1e6 if late else None,
        heartbeats=sum(e.heartbeats for e in eng), pongs=sum(e.pongs for e in eng),
        devices_side=_traffic(sum(e.replies + e.events + e.heartbeats for e in eng),
                              sum(e.msgs_in for e in eng), sum(e.bytes_out for e in eng),
                              sum(e.bytes_in for e in eng), x.get("engines_s") or secs),
        apps_side=apps_side, rpc=rpc, sched=sched,
        events=event_figures(eng, inp.engine_dirs,
                             None if inp.several_hosts else inp.warmup_end_ns),
        sched_missing=x.get("sched_missing") or (None if sched else
                                                 "no run-queue samples of the components"),
        per_device=_per_device(inp.engine_dirs),
        load_before=list(x.get("load_before", [])), load_after=list(x.get("load_after", [])),
        edge_running_at_end=x.get("edge_running_at_end"),
        stamps=rx_stamps(eng, own_dev, app, j, inp.warmup_end_ns))
    return block, series, mine
