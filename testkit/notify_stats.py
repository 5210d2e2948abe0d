"""Figures of one Observe benchmark step and the rule that says whether it was sustained.

Used by bench/observe_bench.py for both implementations:
  - wot-device observed by the GE: the GE's notifications.csv joined with the device's
    notify-log.csv by (token, seq); trigger = the read's scheduled tick (`tick_ns`), emission =
    the device's stamp right before libcoap sends (`emit_ns`), receive = the GE's kernel receive
    stamp (`received_kernel_ns`, else `received_ns`);
  - libcoap's coap-server-notls driven by bench/obs_probe.c: trigger = the PUT's send instant,
    receive = the probe's kernel receive stamp (no emission stamp inside libcoap's server).

The rule (the GE bench's kind, relative to the workload's own time scale), in two halves:
  - delivered: >= 97 % of the configured notifications/s arrive (the GE bench: achieved >= 97 %
    of offered) and not more than 1 % are undelivered (lost on the way, coalesced by the server,
    reads the device skipped), judged by the one-sided binomial test of the GE-integrity rule
    (more than 1 % with confidence 99 % fails);
  - on time: not more than 1 % late by the same test; a notification is late when it reaches
    the observer more than max(1 ms, one trigger interval) after its trigger, i.e. after the
    next value was due: the server has fallen behind its own notification schedule.
Sustained = both. The bench steps up until "delivered" fails and reports both halves, because
on a shared 2-core host a few-ms stall by another process already makes > 1 % late at kHz rates.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import binom

MIN_RATE_SHARE = 0.97
MAX_BAD_SHARE = 0.01
ALPHA = 0.01
LATE_FLOOR_NS = 1_000_000
TAIL_NS = 50_000_000        # emitted this close to the cancel: may still be in flight, not lost


@dataclass(frozen=True)
class Step:
    """One benchmark step: what was configured and what was measured (latencies in µs)."""
    configured_per_s: float
    delivered_per_s: float
    received: int
    undelivered: int
    late: int
    interval_ns: float                      # between two triggers of one observer
    one_way_us: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))
    trigger_us: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))


def share_exceeds_p(k: int, n: int, share: float = MAX_BAD_SHARE) -> float:
    """One-sided binomial p-value of k or more bad out of n if the true bad share were `share`."""
    if n <= 0 or k <= 0:
        return 1.0
    return float(binom.sf(k - 1, n, share))


def late_count(trigger_us: np.ndarray, interval_ns: float) -> int:
    tol_us = max(LATE_FLOOR_NS, interval_ns) / 1e3
    return int(np.count_nonzero(np.asarray(trigger_us, float) > tol_us))


@dataclass(frozen=True)
class Verdict:
    delivered: bool          # rate >= 97 % of configured and not more than 1 % undelivered
    on_time: bool            # not more than 1 % late
    problems: tuple[str, ...]

    @property
    def sustained(self) -> bool:
        return self.delivered and self.on_time


def judge(s: Step) -> Verdict:
    """Both halves of the rule, with the conditions that failed."""
    problems = []
    delivered = True
    if s.configured_per_s > 0 and s.delivered_per_s < MIN_RATE_SHARE * s.configured_per_s:
        problems.append(f"delivered {s.delivered_per_s:.0f}/s < {MIN_RATE_SHARE:.0%} of "
                        f"{s.configured_per_s:.0f}/s")
        delivered = False
    total = s.received + s.undelivered
    if share_exceeds_p(s.undelivered, total) < ALPHA:
        problems.append(f"{s.undelivered} of {total} not delivered")
        delivered = False
    on_time = share_exceeds_p(s.late, s.received) >= ALPHA
    if not on_time:
        problems.append(f"{s.late} of {s.received} late")
    return Verdict(delivered, on_time, tuple(problems))


def ge_token(salt: int, idx: int) -> str:
    """The GE's token of request `idx` (CONTRACTS §2: salt high word, index XOR salt low word)."""
    return f"{salt >> 32:08x}{(salt & 0xFFFFFFFF) ^ idx:08x}"


def device_step(notes: pd.DataFrame, dev_log: pd.DataFrame, requests: pd.DataFrame, salt: int,
                start_mono: int, period_ns: float, reads_skipped: int = 0) -> Step:
    """A wot-device step observed by the GE.

    notes: the GE's notifications.csv; dev_log: the device's notify-log.csv (token as str);
    requests: the GE's requests.csv (OBSERVE rows: registration answered at received_ns; CANCEL
    rows: sent at sent_ns). Undelivered = sequence numbers missing between an observation's
    first and last notification (lost or coalesced) + notifications the device emitted to it
    after its last received one and well before the cancel (lost) + reads the device skipped
    (queue full) once per observer."""
    reg = requests[requests["method"] == "OBSERVE"]
    can = requests[requests["method"] == "CANCEL"]
    obs_idx = reg["index"].astype(int).tolist()
    n_obs = len(obs_idx)
    # the GE pairs a CANCEL with the oldest open OBSERVE of the same uri: here one per uri
    cancel_at = dict(zip(can["path"].astype(str), can["sent_ns"].astype(float) + start_mono))
    window_s, undelivered = 0.0, 0
    emitted = dev_log[dev_log["kind"] == "notify"]
    for idx, path, reg_ns in zip(obs_idx, reg["path"].astype(str), reg["received_ns"].astype(float)):
        stop = cancel_at.get(path, np.nan)
        window_s += max(0.0, (stop - (reg_ns + start_mono)) / 1e9) if not np.isnan(stop) else 0.0
        seqs = np.unique(notes.loc[notes["observation"] == idx, "seq"].to_numpy(np.int64))
        tok = ge_token(salt, idx)
        mine = emitted[emitted["token"] == tok]
        if len(seqs):
            undelivered += int(seqs[-1] - seqs[0] + 1 - len(seqs))
            last = seqs[-1]
        else:
            last = -1
        tail = mine[(mine["seq"].astype(np.int64) > last) &
                    (mine["emit_ns"].astype(float) < stop - TAIL_NS)]
        undelivered += len(tail)
    undelivered += reads_skipped * n_obs
    toks = {ge_token(salt, i): i for i in obs_idx}
    em = emitted.assign(observation=emitted["token"].map(toks)).dropna(subset=["observation"])
    em = em.astype({"observation": np.int64, "seq": np.int64})
    j = notes.merge(em[["observation", "seq", "emit_ns", "tick_ns"]], on=["observation", "seq"],
                    how="left")
    recv = j["received_ns"].to_numpy(float)
    if "received_kernel_ns" in j.columns:     # the kernel stamp where the GE recorded one
        kern = j["received_kernel_ns"].to_numpy(float)
        recv = np.where(np.isnan(kern), recv, kern)
    recv = recv + start_mono
    one_way = (recv - j["emit_ns"].to_numpy(float)) / 1e3
    trig = (recv - j["tick_ns"].to_numpy(float)) / 1e3
    received = int(len(notes))
    per_obs_s = window_s / n_obs if n_obs else 0.0
    return Step(configured_per_s=n_obs * 1e9 / period_ns,
                delivered_per_s=received / per_obs_s if per_obs_s > 0 else 0.0,
                received=received, undelivered=undelivered,
                late=late_count(trig, period_ns), interval_ns=period_ns,
                one_way_us=one_way, trigger_us=trig)


def probe_step(rec: pd.DataFrame, n_obs: int, rate: float, puts: int) -> Step:
    """A coap-server-notls step driven by obs_probe (rec: its CSV). Every PUT should reach
    every observer once; a repeat of the same (put, observer) counts once."""
    rec = rec.drop_duplicates(["put", "observer"])
    trig = (rec["recv_ns"].to_numpy(float) - rec["send_ns"].to_numpy(float)) / 1e3
    received = int(len(rec))
    secs = puts / rate if rate > 0 else 0.0
    interval = 1e9 / rate
    return Step(configured_per_s=n_obs * rate, delivered_per_s=received / secs if secs else 0.0,
                received=received, undelivered=max(0, puts * n_obs - received),
                late=late_count(trig, interval), interval_ns=interval,
                one_way_us=np.array([]), trigger_us=trig)
