"""Builds a small, realistic recorded run directory for the report tests.

It writes what the runner writes (docs/CONTRACTS.md §4: run.json, plan.json,
config.resolved.yaml, trace/resources, ge/ge-0 and cd-ge request logs, monitor/cgroups.csv and
monitor/cpu.csv) and what the analysis writes (summary.json and series/*.csv, in the shapes of
wotbench/analysis/summary.py), so the report tests do not depend on the analysis code. The raw
files are complete enough for ``wotbench.analysis.analyze`` to run on them as well.

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

START_NS = 1_000_000_000_000
CAL_S = 10
CONTENTION_WINDOW = (10.0, 20.0)
SERVICE_MS = 5.0
OUTCOMES = ("ok", "error", "timeout", "reset", "unsent")


def _stats(a, unit="_ms", qs=("p50", "p90", "p95", "p99", "p999")):
    a = np.asarray(a, dtype=float)
    a = a[~np.isnan(a)]
    if not len(a):
        return {"count": 0, f"mean{unit}": None, **{f"{q}{unit}": None for q in qs}, f"max{unit}": None}
    out = {"count": int(len(a)), f"mean{unit}": float(a.mean())}
    out.update({f"{q}{unit}": float(np.quantile(a, float("0." + q[1:]) if q != "p999" else 0.999)) for q in qs})
    out[f"max{unit}"] = float(a.max())
    return out


def _outcome_block(oc: pd.Series, duration_s: float) -> dict:
    counts = {o: int((oc == o).sum()) for o in OUTCOMES}
    n = int(len(oc))
    sent = n - counts["unsent"]
    return {"requests": n, "sent": sent, "outcomes": counts,
            "rates": {o: counts[o] / n if n else None for o in OUTCOMES},
            "loss_rate_of_sent": counts["timeout"] / sent if sent else None,
            "offered_rps": n / duration_s, "throughput_rps": counts["ok"] / duration_s}


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
             network: dict | None = None, summary: bool = True) -> Path:
    rng = np.random.default_rng(7)
    run_dir = Path(root) / f"{name}-20250101T120000Z"
    run_dir.mkdir(parents=True, exist_ok=True)
    devices = [f"cpu-{i}" for i in range(n_devices)]
    win = CONTENTION_WINDOW if contention else None
    end_s = duration_s * (0.6 if interrupted else 1.0)

    # ------------------------------------------------------------ run.json, plan, config
    run = {
        "name": name, "run_id": f"{name}-20250101T120000Z", "backend": "docker",
        "host": {"hostname": "bench-01", "cores": 2, "kernel": "6.1.0-18-amd64", "docker_version": "24.0.7",
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
        run["cd_ge"] = {"dir": "cd-ge"}
    if network is not None:
        run["network"] = network
    (run_dir / "run.json").write_text(json.dumps(run, indent=2))
    plan = {"cores_total": 2, "usable_cores": [0, 1], "os_cores": [0], "ge_cores": {"ge-0": 0 if faithful else 1},
            "cd_ge_core": 0 if faithful else 1, "device_cores": [1], "cd_node_cpuset": "1",
            "devices": {d: "1" for d in devices}, "ge_wait": "hybrid",
            "affinity": "pinned" if faithful else "shared", "faithful": faithful,
            "warnings": [] if faithful else [
                "only 2 cores: the GE shares core 1 with the devices; GE integrity may suffer",
                "affinity 'shared': containers may migrate between cores"]}
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))
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

    if not summary:
        return run_dir
    _write_analysis(run_dir, run, req, devices, duration_s, end_s, lag_ms, cd, cd_t, cd_rt, win,
                    ge_bottleneck, interrupted)
    return run_dir


def _write_analysis(run_dir, run, req, devices, duration_s, end_s, lag_ms, cd, cd_t, cd_rt, win,
                    ge_bottleneck, interrupted):
    """summary.json + series/*.csv in the shapes of wotbench/analysis/summary.py."""
    series = run_dir / "series"
    series.mkdir(exist_ok=True)
    sec = np.floor(req["t_ms"] / 1000).astype(int)
    # response_times.csv: second, device, count, p50_ms, p95_ms, p99_ms (+ 'all' rows)
    rows = []
    for dev, g in [("all", req)] + [(d, req[req.device == d]) for d in devices]:
        for s, gg in g.groupby(sec.loc[g.index]):
            v = gg["rt_ms"].dropna()
            if len(v):
                rows.append({"second": s, "device": dev, "count": len(v), "p50_ms": v.quantile(.5),
                             "p95_ms": v.quantile(.95), "p99_ms": v.quantile(.99)})
    pd.DataFrame(rows).to_csv(series / "response_times.csv", index=False, float_format="%.6g")
    ot = pd.crosstab(sec, req["outcome"]).reindex(columns=list(OUTCOMES), fill_value=0)
    ot.index.name = "second"
    ot.reset_index().to_csv(series / "outcomes_over_time.csv", index=False)
    # rit_cdf.csv: ge, cdf, expected_rit_ms, submitted_rit_ms (quantiles on a probability grid)
    sent = req[req.outcome != "unsent"].sort_values(["device_id", "sched_ns"])
    same = sent["device_id"].to_numpy()[1:] == sent["device_id"].to_numpy()[:-1]
    exp = np.diff(sent["sched_ns"].to_numpy())[same] / 1e6
    sub = np.diff(sent["sent_ns"].to_numpy())[same] / 1e6
    p = np.linspace(0, 1, 201)
    pd.DataFrame({"ge": "ge-0", "cdf": p, "expected_rit_ms": np.quantile(exp, p),
                  "submitted_rit_ms": np.quantile(sub, p)}).to_csv(series / "rit_cdf.csv", index=False,
                                                                   float_format="%.6g")
    lag = lag_ms[(req.outcome != "unsent").to_numpy()]
    ks = float(np.max(np.abs(np.searchsorted(np.sort(exp), np.r_[exp, sub], "right") / len(exp)
                             - np.searchsorted(np.sort(sub), np.r_[exp, sub], "right") / len(sub))))
    late = float((lag > 1.0).mean())
    problems = [f"{late:.2%} of sends later than 1 ms (limit 1.00%)",
                f"p99 send lag {np.quantile(lag, .99):.3f} ms > 1 ms"] if ge_bottleneck else []

    def rit(x):
        return {"count": len(x), "mean_ms": float(x.mean()), "p5_ms": float(np.quantile(x, .05)),
                "p50_ms": float(np.quantile(x, .5))}

    ge_block = {"sent": int(len(lag)), "expected_rit": rit(exp), "submitted_rit": rit(sub), "ks": ks,
                "ks_tol": 0.2 if ge_bottleneck else 0.0,
                "lag_ms": {"mean": float(lag.mean()), **{k: float(np.quantile(lag, q)) for k, q in
                           (("p50", .5), ("p90", .9), ("p99", .99), ("p999", .999))},
                           "max": float(lag.max()), "min": float(lag.min())},
                "late_share": late, "early_share": 0.0, "kept_up": not ge_bottleneck, "problems": problems,
                "requests": len(req), "interrupted": interrupted, "wait": "hybrid",
                "devices_not_kept_up": [], "per_device": {}}
    per_device = {}
    for d in devices:
        r = req[req.device == d]
        b = _outcome_block(r["outcome"], duration_s)
        b["ge"] = "ge-0"
        b["response_time_ms"] = {"from_sent": _stats(r["rt_ms"]), "from_scheduled": _stats(r["rt_ms"] + 0.05)}
        per_device[d] = b
    overall = _outcome_block(req["outcome"], duration_s)
    overall.update({"devices": len(devices), "duration_s": float(duration_s),
                    "response_time_ms": {"from_sent": _stats(req["rt_ms"]),
                                         "from_scheduled": _stats(req["rt_ms"] + 0.05)}})
    rd_dev = req["rt_ms"] / SERVICE_MS - 1
    rd_block = {"definition": "R_d = (R - S) / S, R = received - sent, S = service_time_us of the path",
                "requests_with_s": int(rd_dev.notna().sum()),
                "overall": {"rd": _stats(rd_dev, "", ("p50", "p95", "p99"))},
                "per_device": {d: {"rd": _stats(rd_dev[req.device == d], "", ("p50", "p95", "p99"))}
                               for d in devices}, "cd": None}
    rd_rows = []
    for w0 in range(0, int(np.ceil(end_s)), 10):
        m = (req["t_ms"] >= w0 * 1000) & (req["t_ms"] < (w0 + 10) * 1000) & rd_dev.notna()
        if m.any():
            rd_rows.append({"window_start_s": w0, "window_end_s": w0 + 10, "device": "all", "count": int(m.sum()),
                            "p50_rd": rd_dev[m].median(), "p95_rd": rd_dev[m].quantile(.95),
                            "mean_rd": rd_dev[m].mean()})
    contention = {"status": "not_checked", "reason": "no contention-detector samples", "baseline": None,
                  "windows_tested": 0, "windows_flagged": 0, "onset_s": None, "max_shift": None,
                  "median_shift": None, "max_ratio": None, "flagged_windows": []}
    if cd:
        cd_rd = cd_rt / SERVICE_MS - 1
        phase = np.where(cd_t < 0, "calibration", "test")
        pd.DataFrame({"t_s": cd_t, "phase": phase, "outcome": "ok", "rt_ms": cd_rt, "rd": cd_rd}).to_csv(
            series / "cd_samples.csv", index=False, float_format="%.6g")
        base = cd_rd[phase == "calibration"]
        b_med, b_mad = float(np.median(base)), float(np.median(np.abs(base - np.median(base))))
        thr = max(4 * 1.4826 * b_mad, 0.10)
        rd_block["cd"] = {"calibration": _stats(base, "", ("p50", "p95", "p99")),
                          "test": _stats(cd_rd[phase == "test"], "", ("p50", "p95", "p99")), "device": "cd-node"}
        wins = []
        for w0 in range(0, int(np.ceil(end_s)), 10):
            v = cd_rd[(cd_t >= w0) & (cd_t < w0 + 10)]
            med = float(np.median(v))
            wins.append({"window": len(wins), "start_s": float(w0), "end_s": float(w0 + 10), "samples": len(v),
                         "lost": 0, "median_rd": med, "shift": med - b_med, "ratio": (1 + med) / (1 + b_med),
                         "p_value": 1e-5 if med - b_med > thr else 0.4, "tested": True,
                         "flagged": bool(med - b_med > thr)})
            rd_rows.append({"window_start_s": w0, "window_end_s": w0 + 10, "device": "cd-node",
                            "count": len(v), "p50_rd": med, "p95_rd": float(np.quantile(v, .95)),
                            "mean_rd": float(v.mean())})
        pd.DataFrame(wins).to_csv(series / "contention_windows.csv", index=False, float_format="%.6g")
        fl = [w for w in wins if w["flagged"]]
        contention = {"status": "detected" if fl else "none", "baseline": {
            "samples": int(len(base)), "lost": 0, "median_rd": b_med, "mad_rd": b_mad, "threshold_shift": thr},
            "windows_tested": len(wins), "windows_flagged": len(fl),
            "onset_s": fl[0]["start_s"] if fl else None, "max_shift": max((w["shift"] for w in fl), default=None),
            "median_shift": None, "max_ratio": max((w["ratio"] for w in fl), default=None),
            "flagged_windows": [{k: w[k] for k in ("start_s", "end_s", "shift", "ratio", "p_value")} for w in fl]}
        contention["reason"] = (f"{len(fl)} of {len(wins)} windows: CD R_d median rose by up to "
                                f"{contention['max_shift']:.3g} (×{contention['max_ratio']:.3g} response time) "
                                f"from {contention['onset_s']:g} s" if fl else
                                f"no window of {len(wins)} departs from the calibration baseline")
    pd.DataFrame(rd_rows).to_csv(series / "rd_over_time.csv", index=False, float_format="%.6g")

    reasons = [f"ge-0 did not keep up with the trace: {'; '.join(problems)}"] if ge_bottleneck else []
    if contention["status"] == "detected":
        reasons.insert(0, "contention: " + contention["reason"])
    status = "contention" if contention["status"] == "detected" else "ge_bottleneck" if ge_bottleneck else "trustworthy"
    if interrupted:
        status = "invalid"
        reasons = ["component cpu-3 failed: container exited with 137"] + reasons + [
            f"run interrupted: {overall['outcomes']['unsent']} requests unsent; statistics cover the part that ran"]
    if not reasons:
        reasons = ["GEs kept up with the trace and the CD node saw no contention"]
    summ = {
        "run": {"name": run["name"], "run_id": run["run_id"], "run_dir": str(run_dir), "backend": "docker",
                "test_start_mono_ns": START_NS, "duration_s": float(duration_s), "interrupted": interrupted,
                "failures": run["failures"], "ges": ["ge-0"], "devices": devices,
                "cd_device": "cd-node" if cd else None, "analysis_version": 1, "warnings": []},
        "overall": overall, "per_device": per_device,
        "ge_integrity": {"rule": {"late_threshold_ms": 1.0, "max_late_share": 0.01, "max_ks": 0.05},
                         "kept_up": not ge_bottleneck, "interrupted": interrupted,
                         "per_ge": {"ge-0": ge_block}, "cd_ge": None},
        "rd": rd_block, "contention": contention,
        "verdict": {"status": status, "reasons": reasons, "exit_code": 0 if status == "trustworthy" else 3,
                    "checks": {"data": "invalid" if interrupted else "ok",
                               "ge": "bottleneck" if ge_bottleneck else "kept_up",
                               "contention": contention["status"]}},
    }
    (run_dir / "summary.json").write_text(json.dumps(summ, indent=2))
