"""Synthetic run directories and CD series with known properties, for the analysis tests.

``make_run(dir, ...)`` writes a complete run directory (docs/CONTRACTS.md §4): run.json, resource
files, one GE log, a CD GE log and device logs, with known send lag, service times, queueing and
network delays, losses, interruption, CD calibration and an optional CD shift.
``cd_series(...)`` returns CD samples (t_s, phase, rd, outcome) for contention.assess directly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from wotbench.rundir import RunDir, RunRecord

TEST_START_NS = 7_000_000_000_000  # an absolute CLOCK_MONOTONIC instant (~1.9 h of uptime)
SALT = 0x5A17C0FFEE123456           # the GE's token salt (summary.json token_salt)


def ge_summary(**kw) -> dict:
    """A GE summary.json as the gateway emulator writes it (every key of
    wotbench.rundir.ge_files.GeSummary; ``kw`` sets or, with None, removes keys)."""
    d = {"label": "ge-0", "trace": "trace/trace.csv", "requests": 0,
         "outcomes": {"ok": 0, "error": 0, "timeout": 0, "reset": 0, "unsent": 0},
         "start_mono_ns": TEST_START_NS, "end_mono_ns": TEST_START_NS, "duration_s": 0.0,
         "offered_rate": 0.0, "achieved_rate": 0.0,
         "send_lag_us": {"p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0},
         "warmup": None, "token_salt": f"{SALT:016x}", "rx_stamps": "kernel",
         "clock_map_bracket_ns": 40, "memory_locked": True, "wait": "hybrid", "type": "con",
         "timeout_ms": 10000, "retransmit": False, "ports_per_device": 1, "interrupted": False}
    d.update(kw)
    return {k: v for k, v in d.items() if v is not None or k == "warmup"}


def sink_summary(subscribers: list[tuple[str, str]], start_mono_ns: int = 0,
                 end_mono_ns: int = 10 ** 10, **kw) -> dict:
    """A notification sink's sink.json as notify-sink writes it (wotbench.rundir.sink_files):
    ``subscribers`` (name, kind), their counters zero."""
    subs = [{"name": n, "kind": k, "target": f"http://127.0.0.1:8080/{n}", "ready": True,
             "status": 200, "connections": 1, "bytes": 0, "messages": 0, "ids": 0, "errors": 0}
            for n, k in subscribers]
    return {"marker": "urn:wot:upd:", "start_mono_ns": start_mono_ns, "end_mono_ns": end_mono_ns,
            "notifications": 0, "over_capacity": 0, "capacity": 1000, "subscribers": subs, **kw}


def device_summary(name: str, requests: int, **kw) -> dict:
    """A device-summary.json as wot-device writes it (wotbench.rundir.device_files)."""
    return {"name": name, "requests": requests, "responses": requests, "overload_503": 0,
            "not_found": 0, "malformed": 0, "log_entries": requests, "log_dropped": 0,
            "threads": 1, "response": "auto", "piggybacked": 0, "impair": None, "observe": None,
            "blockwise": {"block2_follow_ups": 0, "block1_continues": 0}, "dtls": None, **kw}


def cd_rd(rng: np.random.Generator, n: int, t_s: np.ndarray, service_ms: float = 5.0,
          steal_prob: float = 0.1, shift: float | None = None, shift_start_s: float = 0.0,
          shift_kind: str = "uniform") -> np.ndarray:
    """R_d of CD probes: network+stack ~0.15 ms + jitter, service jitter ~1 %, host steal
    spikes (+1..2 ms with ``steal_prob``), and from ``shift_start_s`` an R_d shift of median
    ``shift`` ("uniform": U(0, 2·shift) like time slicing with another busy process,
    "constant": + shift)."""
    net = 0.15 + rng.lognormal(np.log(0.03), 0.5, n)
    svc = service_ms * (1 + np.abs(rng.normal(0, 0.01, n)))
    steal = np.where(rng.random(n) < steal_prob, rng.uniform(1.0, 2.0, n), 0.0)
    r = net + svc + steal
    if shift:
        on = t_s >= shift_start_s
        extra = rng.uniform(0, 2 * shift, n) if shift_kind == "uniform" else np.full(n, shift)
        r = r + np.where(on, extra * service_ms, 0.0)
    return (r - service_ms) / service_ms


def cd_series(seed: int, cal_s: float = 10, duration_s: float = 60, interval_s: float = 1.0,
              **kw) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(-cal_s, duration_s, interval_s) + rng.uniform(0, 0.01)
    rd = cd_rd(rng, len(t), t, **kw)
    return pd.DataFrame({"t_s": t, "phase": np.where(t < 0, "calibration", "test"),
                         "rd": rd, "outcome": "ok"})


@dataclass
class RunSpec:
    n_devices: int = 3
    duration_s: float = 20.0
    rate_per_device: float = 50.0          # requests / s (exponential RIT)
    deterministic_rit: bool = False
    service_us: list[int] = field(default_factory=lambda: [2000, 5000, 0])  # per path r0, r1..
    jitter_us: float = 5.0                 # |N(0, jitter)| send lag
    late_fraction: float = 0.0
    late_ms: float = 3.0
    net_us: float = 50.0                   # one-way network+stack floor
    queue_us: float = 100.0                # mean exponential queueing
    loss_fraction: float = 0.0             # timeouts; half lost before the device
    interrupted_at_s: float | None = None
    missing_logs: tuple[str, ...] = ()
    failures: list[dict] = field(default_factory=list)
    cd: bool = True
    cal_s: float = 10.0
    cd_interval_s: float = 1.0
    cd_service_us: int = 5000
    cd_shift: float | None = None
    cd_shift_start_s: float = 0.0
    tokens: bool = False                   # the GE's token salt and the device logs' tokens
    seed: int = 1


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)


def make_run(root: Path, spec: RunSpec | None = None, **kw) -> Path:
    spec = spec or RunSpec(**kw)
    rng = np.random.default_rng(spec.seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    names = [f"cpu-{i}" for i in range(spec.n_devices)]
    paths = [f"r{j}" for j in range(len(spec.service_us))]
    for name in names:
        _write_csv(pd.DataFrame({"path": paths, "service_time_us": spec.service_us,
                                 "mode": "busy", "payload_bytes": 16}),
                   root / "trace" / "resources" / f"{name}.csv")

    # --- main GE: per-device schedules merged in trace order
    per = []
    n_est = int(spec.rate_per_device * spec.duration_s * 1.3) + 10
    for d in range(spec.n_devices):
        if spec.deterministic_rit:
            rit = np.full(n_est, 1e6 / spec.rate_per_device)
        else:
            rit = rng.exponential(1e6 / spec.rate_per_device, n_est)
        t_us = np.floor(np.cumsum(rit)).astype(np.int64)
        t_us = t_us[t_us < spec.duration_s * 1e6]
        per.append(pd.DataFrame({"device": d, "t_us": t_us}))
    tr = pd.concat(per, ignore_index=True).sort_values(["t_us", "device"], kind="stable")
    n = len(tr)
    dev = tr["device"].to_numpy()
    sched = tr["t_us"].to_numpy() * 1000
    pidx = rng.integers(0, len(paths), n)
    s_ns = np.asarray(spec.service_us, dtype=np.int64)[pidx] * 1000
    lag = np.abs(rng.normal(0, spec.jitter_us * 1e3, n)).astype(np.int64)
    late = rng.random(n) < spec.late_fraction
    lag = lag + np.where(late, int(spec.late_ms * 1e6), 0)
    sent = sched + lag
    arrival = sent + int(spec.net_us * 1e3) + rng.exponential(20e3, n).astype(np.int64)
    # the path GE -> device is FIFO (one socket path, one receive thread): no overtaking
    arrival = pd.Series(arrival).groupby(dev).cummax().to_numpy()
    start = arrival + rng.exponential(spec.queue_us * 1e3, n).astype(np.int64)
    end = start + s_ns
    recv = end + int(spec.net_us * 1e3) + rng.exponential(20e3, n).astype(np.int64)
    outcome = np.full(n, "ok", dtype=object)
    lost = rng.random(n) < spec.loss_fraction
    lost_before = lost & (rng.random(n) < 0.5)
    outcome[lost] = "timeout"
    unsent = np.zeros(n, bool)
    if spec.interrupted_at_s is not None:
        unsent = sched >= spec.interrupted_at_s * 1e9
        outcome[unsent] = "unsent"
    has_sent = ~unsent
    has_recv = ~unsent & ~lost
    req = pd.DataFrame({
        "index": np.arange(n), "device": dev, "method": "GET",
        "path": np.asarray(paths)[pidx],
        "scheduled_ns": sched,
        "sent_ns": pd.array(np.where(has_sent, sent, 0), dtype="Int64"),
        "received_ns": pd.array(np.where(has_recv, recv, 0), dtype="Int64"),
        "code": np.where(has_recv, "2.05", ""),
        "outcome": outcome, "retransmissions": 0,
    })
    req.loc[~has_sent, "sent_ns"] = pd.NA
    req.loc[~has_recv, "received_ns"] = pd.NA
    ge_dir = root / "ge" / "ge-0"
    _write_csv(req, ge_dir / "requests.csv")
    counts = {o: int((outcome == o).sum()) for o in ("ok", "error", "timeout", "reset", "unsent")}
    (ge_dir / "summary.json").write_text(json.dumps(ge_summary(
        label="ge-0", trace="trace/trace.csv", requests=n, outcomes=counts,
        start_mono_ns=TEST_START_NS, end_mono_ns=TEST_START_NS + int(spec.duration_s * 1e9),
        duration_s=spec.duration_s, offered_rate=n / spec.duration_s,
        achieved_rate=n / spec.duration_s, interrupted=spec.interrupted_at_s is not None,
        # without tokens: a GE older than the salt, which writes none of the later keys
        **({} if spec.tokens else {"token_salt": None, "rx_stamps": None,
                                   "clock_map_bracket_ns": None, "memory_locked": None}))))

    # --- device logs (absolute ns), rows that reached the device, in arrival order
    reached = has_sent & ~lost_before
    # ground truth for the join tests (not part of the contract; the analysis ignores it)
    pd.DataFrame({"index": np.arange(n), "reached": reached,
                  "arrival_ns": arrival + TEST_START_NS,
                  "service_ms": s_ns / 1e6, "queueing_ms": (start - arrival) / 1e6,
                  "network_ms": (recv - sent - (end - arrival)) / 1e6}
                 ).to_csv(root / "truth.csv", index=False)
    for d, name in enumerate(names):
        if name in spec.missing_logs:
            continue
        m = reached & (dev == d)
        log = pd.DataFrame({"arrival_ns": arrival[m] + TEST_START_NS,
                            "start_ns": start[m] + TEST_START_NS,
                            "end_ns": end[m] + TEST_START_NS,
                            "path": np.asarray(paths)[pidx[m]], "method": "GET",
                            "code": "2.05"})
        if spec.tokens:   # as the GE makes them: salt_hi, then salt_lo XOR the request index
            log["token"] = [f"{SALT >> 32:08x}{(SALT & 0xFFFFFFFF) ^ int(i):08x}"
                            for i in np.flatnonzero(m)]
        log = log.sort_values("arrival_ns", kind="stable")
        _write_csv(log, root / "devices" / name / "device-log.csv")
        (root / "devices" / name / "device-summary.json").write_text(json.dumps(
            device_summary(name, int(m.sum()))))

    run = {"name": "synthetic", "run_id": f"synthetic-{spec.seed}", "backend": "process",
           "host": {}, "calibration": {"start_mono_ns": TEST_START_NS - int(spec.cal_s * 1e9),
                                       "end_mono_ns": TEST_START_NS},
           "test": {"start_mono_ns": TEST_START_NS, "duration_s": spec.duration_s},
           "devices": [{"name": nm, "id": i, "address": f"172.28.0.{10 + i}", "port": 5683,
                        "group": "cpu", "resources": f"trace/resources/{nm}.csv", "cpuset": "1"}
                       for i, nm in enumerate(names)],
           "ges": [{"id": "ge-0", "dir": "ge/ge-0", "cpu": 1}],
           "failures": spec.failures, "interrupted": spec.interrupted_at_s is not None}

    if spec.cd:
        run["cd"] = {"device": "cd-node", "service_time_us": spec.cd_service_us, "mode": "busy",
                     "interval_s": spec.cd_interval_s}
        run["cd_ge"] = {"id": "cd-ge", "dir": "cd-ge"}
        _write_csv(pd.DataFrame({"path": ["cd"], "service_time_us": [spec.cd_service_us],
                                 "mode": ["busy"], "payload_bytes": [16]}),
                   root / "trace" / "resources" / "cd-node.csv")
        cd_start = TEST_START_NS - int(spec.cal_s * 1e9)
        t_rel = np.arange(0, spec.cal_s + spec.duration_s, spec.cd_interval_s)
        k = len(t_rel)
        csched = (t_rel * 1e9).astype(np.int64)
        csent = csched + np.abs(rng.normal(0, 5e3, k)).astype(np.int64)
        rd = cd_rd(rng, k, t_rel - spec.cal_s, service_ms=spec.cd_service_us / 1e3,
                   shift=spec.cd_shift, shift_start_s=spec.cd_shift_start_s)
        r_ns = ((rd + 1) * spec.cd_service_us * 1e3).astype(np.int64)
        crecv = csent + r_ns
        cunsent = np.zeros(k, bool)
        if spec.interrupted_at_s is not None:
            cunsent = t_rel - spec.cal_s >= spec.interrupted_at_s
        creq = pd.DataFrame({"index": np.arange(k), "device": 0, "method": "GET", "path": "cd",
                             "scheduled_ns": csched,
                             "sent_ns": pd.array(csent, dtype="Int64"),
                             "received_ns": pd.array(crecv, dtype="Int64"),
                             "code": np.where(cunsent, "", "2.05"),
                             "outcome": np.where(cunsent, "unsent", "ok"),
                             "retransmissions": 0})
        creq.loc[cunsent, ["sent_ns", "received_ns"]] = pd.NA
        _write_csv(creq, root / "cd-ge" / "requests.csv")
        (root / "cd-ge" / "summary.json").write_text(json.dumps(ge_summary(
            label="cd", requests=k, start_mono_ns=cd_start,
            end_mono_ns=cd_start + int((spec.cal_s + spec.duration_s) * 1e9),
            duration_s=spec.cal_s + spec.duration_s, token_salt=None, rx_stamps=None,
            clock_map_bracket_ns=None, memory_locked=None,
            interrupted=spec.interrupted_at_s is not None)))
        # CD device log: arrival 60 µs after sent, no queueing, service = S
        carr = csent[~cunsent] + cd_start + 60_000
        _write_csv(pd.DataFrame({"arrival_ns": carr, "start_ns": carr,
                                 "end_ns": carr + spec.cd_service_us * 1000, "path": "cd",
                                 "method": "GET", "code": "2.05"}),
                   root / "devices" / "cd-node" / "device-log.csv")
    RunDir(root).write_run(RunRecord.model_validate(run))   # what the runner writes
    return root


def truth(root: Path) -> pd.DataFrame:
    """Per-request ground truth written by make_run (index, reached, arrival_ns, ...)."""
    return pd.read_csv(Path(root) / "truth.csv")
