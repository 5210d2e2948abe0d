"""SLO-driven capacity search: the largest setting that meets every service-level objective
*while the host stays faithful* (``wotbench capacity CONFIG --slo 'p95<=50ms' ...``).

The same monotonic probe + bisection as :mod:`wotbench.capacity.command`; what differs is how a
setting is judged. Each of its ``repeats`` runs has a verdict (is the host faithful?) and an
SLO result (summary.json ``slo``, judged by the run's own analysis). A setting is

- ``unfaithful`` when at least half of its runs have a verdict other than trustworthy (ties
  count: the search errs on the safe side), whatever their SLO results;
- ``meets`` when, of its faithful runs, more than half met every SLO;
- ``misses`` otherwise.

Only ``meets`` lets the search go higher. The answer is one of three, said in one sentence:

- ``system``: "Up to X meets the SLOs; at Y the system misses p95 (61 ms); the host was
  faithful throughout" (or every setting up to ``--max`` met them);
- ``host``: "The host stopped being faithful at Z before the SLO was missed: use more cores,
  fewer devices per core, or more hosts", with the evidence (the verdicts at Z);
- ``inconclusive``: at X or Y the deciding metric varied across the repeats by more than its
  distance to the limit, so another set of runs could flip the answer.

The *deciding metric* of a setting is the objective with the least headroom (the largest miss
at a setting that misses); its spread is max − min over the setting's faithful runs. With one
run per setting no spread is measured and the confidence statement says so.
"""
from __future__ import annotations

import statistics
from typing import Any, Optional

from wotbench.capacity.result import (CapacityResult, MetricStats, SettingJudgement,
                                      SloOutcome)
from wotbench.capacity.search import CapacitySearch, testbed_note
from wotbench.rundir import Summary
from wotbench.distributed.answer import hosts_text
from wotbench.config.slo_spec import Objective

KINDS = ("system", "host", "inconclusive", "incomplete")


def _objective_of(r) -> Objective:
    return Objective(r.key, r.metric, r.group, r.op, r.limit, r.unit)


def _metric_stats(summaries: list[Summary], key: str) -> Optional[MetricStats]:
    """The objective ``key`` across runs: values, median, spread, and the median's margin."""
    rs = [o for s in summaries if s.slo for o in s.slo.objectives if o.key == key]
    if not rs:
        return None
    o = _objective_of(rs[0])
    vals = [r.measured for r in rs if r.measured is not None]
    med = statistics.median(vals) if vals else None
    margin = None if med is None else (o.limit - med if o.op == "<=" else med - o.limit)
    return MetricStats(key=key, short=o.short, label=rs[0].label, unit=o.unit, op=o.op,
                       limit=o.limit, values=vals, no_data=len(rs) - len(vals), median=med,
                       min=min(vals) if vals else None, max=max(vals) if vals else None,
                       spread=(max(vals) - min(vals)) if len(vals) > 1 else None, margin=margin,
                       failed_runs=sum(r.state != "pass" for r in rs), runs=len(rs))


def judge_setting(summaries: list[Summary]) -> SettingJudgement:
    """The class of one setting from its runs' summaries (see the module docstring) and its
    deciding metric."""
    n = len(summaries)
    faithful = [s for s in summaries if s.verdict.status == "trustworthy"]
    met = [s for s in faithful if s.slo is not None and s.slo.status == "met"]
    if 2 * (n - len(faithful)) >= n:
        cls = "unfaithful"
    elif 2 * len(met) > len(faithful):
        cls = "meets"
    else:
        cls = "misses"
    basis = faithful or summaries
    keys = list(dict.fromkeys(o.key for s in basis if s.slo for o in s.slo.objectives))
    stats = [m for m in (_metric_stats(basis, k) for k in keys) if m is not None]
    deciding = None
    if stats:
        def headroom(m: MetricStats) -> float:
            if m.median is None:
                return float("-inf")
            return m.margin / m.limit if m.limit else m.margin
        deciding = min(stats, key=headroom)
    return SettingJudgement(cls=cls, faithful_runs=len(faithful), slo_met_runs=len(met),
                            deciding=deciding, metrics=stats,
                            slo_texts=[s.slo.text if s.slo else "no SLO result"
                                       for s in summaries])


def slo_metric_text(judged: Optional[SettingJudgement]) -> str:
    """``p95 44.1 ms (41 ms–47 ms) ≤ 50 ms`` for a step's deciding metric (median, range)."""
    m = judged and judged.deciding
    if not m:
        return "—"
    o = _objective(m)
    rng = f" ({o.fmt(m.min)}–{o.fmt(m.max)})" if m.spread is not None else ""
    return f"{m.short} {o.fmt(m.median)}{rng} {'≤' if m.op == '<=' else '≥'} {o.fmt(m.limit)}"


def fmt_value(m: MetricStats, v: Optional[float]) -> str:
    return _objective(m).fmt(v)


def _objective(m: MetricStats) -> Objective:
    return Objective(m.key, "", None, m.op, m.limit, m.unit)


def _noisy(m: Optional[MetricStats]) -> bool:
    """Noise across the repeats larger than the distance to the limit."""
    return bool(m and m.spread is not None and m.margin is not None
                and m.spread > abs(m.margin))


def _spread_text(m: MetricStats) -> str:
    o = _objective(m)
    if m.spread is None:
        return f"{m.short} {o.fmt(m.median)} (one run: no spread measured)"
    return (f"{m.short} {o.fmt(m.min)}–{o.fmt(m.max)} over {len(m.values)} runs "
            f"(spread {o.fmt(m.spread)}; median {o.fmt(m.median)}, "
            f"{o.fmt(abs(m.margin))} {'inside' if m.margin >= 0 else 'beyond'} the limit "
            f"{o.fmt(m.limit)})")


def outcome(result: CapacityResult) -> SloOutcome:
    """The answer of a finished (or stopped) SLO search, in one sentence."""
    key, steps = result.key, [s for s in result.steps if s.slo]
    by_value = {s.value: s for s in steps}
    x, y = result.answer, result.first_flagged
    sx, sy = by_value.get(x), by_value.get(y)
    if result.status in ("failed", "interrupted"):
        return SloOutcome(kind="incomplete", sentence="Incomplete: " + result.conclusion,
                          confidence=None, evidence=[])
    upto = [s for s in steps if y is None or s.value <= y]
    flagged_runs = sum(len(s.points) - s.slo.faithful_runs for s in upto)
    total_runs = sum(len(s.points) for s in upto)
    faithful_text = ("the host was faithful throughout" if flagged_runs == 0 else
                     f"the host was faithful at every deciding setting ({flagged_runs} of "
                     f"{total_runs} runs flagged, outvoted by their repeats)")
    conf = []
    for label, s in (("at", sx), ("at", sy)):
        if s and s.slo.deciding:
            conf.append(f"{label} {key} = {s.value}: {_spread_text(s.slo.deciding)}")
    confidence = "; ".join(conf) if conf else None
    if result.params.repeats < 2:
        confidence = (confidence + "; " if confidence else "") + \
            "one run per setting, so no spread was measured: use --repeats 3 for a confidence statement"
    if sy is not None and sy.slo.cls == "unfaithful":
        reasons = list(dict.fromkeys(sy.reasons))[:3]
        before = (f" (up to {key} = {x} the SLOs were met on a faithful host)" if x is not None
                  else " (already at the first setting)")
        named = hosts_text(sy.hosts or [])   # swarm: which node's cell, and why
        return SloOutcome(
            kind="host",
            sentence=(f"The host stopped being faithful at {key} = {y} before the SLO was "
                      f"missed{before}: use more cores, fewer devices per core, or more hosts."
                      + (f" On this cluster, {named}." if named else "")),
            confidence=confidence,
            evidence=[f"verdicts at {key} = {y}: {', '.join(str(v) for v in sy.verdicts)}"] +
                     [f"{r}" for r in reasons] +
                     ([f"R_d of the CD node {sy.rd_cd:.3f}"] if sy.rd_cd is not None else []))
    noisy = [s for s in (sx, sy) if s and _noisy(s.slo.deciding)]
    if noisy:
        s = noisy[0]
        m = s.slo.deciding
        o = _objective(m)
        return SloOutcome(
            kind="inconclusive",
            sentence=(f"Inconclusive: at {key} = {s.value} {m.short} varied by "
                      f"{o.fmt(m.spread)} across {len(m.values)} runs, more than its "
                      f"{o.fmt(abs(m.margin))} distance to the {o.fmt(m.limit)} limit: "
                      f"add --repeats, lengthen duration_s or search with a coarser --step."),
            confidence=confidence, evidence=[])
    if sy is None:      # every setting up to --max met the SLOs
        return SloOutcome(
            kind="system",
            sentence=(f"Up to {key} = {x} (the largest tried, --max) meets the SLOs; "
                      f"{faithful_text}: the limit lies above, raise --max."),
            confidence=confidence, evidence=[])
    m = sy.slo.deciding
    miss = f"{m.short} ({_objective(m).fmt(m.median)})" if m else "an SLO"
    head = f"Up to {key} = {x} meets the SLOs; at" if x is not None else \
        "No setting meets the SLOs: already at"
    return SloOutcome(kind="system",
                      sentence=f"{head} {key} = {y} the system misses {miss}; {faithful_text}.",
                      confidence=confidence, evidence=[])


class SloSearch(CapacitySearch):
    """:class:`CapacitySearch` where a setting is an upper bound unless it ``meets``."""

    def evaluate(self, value: Any, phase: str) -> bool:
        pts = self.run_setting(value, phase)
        summaries = [self.sweep.summary(p) for p in pts]
        judged = judge_setting([s for s in summaries if s is not None])
        bound = judged.cls != "meets"
        step = self._step(phase, value, pts, bound)
        step.slo = judged
        step.slo_text = slo_metric_text(judged)
        self.steps.append(step)
        d = judged.deciding
        what = f"; {d.short} {fmt_value(d, d.median)}" if d else ""
        colour = {"meets": "green", "misses": "red", "unfaithful": "yellow"}[judged.cls]
        self._say(f"  → {self.p.key}={value}: [{colour}]{judged.cls}[/]{what} "
                  f"({judged.slo_met_runs}/{judged.faithful_runs} faithful runs met the SLOs, "
                  f"{len(pts) - judged.faithful_runs} flagged; {self._runs_done()} runs so far)")
        return bound

    def _runs_done(self) -> int:
        return sum(len(s.points) for s in self.steps)

    def run(self) -> CapacityResult:
        result = super().run()
        result.slo = self.p.slo
        result.outcome = outcome(result)
        # how much of the latency at the answer's point was the testbed's
        result.conclusion = result.outcome.sentence + testbed_note(
            result.steps, result.key, result.answer)
        result.policy = (f"Each setting ran {self.p.repeats} time(s). A setting is unfaithful "
                         "when at least half of its runs had a verdict other than trustworthy; "
                         "else it meets the SLOs when more than half of its faithful runs met "
                         "every objective. Only a setting that meets them lets the search go "
                         "higher (monotonic search).")
        return result


def slo_exit_code(result: CapacityResult) -> int:
    """0 an answer about the system, 3 about the testbed (host not faithful), 5 inconclusive,
    1 the search did not finish."""
    return {"system": 0, "host": 3, "inconclusive": 5}.get(result.outcome.kind, 1)
