"""A connected run's figures and verdict, from its components' files: the engines'
conn-summary.json and conn-log-*.csv (CONTRACTS §3c), wot-rpcapp's rpc-summary.json and
rpc-log.csv (§3d). What is the testbed's: connections the engines lost by their own limits
(cause `testbed`, a full reply pool or timer heap, dropped log rows, the application's rows
running out) is testbed loss; an engine whose own part of the RPC round trip (timer lateness +
writing the reply) or an application whose send lag exceeds the tolerance distorted the
latencies (contention). What the server did (closed, reset, refused, 202) is the system's and
is reported, not flagged."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

CAUSES = ("server_closed", "reset", "testbed", "protocol")


def _pct(v: np.ndarray) -> Optional[dict[str, float]]:
    if not len(v):
        return None
    return {"p50": float(np.quantile(v, 0.5)), "p90": float(np.quantile(v, 0.9)),
            "p99": float(np.quantile(v, 0.99)), "max": float(v.max())}


def engine_files(engine_dirs: list[Path]) -> list[dict[str, Any]]:
    return [json.loads((d / "conn-summary.json").read_text()) for d in engine_dirs
            if (d / "conn-summary.json").exists()]


def rpc_join(app_dir: Path, engine_dirs: list[Path], warmup_end_ns: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per answered RPC scheduled after the warm-up: round trip and the engine's part (ns)."""
    dev: dict[str, tuple[int, int, int]] = {}
    for d in engine_dirs:
        for f in sorted(d.glob("conn-log-*.csv")):
            with f.open() as fp:
                for r in csv.DictReader(fp):
                    if r["outcome"] == "sent":
                        dev[r["id"]] = (int(r["due_ns"]), int(r["end_ns"]), int(r["sent_ns"]))
    rtt, mine = [], []
    log = app_dir / "rpc-log.csv"
    if log.exists():
        with log.open() as fp:
            for r in csv.DictReader(fp):
                if r["outcome"] != "ok" or int(r["sched_ns"]) < warmup_end_ns or r["id"] not in dev:
                    continue
                due, end, sent = dev[r["id"]]
                rtt.append(int(r["reply_ns"]) - int(r["send_ns"]))
                mine.append(max(end - due, 0) + (sent - end))
    return np.asarray(rtt, float), np.asarray(mine, float)


def summarize(run_dir: Path, engine_dirs: list[Path], app_dir: Optional[Path], devices: int,
              attached_all: bool, tolerance: float, think_min_ms: int,
              warmup_end_ns: int, extra: dict[str, Any]) -> dict[str, Any]:
    eng = engine_files(engine_dirs)
    disc = {c: sum(e["disconnects"][c] for e in eng) for c in CAUSES}
    cfail = {c: sum(e["connect_failures"][c] for e in eng) for c in CAUSES}
    loops = [lp for e in eng for lp in e["loop"]]
    testbed = {"disconnects": disc["testbed"], "connect_failures": cfail["testbed"],
               "pool_full": sum(lp["pool_full"] for lp in loops),
               "heap_full": sum(lp["heap_full"] for lp in loops),
               "log_dropped": sum(lp["log_dropped"] for lp in loops)}
    out: dict[str, Any] = {
        "devices": devices, "engines": len(engine_dirs), "engine_files": len(eng),
        "attached_all": attached_all,
        "attached_at_exit": sum(e["attached_at_exit"] for e in eng),
        "attaches": sum(e["attaches"] for e in eng),
        "disconnects": disc, "connect_failures": cfail, "testbed": testbed,
        "device_messages_in": sum(e["msgs_in"] for e in eng),
        "device_replies": sum(e["replies"] for e in eng),
        "device_bytes_in": sum(e["bytes_in"] for e in eng),
        "device_bytes_out": sum(e["bytes_out"] for e in eng),
        "heartbeats": sum(e["heartbeats"] for e in eng), "pongs": sum(e["pongs"] for e in eng),
        "engine_cpu_s": sum(lp["cpu_ns"] for lp in loops) / 1e9,
        "engine_timer_late_p99_ns": max([lp["timer_late_ns"]["p99"] or 0 for lp in loops] or [0]),
        **extra}
    reasons: list[str] = []
    app = None
    if app_dir is not None and (app_dir / "rpc-summary.json").exists():
        app = json.loads((app_dir / "rpc-summary.json").read_text())
        rtt, mine = rpc_join(app_dir, engine_dirs, warmup_end_ns)
        share = mine / rtt if len(rtt) else np.asarray([])
        out["rpc"] = {k: app[k] for k in ("apps", "rpcs", "measured", "rpc_per_s", "ok",
                                          "timeout", "rejected", "lost", "late_replies",
                                          "post_202", "bytes_out", "bytes_in", "latency_ns",
                                          "send_lag_ns")}
        out["rpc"]["engine_part_ns"] = _pct(mine)
        out["rpc"]["testbed_share"] = _pct(share)
        if app.get("rows_full"):
            testbed["app_rows_full"] = 1
        lag99 = (app.get("send_lag_ns") or {}).get("p99", 0)
        if lag99 > max(1e6, tolerance * think_min_ms * 1e6):
            reasons.append(f"the applications sent late: send lag p99 {lag99 / 1e6:.2f} ms")
        if len(rtt) and np.quantile(mine, 0.99) > tolerance * np.quantile(rtt, 0.5):
            reasons.append(f"the engines fell behind their devices: their own part of the round "
                           f"trip p99 {np.quantile(mine, 0.99) / 1e6:.2f} ms > {tolerance:.0%} of "
                           f"the median round trip {np.quantile(rtt, 0.5) / 1e6:.2f} ms")
    lost = sum(testbed.values())
    if not eng or not attached_all or (app_dir is not None and (app is None or not app["ok"])):
        status, why = "invalid", ["not every device attached" if not attached_all
                                  else "no RPC answered or a component wrote no files"]
    elif lost:
        status, why = "testbed_loss", [f"the testbed lost connections or RPCs: {testbed}"]
    elif reasons:
        status, why = "contention", reasons
    else:
        status, why = "trustworthy", []
    out["verdict"] = {"status": status, "reasons": why,
                      "exit_code": 0 if status == "trustworthy" else 3}
    return out
