"""The capacity search engine (``wotbench capacity``, see :mod:`wotbench.capacity.command` for the
command and the policy): a monotonic probe + bisection over one key, each setting run
``repeats`` times as points of a sweep dir (finished points are reused, so it resumes).
:class:`CapacitySearch` judges a setting by its verdicts; :mod:`wotbench.capacity.slo_search`
subclasses it to judge by the SLOs as well.
"""
from __future__ import annotations

import statistics
from typing import Any, Optional

from wotbench.capacity.result import SCHEMA, CapacityParams, CapacityResult, CapacityStep
from wotbench.distributed.answer import hosts_text
from wotbench.monitor.quiet import QuietGate
from wotbench.sweep.core import RunFn, Sweep, SweepInterrupted
from wotbench.sweep.paths import expand_pseudo, get_path

DEVICES_RT = "the devices' response time"   # what the host's share is of, by default


class Failed(Exception):
    pass


def overrides_for(key: str, value: Any) -> dict[str, Any]:
    """The point's overrides: ``devices[N].rate`` stored as the ``rit.mean`` it sets."""
    k, v = expand_pseudo(key, value)
    return {k: v}


def _policy(repeats: int) -> str:
    return (f"Each setting ran {repeats} time(s); flagged when at least half of its runs had a verdict "
            "other than trustworthy (ties count as flagged). Monotonic search: nothing above a flagged "
            "or below a clean setting is run.")


class CapacitySearch:
    def __init__(self, sweep: Sweep, params: CapacityParams, run_fn: RunFn, console: Any, backend: Optional[str],
                 gate: Optional[QuietGate] = None):
        self.sweep, self.p, self.run_fn, self.console, self.backend = sweep, params, run_fn, console, backend
        self.gate = gate
        self.interrupted: Optional[SweepInterrupted] = None   # a run stopped by SIGINT/SIGTERM
        self.steps: list[CapacityStep] = []
        self.base_seed = int(get_path(sweep.base_raw, "seed", 1) or 1)

    def run_setting(self, value: Any, phase: str) -> list:
        """Run (or reuse) the ``repeats`` points of one setting; :class:`Failed` when one did
        not complete (the failed step is recorded)."""
        pts = []
        for r in range(self.p.repeats):
            ov = overrides_for(self.p.key, value)
            if r:
                ov["seed"] = self.base_seed + r
            p = self.sweep.add_point(ov)
            if p.status != "done" or not self.sweep.refresh(p):
                self._say(f"[bold]{phase}[/] {self.p.key}={value} (run {r + 1}/{self.p.repeats}, {p.id}) …")
                self.sweep.run_point(p, self.run_fn, self.backend, self.gate,
                                     log=self._say)
            pts.append(p)
            if p.status != "done":
                self.steps.append(self._step(phase, value, pts, None))
                raise Failed(f"{p.id} ({self.p.key}={value}) {p.status}: {p.error}")
        return pts

    def evaluate(self, value: Any, phase: str) -> bool:
        """True when the setting is an upper bound of the search (here: flagged)."""
        pts = self.run_setting(value, phase)
        flagged = 2 * sum(p.verdict != "trustworthy" for p in pts) >= len(pts)
        self.steps.append(self._step(phase, value, pts, flagged))
        self._say(f"  → {self.p.key}={value}: " + ("[red]flagged[/]" if flagged else "[green]clean[/]") +
                  f" ({', '.join(str(p.verdict) for p in pts)})")
        return flagged

    def _step(self, phase: str, value: Any, pts: list, flagged: Optional[bool]) -> CapacityStep:
        summaries = [s for s in (self.sweep.summary(p) for p in pts) if s is not None]
        return CapacityStep(
            phase=phase, value=value, points=[p.id for p in pts], flagged=flagged,
            verdicts=[p.verdict for p in pts], reasons=[r for p in pts for r in p.reasons],
            run_dirs=[p.run_dir for p in pts],
            hosts=[p.host for p in pts],     # swarm: the unfaithful node per run
            rd_devices=_median([s.rd.overall.rd.p50 for s in summaries]),
            # how much of the devices' response time the host added (median over the runs)
            testbed_ms=_median([s.contention.added_ms for s in summaries]),
            testbed_share=_median([s.contention.added_share for s in summaries]),
            testbed_worst_share=_median([s.contention.worst_share for s in summaries]),
            testbed_of=("the mean RPC round trip, the engines' own part" if any(
                s.connected is not None for s in summaries) else None),
            rd_cd=_median([s.rd.cd.test.p50 for s in summaries if s.rd.cd]))

    def _say(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def run(self) -> CapacityResult:
        p = self.p
        start, maximum, step, res = p.start, p.max, p.step, p.resolution
        integer = all(isinstance(v, int) for v in (start, maximum, step or 1))
        status, answer, first_flagged, error = "failed", None, None, None
        try:
            last_clean, v = None, start
            while True:
                if self.evaluate(v, "probe"):
                    first_flagged = v
                    break
                last_clean = v
                if v >= maximum:
                    break
                v = min(maximum, v + step if step else v * 2)
            if first_flagged is not None and last_clean is not None and p.bisect:
                lo, hi = last_clean, first_flagged
                while hi - lo > res:
                    mid = (lo + hi) // 2 if integer else (lo + hi) / 2
                    if self.evaluate(mid, "bisect"):
                        hi = mid
                    else:
                        lo = mid
                last_clean, first_flagged = lo, hi
            answer = last_clean
            status = ("found" if first_flagged is not None and answer is not None else
                      "none_clean" if answer is None else "max_clean")
        except Failed as e:
            error = str(e)
        except SweepInterrupted as e:      # the caller writes what was found, then re-raises
            status, error, self.interrupted = "interrupted", str(e), e
        clean = [s.value for s in self.steps if s.flagged is False]
        if status in ("failed", "interrupted"):
            answer = max(clean) if clean else None
        return CapacityResult(
            schema=SCHEMA, key=p.key, params=p, status=status, answer=answer,
            first_flagged=first_flagged, runs=sum(len(s.points) for s in self.steps),
            steps=self.steps, error=error, policy=_policy(p.repeats),
            conclusion=_conclusion(status, p, answer, first_flagged, error)
            + _host_note(self.steps, p.key, first_flagged)
            + testbed_note(self.steps, p.key, answer))


def testbed_note(steps: list[CapacityStep], key: str, answer: Any) -> str:
    """" At KEY = X the host added 0.12 ms per request (1.9 % of the devices' response time;
    the worst window 3.1 %).": how much of the latency at the answer was the testbed's."""
    step = next((s for s in reversed(steps) if s.value == answer and answer is not None
                 and s.testbed_ms is not None), None)
    if step is None:
        return ""
    share = (f" ({100 * step.testbed_share:.1f} % of {step.testbed_of or DEVICES_RT}"
             + (f"; the worst window {100 * step.testbed_worst_share:.1f} %"
                if step.testbed_worst_share is not None else "") + ")"
             if step.testbed_share is not None else "")
    return f" At {key} = {answer} the host added {step.testbed_ms:.2f} ms per request{share}."


def _host_note(steps: list[CapacityStep], key: str, flagged: Any) -> str:
    """On swarm: which node's cell stopped being faithful at the first flagged setting."""
    step = next((s for s in reversed(steps) if s.value == flagged and s.hosts), None)
    text = hosts_text(step.hosts) if step else None
    return f" At {key} = {flagged}, {text}." if text else ""


def _median(vals: list[Optional[float]]) -> Optional[float]:
    """The median R_d of a setting's runs (runs without one left out)."""
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else None


def _conclusion(status: str, p: CapacityParams, answer: Any, flagged: Any,
                error: Optional[str]) -> str:
    k = p.key
    if status == "found":
        return (f"{k} = {answer} is the largest setting with a trustworthy verdict; {k} = {flagged} was "
                f"flagged (resolution {p.resolution if p.bisect else p.step}).")
    if status == "max_clean":
        return f"every setting up to the maximum {k} = {p.max} was trustworthy: the limit lies above it."
    if status == "none_clean":
        return (f"already the first setting {k} = {p.start} was flagged: lower --start, or give the "
                f"emulation more cores.")
    if status == "interrupted":
        return (f"the search was interrupted ({error}); largest clean setting so far: {answer}. "
                f"Continue it with --resume.")
    return (f"the search stopped because a run did not complete ({error}); largest clean setting so far: "
            f"{answer}. Fix the cause (or wait for a quiet host) and resume with --resume.")
