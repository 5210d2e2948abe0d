"""Repeats of one setting folded into mean ± 95 % confidence interval (Student t over the
repeats) per metric, with the verdict of every repeat (:mod:`wotbench.sweep.repeats`).

Every finished repeat with a value counts, flagged ones too: the interval is what the host
delivered, and the setting's row says how many of its repeats the verdict flagged (and which
by contention) instead of dropping them silently.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from pydantic import BaseModel
from scipy import stats

from wotbench.sweep.rows import PointRow

CONFIDENCE = 0.95
# (fact key of wotbench.sweep.report.collect, label, unit) of every aggregated metric
METRICS: list[tuple[str, str, str]] = [
    ("throughput_rps", "throughput", "req/s"),
    ("rt_p50_ms", "p50", "ms"),
    ("rt_p95_ms", "p95", "ms"),
    ("rt_p99_ms", "p99", "ms"),
    ("loss_share", "loss (timeouts / sent)", "share"),
    ("timeouts", "timeouts", "requests"),
    ("sut_cpu_cores", "SUT CPU", "cores"),
    ("sut_rss_peak_mib", "SUT peak RSS", "MiB"),
    # the testbed's part of the devices' response time (docs/DETECTOR.md "The host's share")
    ("testbed_ms", "host added per request", "ms"),
    ("testbed_share", "host's share of R", "share"),
    # the notification sink's (issue 35; summary.json notify): the worst subscriber's latency
    # and lost share, the subscribers' notifications/s together
    ("notify_p50_ms", "update -> notification p50", "ms"),
    ("notify_p99_ms", "update -> notification p99", "ms"),
    ("notify_per_s", "notifications", "1/s"),
    ("notify_lost_share", "updates never notified", "share"),
]


class Interval(BaseModel):
    """Mean and two-sided 95 % Student-t interval of the values of n repeats; ``half_width``
    (and low/high) is None below 2 values, ``sd`` the sample standard deviation."""
    n: int
    mean: Optional[float] = None
    half_width: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    sd: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None


def t_quantile(n: int) -> float:
    """The two-sided 95 % Student-t critical value for n values (n - 1 degrees of freedom)."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def interval(values: list[Optional[float]]) -> Interval:
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if not n:
        return Interval(n=0)
    mean = sum(xs) / n
    if n < 2:
        return Interval(n=1, mean=mean, min=mean, max=mean)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    hw = t_quantile(n) * sd / math.sqrt(n)
    return Interval(n=n, mean=mean, half_width=hw, low=mean - hw, high=mean + hw, sd=sd,
                    min=min(xs), max=max(xs))


class RepeatRow(BaseModel):
    """One run of a setting: its facts (None where not measured) and verdict."""
    setting: str
    point: str
    repeat: int
    overrides: dict[str, Any]
    status: str
    verdict: Optional[str] = None
    reasons: list[str] = []
    run_dir: Optional[str] = None
    values: dict[str, Optional[float]]


class SettingRow(BaseModel):
    """One setting: its repeats' verdicts and every metric's interval."""
    setting: str
    overrides: dict[str, Any]
    repeats: int                         # planned
    done: int                            # finished with summary.json
    verdicts: list[Optional[str]]        # one per planned repeat, in repeat order (None: not done)
    flagged: list[str]                   # points whose verdict is not trustworthy
    contention: list[str]                # points flagged by the contention verdict
    metrics: dict[str, Interval]

    @property
    def verdict_text(self) -> str:
        """'5/5 trustworthy' or '2 of 5 repeats flagged (contention: p00-r1, p00-r3)'."""
        if not self.done:
            return f"0 of {self.repeats} repeats finished"
        if not self.flagged:
            return f"{self.done}/{self.repeats} trustworthy"
        kinds: dict[str, int] = {}
        for v in self.verdicts:
            if v not in (None, "trustworthy"):
                kinds[v] = kinds.get(v, 0) + 1
        text = (f"{len(self.flagged)} of {self.done} repeats flagged ("
                + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ")")
        if self.contention:
            text += " — contention in " + ", ".join(self.contention)
        return text


def repeat_rows(rows: list[PointRow]) -> list[RepeatRow]:
    """The per-run facts of :func:`wotbench.sweep.report.collect`, as results.json keeps them."""
    return [RepeatRow(setting=r.setting, point=r.id, repeat=r.repeat, overrides=r.overrides,
                      status=r.status, verdict=r.verdict, reasons=list(r.reasons or []),
                      run_dir=r.run_dir, values={k: r.fact(k) for k, _, _ in METRICS})
            for r in rows]


def settings(runs: list[RepeatRow], repeats: int) -> list[SettingRow]:
    """One row per setting, in the order the settings first appear."""
    by: dict[str, list[RepeatRow]] = {}
    for r in runs:
        by.setdefault(r.setting, []).append(r)
    out = []
    for sid, rs in by.items():
        rs = sorted(rs, key=lambda r: r.repeat)
        done = [r for r in rs if r.status == "done"]
        n = max(repeats, len(rs))
        verdicts: list[Optional[str]] = [None] * n
        for r in rs:
            verdicts[r.repeat] = r.verdict if r.status == "done" else None
        out.append(SettingRow(
            setting=sid, overrides=rs[0].overrides, repeats=n, done=len(done), verdicts=verdicts,
            flagged=[r.point for r in done if r.verdict != "trustworthy"],
            contention=[r.point for r in done if r.verdict == "contention"],
            metrics={k: interval([r.values.get(k) for r in done]) for k, _, _ in METRICS}))
    return out
