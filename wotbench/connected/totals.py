"""``connected-summary.json``: a connected run's totals in one file, from its components'
files: the engines' conn-summary.json and conn-log-*.csv (CONTRACTS §3c), wot-rpcapp's
rpc-summary.json and rpc-log.csv (§3d). The run's verdict is summary.json's
(:mod:`wotbench.connected.summary`); :mod:`wotbench.connected.finish` copies it in."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from wotbench.analysis.loading import read_model
from wotbench.connected.rpc_outcomes import unsent_lost
from wotbench.connected.spans import SPANS, spans
from wotbench.rundir.connected_block import CAUSES, ConnectedBlock
from wotbench.rundir.connected_files import ConnSummary, RpcSummary
from wotbench.rundir.layout import CONN_LOG_GLOB, CONN_SUMMARY, RPC_LOG, RPC_SUMMARY


def _pct(v: np.ndarray) -> Optional[dict[str, float]]:
    if not len(v):
        return None
    return {"p50": float(np.quantile(v, 0.5)), "p90": float(np.quantile(v, 0.9)),
            "p99": float(np.quantile(v, 0.99)), "max": float(v.max())}


def engine_files(engine_dirs: list[Path]) -> list[ConnSummary]:
    return [read_model(d / CONN_SUMMARY, ConnSummary, "conn-summary.json") for d in engine_dirs
            if (d / CONN_SUMMARY).exists()]


def app_file(app_dir: Path) -> RpcSummary:
    return read_model(app_dir / RPC_SUMMARY, RpcSummary, "rpc-summary.json")


@dataclass(frozen=True)
class ComponentFiles:
    """A connected run's components' summaries, read once for both the figures of summary.json
    (:mod:`wotbench.connected.analysis`) and the totals here."""
    engines: list[ConnSummary]          # the conn-summary.json of every engine that wrote one
    app: Optional[RpcSummary]           # wot-rpcapp's rpc-summary.json (None: no applications)


def read_components(engine_dirs: list[Path], app_dir: Optional[Path]) -> ComponentFiles:
    return ComponentFiles(engine_files(engine_dirs),
                          app_file(app_dir) if app_dir is not None
                          and (app_dir / RPC_SUMMARY).exists() else None)


def rpc_join(app_dir: Path, engine_dirs: list[Path], warmup_end_ns: int
             ) -> dict[str, np.ndarray]:
    """Per answered RPC scheduled after the warm-up: its spans (ns, :data:`spans.SPANS`)."""
    log = app_dir / RPC_LOG
    if not log.exists():
        return {k: np.zeros(0) for k in SPANS}
    return spans(log, [f for d in engine_dirs for f in sorted(d.glob(CONN_LOG_GLOB))],
                 warmup_end_ns)


@dataclass(frozen=True)
class EngineTotals:
    """The engines' counts summed: disconnects and connect failures by cause, and what the
    testbed lost (its own causes, full pools and heaps, dropped log rows)."""
    disconnects: dict[str, int]
    connect_failures: dict[str, int]
    testbed: dict[str, int]     # a fresh dict per call: the caller may add app_rows_full


def engine_totals(engines: list[ConnSummary]) -> EngineTotals:
    disc = {c: sum(getattr(e.disconnects, c) for e in engines) for c in CAUSES}
    cfail = {c: sum(getattr(e.connect_failures, c) for e in engines) for c in CAUSES}
    loops = [lp for e in engines for lp in e.loop]
    return EngineTotals(disc, cfail, {
        "disconnects": disc["testbed"], "connect_failures": cfail["testbed"],
        "pool_full": sum(lp.pool_full for lp in loops),
        "heap_full": sum(lp.heap_full for lp in loops),
        "log_dropped": sum(lp.log_dropped for lp in loops)})


def summarize(files: ComponentFiles, engine_dirs: list[Path], app_dir: Optional[Path],
              devices: int, attached_all: bool, warmup_end_ns: int,
              extra: dict[str, Any], block: Optional[ConnectedBlock] = None
              ) -> dict[str, Any]:
    """``block``: summary.json's figures of the same run (its events; whether the server →
    device → server figure applies: one host)."""
    eng = files.engines
    totals = engine_totals(eng)
    disc, cfail, testbed = totals.disconnects, totals.connect_failures, totals.testbed
    loops = [lp for e in eng for lp in e.loop]
    out: dict[str, Any] = {
        "devices": devices, "engines": len(engine_dirs), "engine_files": len(eng),
        "attached_all": attached_all,
        "attached_at_exit": sum(e.attached_at_exit for e in eng),
        "attaches": sum(e.attaches for e in eng),
        "disconnects": disc, "connect_failures": cfail, "testbed": testbed,
        "device_messages_in": sum(e.msgs_in for e in eng),
        "device_replies": sum(e.replies for e in eng),
        "device_bytes_in": sum(e.bytes_in for e in eng),
        "device_bytes_out": sum(e.bytes_out for e in eng),
        "heartbeats": sum(e.heartbeats for e in eng), "pongs": sum(e.pongs for e in eng),
        "engine_cpu_s": sum(lp.cpu_ns for lp in loops) / 1e9,
        "engine_timer_late_p99_ns": max([lp.timer_late_ns.p99 or 0 for lp in loops] or [0]),
        **extra}
    app = files.app
    if app is not None and app_dir is not None:
        sp = rpc_join(app_dir, engine_dirs, warmup_end_ns)
        rtt, mine = sp["round_trip"], sp["engine"]
        share = mine / rtt if len(rtt) else np.asarray([])
        written = app.model_dump(mode="json", by_alias=True)    # these keys as the file has them
        out["rpc"] = {k: written[k] for k in ("apps", "rpcs", "measured", "ok",
                                              "timeout", "rejected", "lost", "late_replies",
                                              "post_202", "bytes_out", "bytes_in", "latency_ns",
                                              "send_lag_ns")}
        for k in ("offered_per_s", "sent_per_s", "answered_per_s"):   # older runs: absent
            out["rpc"][k] = getattr(app, k)
        out["rpc"]["unsent_lost"] = unsent_lost(app)
        out["rpc"]["overflow"] = app.overflow or 0     # open loop only
        out["rpc"]["engine_part_ns"] = _pct(mine)
        out["rpc"]["testbed_share"] = _pct(share)
        # the study's figure at the kernel's boundaries (spans.py; one host, loopback only)
        if block is not None and block.rpc is not None and \
                block.rpc.server_device_server is not None:
            out["rpc"]["server_device_server_ns"] = _pct(sp["server_device_server"])
        if app.rows_full:
            testbed["app_rows_full"] = 1
    ev = block.events if block is not None else None
    if ev is not None:
        lag = ev.send_lag
        out["events"] = {
            "scheduled": ev.scheduled, **ev.outcomes, "rows": ev.rows, "unlogged": ev.unlogged,
            "measured": ev.measured, "bytes": ev.bytes,
            "send_lag_ns": None if lag.p50_ms is None else
            {k: getattr(lag, f"{k}_ms") * 1e6 for k in ("p50", "p90", "p99", "max")},
            "send_lag_all_p99_ns": None if ev.send_lag_all_p99_ms is None
            else ev.send_lag_all_p99_ms * 1e6}
    return out
