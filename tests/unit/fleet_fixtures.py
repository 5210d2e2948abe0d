"""A synthetic run whose devices are hosted by wot-fleet engines (docs/CONTRACTS.md §3b), with
known read lag, queueing, timer lateness and losses, for the fleet analysis tests and benchmark.

``make_fleet_run(dir, n_devices=..., loops=...)`` writes run.json (``fleets[]``: the engines'
devices are not in ``devices``), one resource file per device as the runner does (alike), the
main GE's requests.csv (with the GE's token salt), and per fleet in ``fleets/<fleet>/`` the
devices file the runner writes and what the engine writes: ``fleet-log-<loop>.csv``,
``fleet-devices.csv`` and ``fleet-summary.json``.
``truth.csv`` holds per-request ground truth (not part of the contract).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis_fixtures import SALT, TEST_START_NS, ge_summary
from wotbench.rundir import RunDir, RunRecord
from wotbench.rundir.fleet_files import DEVICES_HEADER, FleetDeviceRow, FleetLogRow


@dataclass
class FleetSpec:
    n_devices: int = 40
    fleets: int = 1
    loops: int = 2
    duration_s: float = 10.0
    rate_total: float = 400.0        # requests / s over all devices (Poisson)
    service_us: tuple[int, ...] = (1000, 0)   # service per path r0, r1, ...
    mode: str = "sleep"              # the resources' service mode (sleep: a timer; busy: CPU)
    read_lag_us: float = 20.0        # mean exponential loop read lag
    queue_us: float = 30.0           # mean exponential per-device queueing
    timer_late_us: float = 10.0      # mean exponential timer lateness
    late_loop: int | None = None     # this loop (of every fleet) falls behind ...
    late_from_s: float = 0.0         # ... from this instant of the test ...
    late_extra_us: float = 5000.0    # ... by this much read lag
    loss_fraction: float = 0.0       # timeouts; half lost before the device
    seed: int = 3


def _quantiles(v: np.ndarray) -> dict[str, int | None]:
    if not len(v):
        return {"p50": None, "p99": None, "max": None}
    s = np.sort(v)
    rank = lambda q: int(s[min(len(s) - 1, int(np.ceil(q * len(s))) - 1)])   # noqa: E731
    return {"p50": rank(0.5), "p99": rank(0.99), "max": int(s[-1])}


def fleet_of(spec: FleetSpec, device: np.ndarray) -> np.ndarray:
    per = -(-spec.n_devices // spec.fleets)
    return device // per


def loop_of(spec: FleetSpec, device: np.ndarray) -> np.ndarray:
    """The contract's split, inside each fleet: device k of n goes to loop k * loops / n."""
    per = -(-spec.n_devices // spec.fleets)
    f = device // per
    k = device - f * per
    n = np.minimum(per, spec.n_devices - f * per)
    return k * spec.loops // n


def make_fleet_run(root: Path, spec: FleetSpec | None = None, **kw) -> Path:
    spec = spec or FleetSpec(**kw)
    rng = np.random.default_rng(spec.seed)
    root = Path(root)
    rd = RunDir(root)
    n_dev = spec.n_devices
    paths = np.array([f"r{j}" for j in range(len(spec.service_us))])
    rd.resources_dir.mkdir(parents=True, exist_ok=True)
    resource_text = pd.DataFrame({"path": paths, "service_time_us": spec.service_us,
                                  "mode": spec.mode, "payload_bytes": 16}).to_csv(index=False)

    # --- the main GE: a Poisson stream over all devices
    n = int(spec.rate_total * spec.duration_s)
    sched = np.sort(rng.uniform(0, spec.duration_s * 1e9, n)).astype(np.int64)
    dev = rng.integers(0, n_dev, n)
    pidx = rng.integers(0, len(paths), n)
    s_ns = np.asarray(spec.service_us, np.int64)[pidx] * 1000
    sent = sched + np.abs(rng.normal(0, 5e3, n)).astype(np.int64)
    arrival_k = sent + 50_000 + rng.exponential(10e3, n).astype(np.int64)
    loop = loop_of(spec, dev)
    fleet = fleet_of(spec, dev)
    read_lag = rng.exponential(spec.read_lag_us * 1e3, n).astype(np.int64)
    if spec.late_loop is not None:
        read_lag += np.where((loop == spec.late_loop) & (sched >= spec.late_from_s * 1e9),
                             int(spec.late_extra_us * 1e3), 0)
    arrival = arrival_k + read_lag
    start = arrival + rng.exponential(spec.queue_us * 1e3, n).astype(np.int64)
    due = start + s_ns
    end = due + rng.exponential(spec.timer_late_us * 1e3, n).astype(np.int64)
    dev_sent = end + 5_000
    recv = dev_sent + 50_000 + rng.exponential(10e3, n).astype(np.int64)
    lost = rng.random(n) < spec.loss_fraction
    lost_before = lost & (rng.random(n) < 0.5)
    outcome = np.where(lost, "timeout", "ok")
    req = pd.DataFrame({
        "index": np.arange(n), "device": dev, "method": "GET", "path": paths[pidx],
        "scheduled_ns": sched, "sent_ns": sent,
        "received_ns": pd.array(np.where(lost, 0, recv), dtype="Int64"),
        "code": np.where(lost, "", "2.05"), "outcome": outcome, "retransmissions": 0,
        "received_kernel_ns": pd.array(np.where(lost, 0, recv), dtype="Int64")})
    req.loc[lost, ["received_ns", "received_kernel_ns"]] = pd.NA
    ge_dir = rd.ge_dir("ge-0")
    ge_dir.mkdir(parents=True, exist_ok=True)
    req.to_csv(ge_dir / "requests.csv", index=False)
    counts = {o: int((outcome == o).sum()) for o in ("ok", "error", "timeout", "reset", "unsent")}
    (ge_dir / "summary.json").write_text(json.dumps(ge_summary(
        requests=n, outcomes=counts, end_mono_ns=TEST_START_NS + int(spec.duration_s * 1e9),
        duration_s=spec.duration_s, offered_rate=n / spec.duration_s,
        achieved_rate=n / spec.duration_s)))
    reached = ~lost_before
    pd.DataFrame({"index": np.arange(n), "reached": reached, "loop": loop,
                  "read_lag_ns": read_lag, "queueing_ns": start - arrival,
                  "timer_late_ns": end - due}).to_csv(root / "truth.csv", index=False)

    # --- the engines' files
    names = np.array([f"sensor-{i}" for i in range(n_dev)], dtype=object)
    token = np.char.add(f"{SALT >> 32:08x}",
                        np.char.zfill(np.char.mod("%x", (SALT & 0xFFFFFFFF) ^ np.arange(n)), 8))
    dev_fleet = fleet_of(spec, np.arange(n_dev))
    for path in rd.resource_files(list(names)):
        with open(path, "w") as fh:
            fh.write(resource_text)
    fleets = []
    for f in range(spec.fleets):
        fname = f"sensor-fleet{f}"
        members = np.flatnonzero(dev_fleet == f)
        rd.fleet_dir(fname).mkdir(parents=True, exist_ok=True)
        # the runner's devices file (its columns, DEVICES_HEADER; pandas: 10^5 rows in a blink)
        pd.DataFrame({"index": members, "name": names[members],
                      "listen": [f"127.{1 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}:5683"
                                 for i in members],
                      "resources": rd.resource_files(list(names[members])), "slots": 1,
                      "queue": 1024, "response": "auto", "piggyback_max_us": 1000},
                     columns=list(DEVICES_HEADER)).to_csv(rd.fleet_devices_file(fname),
                                                          index=False)
        mine = reached & (fleet == f)
        loops = []
        for lp in range(spec.loops):
            m = np.flatnonzero(mine & (loop == lp))
            m = m[np.argsort(arrival[m], kind="stable")]
            pd.DataFrame({"device": dev[m], "arrival_ns": arrival[m] + TEST_START_NS,
                          "start_ns": start[m] + TEST_START_NS, "end_ns": end[m] + TEST_START_NS,
                          "path": paths[pidx[m]], "method": "GET", "code": "2.05",
                          "token": token[m], "arrival_kernel_ns": arrival_k[m] + TEST_START_NS,
                          "response_sent_ns": dev_sent[m] + TEST_START_NS,
                          "due_ns": due[m] + TEST_START_NS},
                         columns=list(FleetLogRow.model_fields)
                         ).to_csv(rd.fleet_log(fname, lp), index=False)
            slept = (s_ns[m] > 0) & (spec.mode == "sleep")
            loops.append({"loop": lp, "devices": int(np.count_nonzero(
                loop_of(spec, members) == lp)), "requests": int(len(m)),
                "read_lag_ns": _quantiles(read_lag[m]),
                "timer_late_ns": _quantiles((end - due)[m][slept]),
                "busy_ns": int(len(m) * 4000), "wakeups": int(len(m)), "pool_503": 0,
                "duplicates": 0, "rtx_sent": 0, "rtx_gave_up": 0, "rst_in": 0, "send_errors": 0,
                "log_entries": int(len(m)), "log_dropped": 0, "pending_at_exit": 0,
                "unacked_at_exit": 0, "cpu_ns": int(len(m) * 3000), "spins": 0})
        per_dev = np.bincount(dev[mine], minlength=n_dev)[members]
        pd.DataFrame({"device": members, "name": names[members], "requests": per_dev,
                      "responses": per_dev, "overload_503": 0, "not_found": 0, "malformed": 0,
                      "piggybacked": per_dev, "log_dropped": 0},
                     columns=list(FleetDeviceRow.model_fields)
                     ).to_csv(rd.fleet_device_table(fname), index=False)
        total = int(mine.sum())
        rd.fleet_summary(fname).write_text(json.dumps({
            "name": fname, "devices": int(len(members)), "loops": spec.loops,
            "workers": spec.loops, "requests": total, "responses": total, "overload_503": 0,
            "not_found": 0, "malformed": 0, "log_entries": total, "log_dropped": 0,
            "loop": loops, "rss_bytes": 4096 * len(members)}))
        fleets.append({"name": fname, "group": "sensor", "first_id": int(members[0]),
                       "devices": int(len(members)), "address": "127.1.0.1", "first_port": 5683,
                       "last_port": 5683, "cpuset": "0,1", "loops": spec.loops,
                       "workers": spec.loops, "log_capacity": 1_000_000, "nofile": 200_000,
                       "memory_bytes": 1 << 30, "dir": f"fleets/{fname}"})

    run = {"name": "fleet-synthetic", "run_id": f"fleet-synthetic-{spec.seed}",
           "backend": "process", "host": {},
           "test": {"start_mono_ns": TEST_START_NS, "duration_s": spec.duration_s},
           "devices": [], "fleets": fleets, "ges": [{"id": "ge-0", "dir": "ge/ge-0", "cpu": 0}],
           "failures": [], "interrupted": False}
    rd.write_run(RunRecord.model_validate(run))
    return root


def truth(root: Path) -> pd.DataFrame:
    return pd.read_csv(Path(root) / "truth.csv")
