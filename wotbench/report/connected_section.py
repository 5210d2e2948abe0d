"""The report's "Connected devices" section (issue 30): mapped from summary.json ``connected``
(:class:`~wotbench.rundir.connected_block.ConnectedBlock`) and drawn from
``series/connected_rpc_over_time.csv`` and ``series/connected_sched.csv``; nothing is
recomputed here. matplotlib (``report/plotting.py``) is imported where a figure is drawn: the
report package's other users (the sweep, capacity and study commands, the validation table)
import this module without drawing anything."""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from wotbench.rundir import RunDir, Summary

SYSTEM_CAUSES = ("server_closed", "reset", "protocol")


def _read(rd: RunDir, name: str) -> Optional[pd.DataFrame]:
    p = rd.series(name)
    if not p.is_file():
        return None
    df = pd.read_csv(p)
    return df if len(df) else None


def fig_rpc_over_time(df: pd.DataFrame) -> str:
    from wotbench.report.plotting import BLUE, GREEN, ORANGE, RED, subplots, svg
    fig, (a1, a2) = subplots(2, 1, figsize=(10, 4.6), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 2]})
    a1.plot(df["t_s"], df["rt_p50_ms"], color=BLUE, lw=1.3, label="p50")
    a1.plot(df["t_s"], df["rt_p99_ms"], color=ORANGE, lw=1.1, label="p99")
    a1.set_yscale("log")
    a1.set_ylabel("round trip (ms)")
    a1.set_title("RPC round trip (application send → reply), per second")
    a1.legend(loc="upper right", ncol=2)
    a2.plot(df["t_s"], df["sent"], color=BLUE, lw=1.1, label="sent")
    a2.plot(df["t_s"], df["ok"], color=GREEN, lw=1.0, label="ok")
    bad = df["timeout"] + df["rejected"] + df["lost"] + df.get("overflow", 0)
    if bad.any():
        a2.bar(df["t_s"], bad, width=0.9, color=RED, label="timeout / rejected / lost / overflow")
    a2.set_ylabel("RPCs / s")
    a2.set_xlabel("time since the applications' start (s; by send time)")
    a2.set_ylim(0, None)
    a2.legend(loc="upper left", ncol=3, bbox_to_anchor=(0, -0.35))
    return svg(fig)


def fig_sched(df: pd.DataFrame) -> str:
    from wotbench.report.plotting import CYCLE, subplots, svg
    fig, ax = subplots(figsize=(10, 3.2))
    for i, (comp, g) in enumerate(sorted(df.groupby("component"), key=lambda kv: kv[0])):
        role = g["role"].iloc[0]
        ax.plot(g["t_s"], g["wait_share"] * 100, lw=1.0, color=CYCLE[i % len(CYCLE)],
                ls="-" if role == "testbed" else "--", label=f"{comp} ({role})")
    ax.set_ylabel("run-queue wait (% of wall time)")
    ax.set_xlabel("time since the applications' start (s)")
    ax.set_title("Threads waiting for a CPU, per component (/proc/<pid>/task/*/schedstat)")
    ax.set_ylim(0, None)
    ax.legend(loc="upper left", ncol=4, bbox_to_anchor=(0, -0.22))
    return svg(fig)


def _figure(fid: str, fn, df: Optional[pd.DataFrame], why: str) -> dict[str, Any]:
    from markupsafe import Markup

    from wotbench.report.plotting import close_all, scope_ids
    if df is None:
        return {"id": fid, "svg": None, "missing": why}
    try:
        return {"id": fid, "svg": Markup(scope_ids(fn(df), fid)), "missing": None}
    except Exception as e:   # a broken series must not take the whole report down
        close_all()
        return {"id": fid, "svg": None, "missing": f"it could not be drawn ({e})"}


def connected(s: Summary, rd: RunDir) -> dict[str, Any]:
    b = s.connected
    if b is None:
        return {"available": False}
    causes = [{"cause": c, "whose": "system" if c in SYSTEM_CAUSES else "testbed",
               "disconnects": getattr(b.disconnects, c),
               "connect_failures": getattr(b.connect_failures, c)}
              for c in ("server_closed", "reset", "protocol", "testbed")]
    traffic = [{"end": end, **t.model_dump()} for end, t in
               (("devices (engines)", b.devices_side), ("applications", b.apps_side)) if t]
    return {"available": True, "b": b, "causes": causes, "traffic": traffic,
            "lost": {k: v for k, v in b.testbed_loss.items() if v},
            "fig_rpc": _figure("fig-connected-rpc", fig_rpc_over_time,
                               _read(rd, "connected_rpc_over_time"),
                               "the run had no applications' RPC log"),
            "fig_sched": _figure("fig-connected-sched", fig_sched, _read(rd, "connected_sched"),
                                 b.sched_missing or "no run-queue samples")}
