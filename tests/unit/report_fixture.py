"""Builds a small, realistic recorded run directory for the report tests.

It writes what the runner writes (docs/CONTRACTS.md §4: run.json, plan.json,
config.resolved.yaml, trace/resources, ge/ge-0 and cd-ge request logs, monitor/cgroups.csv and
monitor/cpu.csv), then runs the real analysis (summary.json and series/*.csv), so the report is
always tested on what the analysis really writes.

    make_run(tmp_path)                          # clean run, verdict "trustworthy"
    make_run(tmp_path, contention=True)         # contention from 10 s to 20 s, verdict "contention"
    make_run(tmp_path, monitor=False, cd=False, interrupted=True)   # optional parts missing

Everything comes from a fixed seed, so the files are the same on every call.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from wotbench.analysis import analyze
from wotbench.analysis.loading import OUTCOMES
from wotbench.deploy.plan import Plan
from wotbench.rundir import RunDir, RunRecord

START_NS = 1_000_000_000_000
CAL_S = 10
CONTENTION_WINDOW = (10.0, 20.0)
SERVICE_MS = 5.0


def _write_ge(d: Path, df: pd.DataFrame, start_ns: int, duration_s: float, label: str, interrupted: bool):
    d.mkdir(parents=True, exist_ok=True)
    ns = lambda s: s.map(lambda v: "" if pd.isna(v) else str(int(v)))  # noqa: E731
    out = pd.DataFrame({"index": np.arange(len(df)), "device": df["device_id"], "method": "GET",
                        "path": df["path"], "scheduled_ns": df["sched_ns"].astype(np.int64),
                        "sent_ns": ns(df["sent_ns"]), "received_ns": ns(df["recv_ns"]),
                        "code": df["code"], "outcome": df["outcome"], "retransmissions": 0})
    out.to_csv(d / "requests.csv", index=False)
    counts = {o: int((df["outcome"] == o).sum()) for o in OUTCOMES}
    lag = (df["sent_ns"] - df["sched_ns"]).dropna() / 1e3
    (d / "summary.json").write_text(json.dumps({
        "label": label, "trace": "trace/trace.csv", "requests": len(df), "outcomes": counts,
        "start_mono_ns": start_ns, "end_mono_ns": start_ns + int(duration_s * 1e9), "duration_s": duration_s,
        "offered_rate": len(df) / duration_s, "achieved_rate": counts["ok"] / duration_s,
        "send_lag_us": {k: float(np.quantile(lag, q)) for k, q in
                        (("p50", .5), ("p90", .9), ("p99", .99), ("p999", .999), ("max", 1.0))},
        "wait": "hybrid", "type": "con", "timeout_ms": 10000, "retransmit": False,
        "ports_per_device": 1, "interrupted": interrupted}, indent=1))


def make_run(root: Path, *, name: str = "20dev", n_devices: int = 6, duration_s: int = 30,
             contention: bool = False, ge_bottleneck: bool = False, monitor: bool = True,
             cd: bool = True, interrupted: bool = False, faithful: bool = True,
             network: dict | None = None, summary: bool = True, sut: bool = False) -> Path:
    rng = np.random.default_rng(7)
    run_dir = Path(root) / f"{name}-20250101T120000Z"
    run_dir.mkdir(parents=True, exist_ok=True)
    devices = [f"cpu-{i}" for i in range(n_devices)]
    win = CONTENTION_WINDOW if contention else None
    end_s = duration_s * (0.6 if interrupted else 1.0)

    # ------------------------------------------------------------ run.json, plan, config
    run = {
        "name": name, "run_id": f"{name}-20250101T120000Z", "backend": "docker",
        "host": {"hostname": "bench-01", "cpus": 2, "kernel": "6.1.0-18-amd64", "docker": "24.0.7",
                 "python": "3.11.2", "cpu_model": "Intel Xeon E5-2680 v4"},
        "calibration": {"start_mono_ns": START_NS - CAL_S * 1_000_000_000, "end_mono_ns": START_NS},
        "test": {"start_mono_ns": START_NS, "duration_s": duration_s},
        "devices": [{"name": d, "id": i, "address": f"172.28.0.{10 + i}", "port": 5683, "group": "cpu",
                     "resources": f"trace/resources/{d}.csv", "cpuset": "1"} for i, d in enumerate(devices)],
        "ges": [{"id": "ge-0", "dir": "ge/ge-0", "cpu": 0 if faithful else 1}],
        "failures": [{"component": "cpu-3", "what": "container exited with 137"}] if interrupted else [],
        "interrupted": interrupted,
    }
    if cd:
        run["cd"] = {"device": "cd-node", "service_time_us": 5000, "mode": "busy", "interval_s": 1.0}
        run["cd_ge"] = {"id": "cd-ge", "dir": "cd-ge"}
    if network is not None:
        run["network"] = network
    RunDir(run_dir).write_run(RunRecord.model_validate(run))   # what the runner writes
    plan = {"cores_total": 2, "usable_cores": [0, 1], "os_cores": [0], "ge_cores": {"ge-0": 0 if faithful else 1},
            "cd_ge_core": 0 if faithful else 1, "device_cores": [1], "cd_node_cpuset": "1",
            "devices": {d: "1" for d in devices}, "ge_wait": "hybrid",
            "affinity": "pinned" if faithful else "shared", "faithful": faithful,
            "warnings": [] if faithful else [
                "only 2 cores: the GE shares core 1 with the devices; GE integrity may suffer",
                "affinity 'shared': containers may migrate between cores"]}
    Plan.model_validate(plan).write(RunDir(run_dir).plan_json)   # as the runner writes it
    config = {"name": name, "duration_s": duration_s, "seed": 1, "backend": "docker",
              "devices": [{"group": "cpu", "count": n_devices, "threads": 1, "mode": "busy",
                           "service_time": {"dist": "deterministic", "mean": SERVICE_MS},
                           "rit": {"dist": "exponential", "mean": 200}, "resources": 10}],
              "gateways": {"count": 1, "wait": "hybrid", "message_type": "con", "timeout_ms": 10000},
              "contention_detector": {"enabled": cd, "interval_s": 1.0, "calibration_s": CAL_S},
              "placement": {"cpus": "all", "reserved_os_cores": 1, "affinity": plan["affinity"]},
              "monitor": {"enabled": monitor, "interval_s": 1}}
    (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    res_dir = run_dir / "trace" / "resources"
    res_dir.mkdir(parents=True, exist_ok=True)
    for d in devices + (["cd-node"] if cd else []):
        pd.DataFrame({"path": [f"r{k}" for k in range(10)], "service_time_us": int(SERVICE_MS * 1000),
                      "mode": "busy", "payload_bytes": 16}).to_csv(res_dir / f"{d}.csv", index=False)

    # ------------------------------------------------------------ main GE requests
    frames = []
    for i, dev in enumerate(devices):
        t = np.cumsum(rng.exponential(200.0, size=int(duration_s * 5 * 1.4)))
        t = t[t < duration_s * 1000]
        frames.append(pd.DataFrame({"device": dev, "device_id": i, "t_ms": t}))
    req = pd.concat(frames, ignore_index=True).sort_values("t_ms", ignore_index=True)
    n = len(req)
    req["path"] = [f"r{k}" for k in rng.integers(0, 10, n)]
    lag_ms = rng.gamma(2.0, 0.02, n) + (rng.exponential(3.0, n) if ge_bottleneck else 0)
    rt = SERVICE_MS + 0.4 + rng.gamma(2.0, 0.9, n)
    t_s = req["t_ms"].to_numpy() / 1000
    if win:
        m = (t_s >= win[0]) & (t_s < win[1])
        rt[m] *= rng.uniform(2.0, 3.5, int(m.sum()))
    outcome = np.where(rng.random(n) < 0.985, "ok", "error").astype(object)
    outcome[rng.random(n) < 0.004] = "timeout"
    outcome[t_s >= end_s] = "unsent"
    req["outcome"] = outcome
    req["sched_ns"] = (req["t_ms"] * 1e6).round()
    req["sent_ns"] = np.where(outcome == "unsent", np.nan, (req["t_ms"] + lag_ms).to_numpy() * 1e6).round()
    answered = (outcome == "ok") | (outcome == "error")
    req["recv_ns"] = np.where(answered, req["sent_ns"] + rt * 1e6, np.nan).round()
    req["code"] = np.select([outcome == "ok", outcome == "error"], ["2.05", "5.03"], "")
    req["rt_ms"] = np.where(outcome == "ok", (req["recv_ns"] - req["sent_ns"]) / 1e6, np.nan)
    _write_ge(run_dir / "ge" / "ge-0", req, START_NS, duration_s, "ge-0", interrupted)

    # ------------------------------------------------------------ CD probes (calibration + test)
    cd_t = np.arange(-CAL_S, int(end_s)) + 0.5
    cd_rt = SERVICE_MS * (1.04 + rng.gamma(2.0, 0.01, len(cd_t)))
    if win:
        m = (cd_t >= win[0]) & (cd_t < win[1])
        cd_rt[m] *= rng.uniform(1.6, 2.2, int(m.sum()))
    if cd:
        c = pd.DataFrame({"device_id": 0, "path": "r0", "outcome": "ok", "code": "2.05",
                          "sched_ns": ((cd_t + CAL_S) * 1e9).round()})
        c["sent_ns"] = c["sched_ns"] + 20_000
        c["recv_ns"] = (c["sent_ns"] + cd_rt * 1e6).round()
        _write_ge(run_dir / "cd-ge", c, START_NS - CAL_S * 1_000_000_000, end_s + CAL_S, "cd-ge", interrupted)

    # ------------------------------------------------------------ monitor (runner's formats)
    secs = np.arange(int(end_s) + 1)
    if monitor:
        mon = run_dir / "monitor"
        (mon / "collectl").mkdir(parents=True, exist_ok=True)
        cpu = {"utc_s": 1_735_732_800 + secs, "mono_ns": START_NS + secs * 1_000_000_000}
        for core, level in ((0, 15.0), (1, 48.0)):
            busy = level + rng.normal(0, 4, len(secs))
            if win:
                busy[(secs >= win[0]) & (secs < win[1])] = 99.0
            cpu[f"[CPU:{core}]Idle%"] = np.round(100 - np.clip(busy, 0, 100), 1)
            cpu[f"[CPU:{core}]Totl%"] = np.round(np.clip(busy, 0, 100), 1)
        pd.DataFrame(cpu).to_csv(mon / "cpu.csv", index=False)
        rows = []
        comps = [("ge-0", "ge", 12.0), ("cd-ge", "cd-ge", 0.4), ("cd-node", "cd-node", 0.5)] + \
                [(d, "device", 6.5) for d in devices]
        for comp, role, level in comps:
            if not cd and role.startswith("cd"):
                continue
            use = np.clip(level + rng.normal(0, 1, len(secs)), 0, None)
            wait = np.full(len(secs), 0.2)
            if win and role in ("device", "cd-node"):
                wait[(secs >= win[0]) & (secs < win[1])] = 25.0
            rows.append(pd.DataFrame({
                "mono_ns": START_NS + secs * 1_000_000_000, "component": comp, "role": role,
                "cpu_ns": (np.cumsum(use) * 1e7).astype(np.int64),
                "runqueue_ns": (np.cumsum(wait) * 1e7).astype(np.int64),
                "nr_periods": "", "nr_throttled": "", "throttled_ns": ""}))
        pd.concat(rows).to_csv(mon / "cgroups.csv", index=False)
        if sut:   # a proxy in a container: monitor/sut.csv as the SUT sampler writes it
            pd.DataFrame({
                "mono_ns": START_NS + secs * 1_000_000_000, "component": "proxy", "role": "proxy",
                "group": "proxy", "source": "cgroup", "cpu_ns": secs * 150_000_000,
                "rss_bytes": 6_000_000 + secs * 1000, "hwm_bytes": 6_000_000 + secs * 1000,
                "mem_usage_bytes": 8_000_000, "mem_max_usage_bytes": 9_000_000, "processes": 1,
            }).to_csv(mon / "sut.csv", index=False)

    if summary:
        analyze(run_dir)   # summary.json and series/ as the real analysis writes them
    return run_dir
