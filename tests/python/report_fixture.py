"""Builds a small, realistic recorded run directory for the report tests.

The shapes follow docs/CONTRACTS.md (run.json §4, plan.json §6, summary.json §7) and the
analysis output documented in wotbench/analysis/README.md. Everything is generated from a
fixed seed, so the files are the same on every call.

    make_run(tmp_path)                          # clean run, verdict "trustworthy"
    make_run(tmp_path, contention=True)         # two contention windows, verdict "contention"
    make_run(tmp_path, monitor=False, cd=False, interrupted=True)   # optional parts missing
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

START_NS = 1_000_000_000_000
CONTENTION_WINDOWS = [(8.0, 12.0), (21.0, 23.0)]


def _pct(a, q):
    return float(np.percentile(a, q)) if len(a) else None


def _stats(a):
    a = np.asarray(a, dtype=float)
    if not len(a):
        return {"n": 0}
    return {"n": int(len(a)), "mean": float(a.mean()), "p5": _pct(a, 5), "p50": _pct(a, 50),
            "p90": _pct(a, 90), "p95": _pct(a, 95), "p99": _pct(a, 99), "max": float(a.max())}


def make_run(root: Path, *, name: str = "20dev", n_devices: int = 6, duration_s: int = 30,
             contention: bool = False, ge_bottleneck: bool = False, monitor: bool = True,
             cd: bool = True, interrupted: bool = False, faithful: bool = True,
             network: dict | None = None, summary: bool = True) -> Path:
    rng = np.random.default_rng(7)
    run_dir = Path(root) / f"{name}-20250101T120000Z"
    (run_dir / "series").mkdir(parents=True, exist_ok=True)
    devices = [f"cpu-{i}" for i in range(n_devices)]
    windows = CONTENTION_WINDOWS if contention else []
    end_s = duration_s * (0.6 if interrupted else 1.0)

    # ---------------------------------------------------------------- run.json / plan.json
    run = {
        "name": name, "run_id": f"{name}-20250101T120000Z", "backend": "docker",
        "host": {"hostname": "bench-01", "cores": 2, "kernel": "6.1.0-18-amd64",
                 "docker_version": "24.0.7", "python": "3.11.2", "cpu_model": "Intel Xeon E5-2680 v4"},
        "calibration": {"start_mono_ns": START_NS - 10_000_000_000, "end_mono_ns": START_NS - 100_000_000},
        "test": {"start_mono_ns": START_NS, "duration_s": duration_s},
        "devices": [{"name": d, "id": i, "address": f"172.28.0.{10 + i}", "port": 5683, "group": "cpu",
                     "resources": f"trace/resources/{d}.csv", "cpuset": "1"} for i, d in enumerate(devices)],
        "ges": [{"id": "ge-0", "dir": "ge/ge-0", "cpu": 1}],
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
                           "service_time": {"dist": "exponential", "mean": 5},
                           "rit": {"dist": "exponential", "mean": 200}, "resources": 10}],
              "gateways": {"count": 1, "wait": "hybrid", "message_type": "con", "timeout_ms": 10000},
              "contention_detector": {"enabled": cd, "interval_s": 1.0, "calibration_s": 10},
              "placement": {"cpus": "all", "reserved_os_cores": 1, "affinity": plan["affinity"]},
              "monitor": {"enabled": monitor, "interval_s": 1}}
    (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    # ---------------------------------------------------------------- requests (synthetic)
    rit_mean = 200.0
    rows = []
    for dev in devices:
        t = np.cumsum(rng.exponential(rit_mean, size=int(duration_s * 1000 / rit_mean * 1.3)))
        t = t[t < end_s * 1000]
        rows.append(pd.DataFrame({"device": dev, "t_ms": t}))
    req = pd.concat(rows, ignore_index=True).sort_values("t_ms", ignore_index=True)
    n = len(req)
    lag = rng.gamma(2.0, 0.02, n)  # ms
    if ge_bottleneck:
        lag += rng.exponential(4.0, n)
    req["sent_ms"] = req["t_ms"] + lag
    rt = 5.5 + rng.gamma(2.0, 1.6, n)
    t_s = req["t_ms"] / 1000
    for a, b in windows:
        m = (t_s >= a) & (t_s < b)
        rt[m.to_numpy()] *= rng.uniform(2.5, 4.0, int(m.sum()))
    outcome = np.where(rng.random(n) < 0.985, "ok", "error")
    outcome[rng.random(n) < 0.004] = "timeout"
    req["rt_ms"] = np.where(outcome == "timeout", np.nan, rt)
    req["outcome"] = outcome

    # ---------------------------------------------------------------- series
    req["sec"] = np.floor(t_s).astype(int)
    g = req.groupby("sec")
    per_s = pd.DataFrame({
        "t_s": g.size().index.astype(float),
        "sent": g.size().to_numpy(),
        "ok": g["outcome"].apply(lambda s: int((s == "ok").sum())).to_numpy(),
        "p50_ms": g["rt_ms"].quantile(0.50).to_numpy(),
        "p95_ms": g["rt_ms"].quantile(0.95).to_numpy(),
        "p99_ms": g["rt_ms"].quantile(0.99).to_numpy(),
    })
    per_s.round(3).to_csv(run_dir / "series" / "response_times.csv", index=False)

    ok_rt = np.sort(req.loc[req.outcome == "ok", "rt_ms"].to_numpy())
    pd.DataFrame({"response_ms": ok_rt, "cdf": np.arange(1, len(ok_rt) + 1) / len(ok_rt)}).round(4).to_csv(
        run_dir / "series" / "response_cdf.csv", index=False)

    exp_rit = np.concatenate([np.diff(req.loc[req.device == d, "t_ms"].to_numpy()) for d in devices])
    sub_rit = np.concatenate([np.diff(req.loc[req.device == d, "sent_ms"].to_numpy()) for d in devices])
    pd.concat([pd.DataFrame({"kind": "expected", "rit_ms": exp_rit}),
               pd.DataFrame({"kind": "submitted", "rit_ms": sub_rit})]).round(4).to_csv(
        run_dir / "series" / "rit.csv", index=False)

    secs = np.arange(int(end_s))
    if cd:
        base = 5.2
        cd_rd = base + rng.gamma(2.0, 0.08, len(secs))
        dev_rd = 5.0 + rng.gamma(2.0, 0.2, len(secs))
        for a, b in windows:
            m = (secs >= a) & (secs < b)
            cd_rd[m] *= rng.uniform(1.8, 2.6, int(m.sum()))
            dev_rd[m] *= rng.uniform(1.8, 2.6, int(m.sum()))
        pd.DataFrame({"t_s": secs.astype(float), "devices_rd_ms": dev_rd, "cd_rd_ms": cd_rd}).round(3).to_csv(
            run_dir / "series" / "rd.csv", index=False)

    if monitor:
        cores = []
        for c in (0, 1):
            busy = (18 if c == 0 else 55) + rng.normal(0, 4, len(secs))
            for a, b in windows:
                busy[(secs >= a) & (secs < b)] = 99.0
            cores.append(pd.DataFrame({"t_s": secs.astype(float), "core": c, "busy_pct": np.clip(busy, 0, 100)}))
        pd.concat(cores).round(2).to_csv(run_dir / "series" / "cpu_cores.csv", index=False)
        (run_dir / "monitor" / "collectl").mkdir(parents=True, exist_ok=True)
        crow = []
        for comp in ["ge-0", "cd-ge", "cd-node"] + devices:
            level = {"ge-0": 12.0, "cd-ge": 0.5, "cd-node": 0.6}.get(comp, 6.0)
            cum = np.cumsum(np.clip(level + rng.normal(0, 1, len(secs)), 0, None) * 10_000)  # usec
            crow.append(pd.DataFrame({"mono_ns": START_NS + secs * 1_000_000_000, "container": comp,
                                      "cpu_usage_usec": cum.astype(int),
                                      "memory_bytes": int(8e6) + rng.integers(0, 1_000_000, len(secs))}))
        pd.concat(crow).to_csv(run_dir / "monitor" / "cgroups.csv", index=False)

    # ---------------------------------------------------------------- summary.json
    if not summary:
        return run_dir
    counts = {k: int((req.outcome == k).sum()) for k in ("ok", "error", "timeout", "reset")}
    counts["unsent"] = 0
    per_device = []
    for d in devices:
        r = req[req.device == d]
        per_device.append({
            "device": d, "group": "cpu", "requests": int(len(r)),
            "outcomes": {k: int((r.outcome == k).sum()) for k in counts},
            "response_ms": _stats(r.loc[r.outcome == "ok", "rt_ms"].to_numpy()),
        })
    e, s = _stats(exp_rit), _stats(sub_rit)
    late = lag > 1.0
    ks = float(np.max(np.abs(np.searchsorted(np.sort(exp_rit), np.sort(np.r_[exp_rit, sub_rit]), "right") / len(exp_rit)
                             - np.searchsorted(np.sort(sub_rit), np.sort(np.r_[exp_rit, sub_rit]), "right") / len(sub_rit))))
    ge_ok = not ge_bottleneck
    win = [{"start_s": a, "end_s": b, "duration_s": b - a, "peak_rd_ms": 13.1, "peak_ratio": 2.5}
           for a, b in windows]
    contended = sum(w["duration_s"] for w in win)
    if ge_bottleneck:
        verdict = {"status": "ge_bottleneck", "exit_code": 3,
                   "reasons": [f"{late.mean():.0%} of requests were sent more than 1 ms late (limit 1%)"]}
    elif windows:
        verdict = {"status": "contention", "exit_code": 3,
                   "reasons": [f"CD node R_d exceeded the threshold in {len(win)} windows ({contended:.0f} s, "
                               f"{contended / duration_s:.0%} of the test)"]}
    else:
        verdict = {"status": "trustworthy", "exit_code": 0, "reasons": []}
    summ = {
        "run": {"name": name, "run_id": run["run_id"], "backend": "docker", "duration_s": float(end_s),
                "devices": n_devices, "ges": 1, "interrupted": interrupted},
        "overall": {"requests": n, "outcomes": counts,
                    "codes": {"2.05": counts["ok"], "5.03": counts["error"]},
                    "offered_rate": n / end_s, "achieved_rate": counts["ok"] / end_s,
                    "response_ms": _stats(ok_rt)},
        "per_device": per_device,
        "ge_integrity": {"expected_rit_ms": e, "submitted_rit_ms": s, "ks": ks, "late_share": float(late.mean()),
                         "late_threshold_ms": 1.0, "send_lag_us": {"p50": float(np.median(lag) * 1000),
                                                                   "p99": float(np.percentile(lag, 99) * 1000),
                                                                   "max": float(lag.max() * 1000)},
                         "ok": ge_ok},
        "rd": ({"baseline_ms": 5.36, "threshold_ms": 6.9, "cd_ms": _stats(cd_rd), "devices_ms": _stats(dev_rd)}
               if cd else None),
        "contention": ({"detected": bool(win), "windows": win, "contended_s": contended,
                        "contended_share": contended / duration_s} if cd else None),
        "verdict": verdict,
    }
    (run_dir / "summary.json").write_text(json.dumps(summ, indent=2))
    return run_dir
