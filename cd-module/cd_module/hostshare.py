"""How much of each response time the host added (docs/DETECTOR.md "The host's share").

Per window of the test and per place (the devices of a core, the CD node, each GE), every
*source* of testbed distortion estimates the latency it added per request beyond the run's own
level of that measure, with a confidence interval from **the run's own noise** (below):

- ``cpu_wait``: the place's run-queue wait (kernel, ``/proc/<tid>/schedstat``) per request,
  minus the run's own level (the wait per request as a share of the service time S in the run's
  quiet windows, times the window's S): Σ(wait_j − own_j)/Σn_j over the window's sub-intervals
  (``sub_window_s``). A third-party server has no device log: its requests per sub-interval are
  the ones the GEs got answered by it, and its S the CPU time it used per request (evidence.py);
- ``stretch``: a busy service's wall time beyond S (steal and preemption while serving), per
  request, minus its own level;
- ``wakeup``: the device's read of a request after its kernel arrival stamp, minus its level;
- ``queueing``: how much later each request ended than it would have on a device of its own —
  the same arrivals replayed through a FIFO queue of the device's workers, each request served
  in exactly its S (:func:`replay_ends`) — minus its level. This carries the knock-on: a
  request stretched by the host delays every request queued behind it, which no per-thread wait
  shows. Only for devices whose workers do not share a CPU in the real deployment (one worker,
  or sleep service); a busy device of several workers is left to the other measures;
- ``send_lag`` (GEs only): how much later than scheduled each request left, minus its level;
- ``loop_lag`` (wot-fleet loops): how much later than its kernel arrival a request was read plus
  how much later than due its sleep service ended, minus its level: the engine's own delay,
  which the devices' run-queue wait cannot show (one loop thread serves thousands of devices).
  Its level is its lowest window's, not the median: only disturbance raises a loop's lag.

These measures overlap (a preempted busy service is run-queue wait *and* stretch; a late
wake-up is run-queue wait of the I/O thread), so a place's added latency is the **largest**
estimate, never their sum; ``added_by`` names it. The run's own level of a measure is the median
of its per-request value over the place's *quiet* windows (outside processes used less than
``quiet_share`` of its cores), so what the emulation costs by itself (devices sharing cores with
the GE and each other) is the baseline and what the host added beyond it is the amount. Without a
quiet window the own level is the quietest window's (run-queue wait: at most ``own_level_cap`` of
S), which can only under-state the amount; ``own_from`` says so.

**The bound** (:class:`Noise`). The measures are the kernel's and the logs' record of what
happened to the window's own requests, not a sample of them; what is uncertain is how far the
window would have strayed from the run's own level with nothing added. That is the run's own
noise, measured in its quiet windows: the per-request scatter of the measure around the quiet
level (pooled over the quiet sub-intervals, or the quiet requests), so a window of N requests
strays by σ/√N (fewer requests, wider bound), plus the own level's own error, times the quiet
windows' overdispersion (their window-level spread beyond σ/√N, at least 1). The window's own
shape in time (an episode covering half of it) no longer counts as noise. Without quiet data the
bound is the window's own sample (its sub-intervals, its requests), which counts the shape and
is wider; ``noise_from`` says which. ``loop_lag`` keeps the window's own sample: a loop's lag
rises with its own engine's backlog, which the process scan cannot see.

A device window is **beyond the tolerance** when the lower confidence bound of its added latency
exceeds the tolerance (``tolerance_ms``, or ``tolerance_share`` of the window's mean R); its
**grade** is the point estimate's share of the mean R (none / mild / moderate / severe).

Adding a source (e.g. the engine lag of a fleet run): write a function with the signature of
:data:`Source` returning one :class:`Estimate` per (place, window) it measured, and append it to
:data:`SOURCES` (its ``measure`` name must be a ``FlagRule`` of rundir/evidence.py so a flag can
say it). It then takes part in the added latency, the grade, the verdict and the report.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from wotbench.rundir.evidence import (EvidenceParams, Grade, HostShare, PlaceShare,
                                      PlaceWindow, VerdictParams, WindowEvidence)


@dataclass(frozen=True)
class Estimate:
    """What one source says the host added per request in one (place, window), ms."""
    measure: str
    ms: float
    low: float
    high: float
    own_ms: float
    own_from: str = ""            # how the run's own level was found
    noise_from: str = ""          # what the bound's uncertainty came from (Noise.how)


@dataclass
class Inputs:
    """The fine-grid measures of every place: ``k`` sub-intervals per window.

    ``wait_ns[place]``: run-queue wait per sub-interval (NaN: not measured); ``requests``,
    ``service_ms`` (sum of S of the served requests), ``served``; ``stretch_ms``/``wakeup_ms``/
    ``lag_ms``: per-request samples per sub-interval."""
    nwin: int
    k: int
    wait_ns: dict[str, np.ndarray] = field(default_factory=dict)
    requests: dict[str, np.ndarray] = field(default_factory=dict)
    service_ms: dict[str, np.ndarray] = field(default_factory=dict)
    served: dict[str, np.ndarray] = field(default_factory=dict)
    stretch_ms: dict[str, list[list[float]]] = field(default_factory=dict)
    wakeup_ms: dict[str, list[list[float]]] = field(default_factory=dict)
    lag_ms: dict[str, list[np.ndarray]] = field(default_factory=dict)
    # end − the end on a device of its own (replay_ends): stretch, wake-up and the queueing they
    # caused behind them, per request
    queue_ms: dict[str, list[list[float]]] = field(default_factory=dict)
    # a wot-fleet loop's read lag + timer lateness per request (cd_module/loop_lag.py)
    loop_ms: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def sub(self, w: int) -> slice:
        return slice(w * self.k, (w + 1) * self.k)


# (inputs, the windows' evidence, quiet[(place, window)], params) -> {(place, window): Estimate}
Source = Callable[[Inputs, list[WindowEvidence], dict[tuple[str, int], bool], VerdictParams],
                  dict[tuple[str, int], Estimate]]


PER_DEVICE_MAX = 1000   # engine devices listed per device in summary.json (see _summarise)


def grade_of(share: Optional[float], v: VerdictParams) -> Optional[Grade]:
    if share is None:
        return None
    return ("severe" if share >= v.severe else "moderate" if share >= v.moderate else
            "mild" if share >= v.mild else "none")


def _tq(conf: float, df: float) -> float:
    return float(student_t.ppf(conf, df)) if df >= 1 else float("inf")


def _level(values: list[tuple[int, float]], quiet: dict[tuple[str, int], bool], place: str
           ) -> tuple[Optional[float], str]:
    """(the run's own level, how it was found) from per-window values [(window, value)]."""
    if not values:
        return None, "no window with enough requests"
    q = [v for w, v in values if quiet.get((place, w), True)]
    if q:
        return float(np.median(q)), f"median of {len(q)} quiet window(s)"
    return float(min(v for _, v in values)), "no quiet window: the quietest window's (may under-state)"


def _floor_level(values: list[tuple[int, float]], quiet: dict[tuple[str, int], bool], place: str
                 ) -> tuple[Optional[float], str]:
    """The lowest window's value (quiet ones first): for a lag that only disturbance can raise
    (a wot-fleet loop's), so a loop late for most of the test does not make that its level."""
    if not values:
        return None, "no window with enough requests"
    q = [v for w, v in values if quiet.get((place, w), True)]
    if q:
        return float(min(q)), f"lowest of {len(q)} quiet window(s)"
    return float(min(v for _, v in values)), "no quiet window: the lowest window's"


MEDIAN_SE = float(np.sqrt(np.pi / 2))   # the median's standard error over the mean's
# Fewer quiet windows than this: no run's own noise (the window's own sample bounds it). With
# one, phi is 1 by construction and nothing allows for the drift between windows that real
# clean runs show (phi 1.7-2.5, docs/VALIDATION.md): a bound too narrow to keep them clean.
MIN_QUIET_WINDOWS = 2


@dataclass(frozen=True)
class Noise:
    """What a measure scatters by in the place's quiet time: the run's own noise.

    ``sd``: per request (ms), with ``df`` degrees of freedom; a window of N requests strays from
    the level by sd/√N. ``level_se``: the own level's standard error per request (ms; for
    run-queue wait in units of the quiet mean S, times the window's S). ``phi`` >= 1: the quiet
    windows' squared deviations over what sd/√N predicts for them (scatter between windows that
    the per-request model misses: the host drifting, a burst of the harness), known to
    ``windows`` − 1 degrees of freedom."""
    sd: float
    df: int
    level_se: float
    phi: float
    how: str
    windows: int = 0

    def se(self, n: float, level_scale: float = 1.0) -> float:
        """The standard error of a window's added latency per request over n requests. The own
        level is a median of the quiet windows' means, so the scatter between windows that phi
        measures inflates its error as it does the window's."""
        return float(np.sqrt(self.phi * (self.sd ** 2 / n + (self.level_se * level_scale) ** 2)))

    def dof(self, quiet: bool = False) -> float:
        """The degrees of freedom of the bound's t. A window with an outside process on its
        cores (not ``quiet``): Welch-Satterthwaite — sd's when the quiet windows scatter as
        their requests explain (phi = 1), towards the few windows' (m − 1) when their own
        spread (phi − 1) is most of the variance. A quiet window (nothing seen that could have
        added anything): the few windows' m − 1 always, since phi near 1 from a handful of
        windows does not show that they cannot drift; an amount nobody is seen to cause must
        stand out from the other quiet windows by more than their own spread."""
        if self.windows >= 2 and quiet:
            return float(min(self.df, self.windows - 1))
        if self.phi <= 1 or self.windows < 2:
            return float(self.df)
        return float(self.phi ** 2 / (1 / max(self.df, 1) +
                                      (self.phi - 1) ** 2 / (self.windows - 1)))


def _overdispersion(z2: list[float]) -> float:
    """max(1, Σz²/(m − 1)) over the quiet windows' squared standardised deviations (one degree
    of freedom goes to the level they are deviations from)."""
    return max(1.0, float(np.sum(z2)) / (len(z2) - 1)) if len(z2) >= 2 else 1.0


def sample_noise(x_q: list[np.ndarray]) -> Optional[Noise]:
    """The run's own noise of a per-request measure from its quiet windows' values (one array
    per quiet window); None with fewer than 2 values."""
    x_q = [np.asarray(x, np.float64) for x in x_q if len(x) >= 2]
    allx = np.concatenate(x_q) if x_q else np.zeros(0)
    if len(x_q) < MIN_QUIET_WINDOWS:   # one window cannot show how windows drift apart
        return None
    mu, sd = float(allx.mean()), float(allx.std(ddof=1))
    m = len(x_q)
    if sd <= 0:
        return Noise(0.0, len(allx) - 1, 0.0, 1.0, f"the run's own noise: {m} quiet window(s) "
                     f"of {len(allx)} requests, no scatter")
    phi = _overdispersion([(x.mean() - mu) ** 2 * len(x) / sd ** 2 for x in x_q])
    level_se = (MEDIAN_SE if m >= 3 else 1.0) * sd / np.sqrt(len(allx))
    return Noise(sd, len(allx) - 1, float(level_se), phi,
                 f"the run's own noise: {m} quiet window(s) of {len(allx)} requests" +
                 (f", overdispersion {phi:.2g}" if phi > 1 else ""), m)


def wait_noise(wait_ms: list[np.ndarray], requests: list[np.ndarray],
               service_ms: list[np.ndarray]) -> Optional[Noise]:
    """The run's own noise of the run-queue wait per request from the quiet windows'
    sub-intervals (one array per quiet window: wait, requests and the requests' summed S per
    sub-interval). The residual of a sub-interval is its wait minus the quiet ratio r = Σwait/ΣS
    times its S; sd² = Σresidual²/Σrequests (each request adds its own scatter); ``level_se`` is
    in units of the quiet mean S (the cpu_wait level is a share of S)."""
    w = np.concatenate(wait_ms) if wait_ms else np.zeros(0)
    n = np.concatenate(requests) if requests else np.zeros(0)
    sv = np.concatenate(service_ms) if service_ms else np.zeros(0)
    k, nn, ss = len(w), float(n.sum()), float(sv.sum())
    if k < 2 or nn <= 0 or ss <= 0 or \
            sum(1 for nj in requests if nj.sum() > 0) < MIN_QUIET_WINDOWS:
        return None
    r = float(w.sum()) / ss
    e = w - r * sv
    sd = float(np.sqrt(k / (k - 1) * (e ** 2).sum() / nn))
    m = len(wait_ms)
    how = f"the run's own noise: {m} quiet window(s), {k} sub-intervals of {nn:.0f} requests"
    if sd <= 0:
        return Noise(0.0, k - 1, 0.0, 1.0, how + ", no scatter")
    z2 = [float((wj - r * sj).sum()) ** 2 / (sd ** 2 * nj.sum())
          for wj, nj, sj in zip(wait_ms, requests, service_ms) if nj.sum() > 0]
    phi = _overdispersion(z2)
    # the level's error per request at the quiet mean S, and as a share of it: a window of
    # mean S s_w carries level_se × s_w / s_q
    level_se = (MEDIAN_SE if m >= 3 else 1.0) * sd / np.sqrt(nn) / (ss / nn)
    return Noise(sd, k - 1, float(level_se), phi,
                 how + (f", overdispersion {phi:.2g}" if phi > 1 else ""), len(z2))


def _leave_one_out(quiet: dict[int, tuple], noise_of: Callable[[list[tuple]], Optional[Noise]]
                   ) -> tuple[Callable[[int], Optional[Noise]], str]:
    """(window -> the run's own noise, how it was found). A window that is not quiet is judged
    against all the quiet windows; a quiet one against the *other* quiet windows, so that a
    disturbance the process scan did not see (which left the window "quiet") does not widen its
    own bound — unless fewer than two others remain, whose spread between windows could not be
    measured: then against all of them, itself included (the cautious side)."""
    everyone = noise_of(list(quiet.values()))
    cache: dict[int, Optional[Noise]] = {}
    loo = len(quiet) >= 3

    def of(w: int) -> Optional[Noise]:
        if w not in quiet or not loo:
            return everyone
        if w not in cache:
            cache[w] = noise_of([v for u, v in quiet.items() if u != w])
        return cache[w]
    how = "" if everyone is None else everyone.how + (
        "; a quiet window against the other quiet windows" if loo else "")
    return of, how


WINDOW_NOISE = ("the window's own sample (no quiet window to measure the run's noise in: the "
                "episode's shape in time counts as noise, a wider bound)")


def _sample_source(name: str, samples: dict[str, list], per_request_of: str,
                   level=_level, run_noise: bool = True) -> Source:
    """A source whose measure is a per-request sample (stretch, wake-up, send lag): the added
    latency per request of the place = (Σx − own·n_x) / n, n the window's requests; the own
    level by ``level`` (default: the median of the quiet windows); the bound from the quiet
    windows' requests (:func:`sample_noise`), else (or without ``run_noise``) from the
    window's own."""
    def source(inp: Inputs, windows, quiet, v: VerdictParams):
        out = {}
        for place, subs in samples(inp).items():
            req = inp.requests.get(place)
            per_win = []
            for w in range(inp.nwin):
                x = np.concatenate([np.asarray(s, np.float64) for s in subs[inp.sub(w)]]) \
                    if len(subs[inp.sub(w)]) else np.zeros(0)
                n = int(req[inp.sub(w)].sum()) if req is not None else len(x)
                if per_request_of == "own":
                    n = len(x)
                per_win.append((x, n))
            vals = [(w, float(x.mean())) for w, (x, n) in enumerate(per_win) if len(x) >= 10]
            own, how = level(vals, quiet, place)
            if own is None:
                continue
            noise_of, noise_how = _leave_one_out({w: x for w, (x, _) in enumerate(per_win)
                                                  if quiet.get((place, w), True) and len(x) >= 2},
                                                 sample_noise) \
                if run_noise else ((lambda w: None), "")
            for w, (x, n) in enumerate(per_win):
                if len(x) < 2 or n <= 0:
                    continue
                est = (x.sum() - own * len(x)) / n
                noise = noise_of(w)
                if noise is not None:
                    se, nfrom = noise.se(len(x)) * len(x) / n, noise_how
                    df = noise.dof(quiet.get((place, w), True))
                else:
                    se, df, nfrom = x.std(ddof=1) * np.sqrt(len(x)) / n, len(x) - 1, WINDOW_NOISE
                h = _tq(v.confidence, df) * se
                out[(place, w)] = Estimate(name, est, est - h, est + h, own * len(x) / n, how,
                                           nfrom)
        return out
    return source


def replay_ends(arrival_ns: np.ndarray, service_ns: np.ndarray, workers: int) -> np.ndarray:
    """When each request would have ended on a device of its own: a FIFO queue of ``workers``
    servers fed the same arrivals, each request served in exactly its S (Lindley's recursion;
    arrays in arrival order)."""
    free = np.zeros(max(1, workers), np.float64)      # each worker's next free instant
    out = np.empty(len(arrival_ns), np.float64)
    for i, (a, s) in enumerate(zip(arrival_ns, service_ns)):
        k = int(np.argmin(free))
        start = max(a, free[k])
        free[k] = out[i] = start + s
    return out


def cpu_wait_source(inp: Inputs, windows, quiet, v: VerdictParams
                    ) -> dict[tuple[str, int], Estimate]:
    """The run-queue wait per request beyond the run's own level (share of S), bounded by the
    run's own noise (:func:`wait_noise`), else by the window's sub-intervals."""
    out = {}
    for place, wait in inp.wait_ns.items():
        n = inp.requests.get(place)
        svc, served = inp.service_ms.get(place), inp.served.get(place)
        if n is None or svc is None:
            continue
        vals = []
        quiet_subs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for w in range(inp.nwin):
            s = inp.sub(w)
            ok = np.isfinite(wait[s])
            nn, sv = n[s][ok].sum(), served[s][ok].sum()
            if nn >= 10 and sv and svc[s][ok].sum() > 0:
                vals.append((w, float(wait[s][ok].sum() / 1e6 / nn / (svc[s][ok].sum() / sv))))
            if quiet.get((place, w), True) and ok.sum() and nn > 0 and sv:
                # the summed S of the sub-interval's requests (one of unknown S: the mean)
                nj, sj, dj = n[s][ok], svc[s][ok], served[s][ok]
                quiet_subs[w] = (wait[s][ok] / 1e6, nj.astype(np.float64),
                                 np.where(dj > 0, sj * nj / np.maximum(dj, 1),
                                          nj * svc[s][ok].sum() / sv))
        level, how = _level(vals, quiet, place)
        if level is None:
            continue
        if not any(quiet.get((place, w), True) for w, _ in vals) and level > v.own_level_cap:
            level, how = v.own_level_cap, f"no quiet window: the cap {v.own_level_cap:g} of S"
        noise_of, noise_how = _leave_one_out(
            quiet_subs, lambda subs: wait_noise(*map(list, zip(*subs))) if subs else None)
        for w in range(inp.nwin):
            s = inp.sub(w)
            ok = np.isfinite(wait[s])
            k = int(ok.sum())
            nn = n[s][ok].astype(np.float64)
            if k < 2 or nn.sum() <= 0 or served[s][ok].sum() <= 0:
                continue
            s_bar = svc[s][ok].sum() / served[s][ok].sum()
            wj = wait[s][ok] / 1e6
            own = level * s_bar * nn
            est = float((wj - own).sum() / nn.sum())
            noise = noise_of(w)
            if noise is not None:
                se, nfrom = noise.se(nn.sum(), s_bar), noise_how
                df = noise.dof(quiet.get((place, w), True))
            else:   # the window's own sub-intervals: a ratio estimator's linearised residuals
                e = wj - own - est * nn
                se = float(np.sqrt(k / (k - 1) * (e ** 2).sum()) / nn.sum())
                df, nfrom = k - 1, WINDOW_NOISE
            h = _tq(v.confidence, df) * se
            out[(place, w)] = Estimate("cpu_wait", est, est - h, est + h, level * s_bar, how,
                                       nfrom)
    return out


SOURCES: list[Source] = [
    cpu_wait_source,
    _sample_source("stretch", lambda i: i.stretch_ms, "all"),
    _sample_source("wakeup", lambda i: i.wakeup_ms, "all"),
    _sample_source("queueing", lambda i: i.queue_ms, "all"),
    _sample_source("send_lag", lambda i: {k: list(v) for k, v in i.lag_ms.items()}, "own"),
    # a loop's lag is raised by its own engine falling behind, which no process scan sees: its
    # "quiet" windows are no reference of its noise, so its bound is the window's own sample
    _sample_source("loop_lag", lambda i: {k: list(v) for k, v in i.loop_ms.items()}, "own",
                   _floor_level, run_noise=False),
]


def r_rise(responses: Optional[pd.DataFrame], of: dict[str, str], place: str,
           edges_ns: np.ndarray, quiet: dict[tuple[str, int], bool], v: VerdictParams
           ) -> dict[int, Estimate]:
    """Per window: how much the place's mean response time rose above the run's own level (the
    median of its quiet windows' means), bounded like a per-request measure by the run's own
    noise (the quiet windows' R)."""
    if responses is None or not len(responses):
        return {}
    mine = responses[responses["device"].map(of) == place]
    win = np.searchsorted(edges_ns, mine["sent_ns"].to_numpy(np.float64), side="right") - 1
    rt = mine["rt_ms"].to_numpy(np.float64)
    per_win = {w: rt[win == w] for w in range(len(edges_ns) - 1)}
    own, how = _level([(w, float(x.mean())) for w, x in per_win.items() if len(x) >= 10],
                      quiet, place)
    if own is None:
        return {}
    noise_of, noise_how = _leave_one_out({w: x for w, x in per_win.items()
                                          if quiet.get((place, w), True) and len(x) >= 2},
                                         sample_noise)
    out = {}
    for w, x in per_win.items():
        if len(x) < 2:
            continue
        est = float(x.mean()) - own
        noise = noise_of(w)
        if noise is not None:
            se, df, nfrom = noise.se(len(x)), noise.dof(quiet.get((place, w), True)), noise_how
        else:
            se, df, nfrom = x.std(ddof=1) / np.sqrt(len(x)), len(x) - 1, WINDOW_NOISE
        h = _tq(v.confidence, df) * se
        out[w] = Estimate("r_rise", est, est - h, est + h, own, how, nfrom)
    return out


def cap_by_r_rise(estimates: dict[tuple[str, int], Estimate], place: str,
                  rise: dict[int, Estimate]) -> None:
    """A third-party server's amount is at most what its response time rose by. Its run-queue
    wait need not be on the requests' path (measured 2026-11-27: libcoap's coap-server waited
    0.15 ms per request under a duty-100 loop while its R did not rise against its twin: a
    woken server preempts the loop, its wait fell between requests); without a device log the
    rise of R is the only path-level measure. Point and bounds each the smaller of the two."""
    for (pl, w), e in list(estimates.items()):
        r = rise.get(w)
        if pl != place or r is None or r.ms >= e.ms:
            continue
        estimates[(pl, w)] = Estimate(
            e.measure, r.ms, min(e.low, r.low), min(e.high, r.high), e.own_ms, e.own_from,
            f"{e.noise_from}; at most the rise of its response time over its own "
            f"{r.own_ms:.3f} ms ({r.noise_from})")


def _quiet(windows: list[WindowEvidence], v: VerdictParams) -> dict[tuple[str, int], bool]:
    """(place, window) -> True when nothing from outside the run used the place's cores, judged
    over spans of at least ``quiet_span_s``: the process scan may sample less often than a
    short window (every few seconds on a busy host), so a 2 s window without a scan sample is
    not quiet because of that."""
    def span(w: WindowEvidence) -> int:
        return int(w.start_s // max(w.end_s - w.start_s, v.quiet_span_s))
    foreign: dict[tuple[str, int], list[float]] = {}
    other: dict[int, list[float]] = {}
    for w in windows:
        other.setdefault(span(w), []).append(
            sum(a.share for a in w.antagonists if a.owner_kind == "wotbench"))
        for pw in w.places:
            foreign.setdefault((pw.place, span(w)), []).append(pw.foreign_share or 0.0)
    out = {}
    for w in windows:
        k = span(w)
        for pw in w.places:
            out[(pw.place, w.window)] = float(np.mean(foreign[(pw.place, k)])) < v.quiet_share \
                and float(np.mean(other[k])) < v.quiet_share
    return out


def _r_per_window(responses: Optional[pd.DataFrame], of: dict[str, str], edges_ns: np.ndarray,
                  also: Optional[dict[str, str]] = None
                  ) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], tuple[int, float]]]:
    """Mean R per (place, window), and per (device, window) (count, mean R); ``also``: a second
    place of some devices (a wot-fleet loop), whose R is its devices' too."""
    by_place: dict[tuple[str, int], float] = {}
    by_dev: dict[tuple[str, int], tuple[int, float]] = {}
    if responses is None or not len(responses):
        return by_place, by_dev
    df = responses.assign(win=np.searchsorted(edges_ns, responses["sent_ns"].to_numpy(np.float64),
                                              side="right") - 1)
    df = df[(df["win"] >= 0) & (df["win"] < len(edges_ns) - 1)]
    # aggregated by pandas, read back as arrays: a 10^5-device run has 10^6 (device, window)
    # groups, too many for a Python loop over groups
    for mapping in (of, also) if also else (of,):   # (no second place: nothing to add)
        placed = df.assign(place=df["device"].map(mapping)).dropna(subset=["place"])
        agg = placed.groupby(["place", "win"], observed=True)["rt_ms"].mean()
        by_place.update({(str(pl), int(w)): float(r) for (pl, w), r in agg.items()})
    grouped = df.groupby(["device", "win"], observed=True)["rt_ms"]
    count, mean = grouped.count(), grouped.mean()   # (cheaper than .agg([...]) of both)
    by_dev.update({(str(d), int(w)): (int(c), float(r)) for (d, w), c, r in
                   zip(count.index, count.to_numpy(), mean.to_numpy())})
    return by_place, by_dev


def tolerance_ms(v: VerdictParams, r_ms: Optional[float]) -> Optional[float]:
    if v.tolerance_ms is not None:
        return v.tolerance_ms
    return v.tolerance_share * r_ms if r_ms is not None else None


def tolerance_text(v: VerdictParams) -> str:
    return (f"{v.tolerance_ms:g} ms" if v.tolerance_ms is not None
            else f"{100 * v.tolerance_share:g} % of R")


def assess(inp: Inputs, windows: list[WindowEvidence], devices: set[str], of: dict[str, str],
           responses: Optional[pd.DataFrame], edges_ns: np.ndarray, p: EvidenceParams,
           loop_of: Optional[dict[str, str]] = None,
           r_capped: frozenset[str] = frozenset()) -> HostShare:
    """Fill every PlaceWindow's host-share fields in place and return the run's block.
    ``devices``: the device places, whose amounts are the run's (the summary, the grade);
    they and the CD node (a device stand-in on the same cores) are judged against the
    tolerance; ``of``: device -> place; ``responses``: device, sent_ns (absolute), rt_ms of
    answered requests; ``loop_of``: a wot-fleet device -> its loop's place (judged too: the
    loop serves its devices, and a device's amount is the larger of its place's and its
    loop's); ``r_capped``: places of third-party servers only, whose amount is at most their
    response time's rise (:func:`cap_by_r_rise`)."""
    loop_of = loop_of or {}
    judged = set(devices) | {"cd-node"} | set(loop_of.values())
    v = p.verdict
    quiet = _quiet(windows, v)
    estimates: dict[tuple[str, int], Estimate] = {}
    for source in SOURCES:
        for key, e in source(inp, windows, quiet, v).items():
            if key not in estimates or e.ms > estimates[key].ms:
                estimates[key] = e
    for place in r_capped:
        cap_by_r_rise(estimates, place, r_rise(responses, of, place, edges_ns, quiet, v))
    r_place, r_dev = _r_per_window(responses, of, edges_ns, loop_of)
    block = HostShare(tolerance=tolerance_text(v))
    own_from: dict[str, set[str]] = {}
    noise_from: dict[str, set[str]] = {}
    for (place, _), e in estimates.items():
        own_from.setdefault(place, set()).add(f"{e.measure}: {e.own_from}")
        noise_from.setdefault(place, set()).add(f"{e.measure}: {e.noise_from}")
    for w in windows:
        for pw in w.places:
            _fill(pw, estimates.get((pw.place, w.window)), r_place.get((pw.place, w.window)),
                  pw.place in judged and pw.requests >= p.min_requests, v)
    _summarise(block, windows, judged - {"cd-node"}, of, r_dev, v, loop_of)
    for place, ps in block.per_place.items():
        ps.own_from = "; ".join(sorted(own_from.get(place, ())))
        ps.noise_from = "; ".join(sorted(noise_from.get(place, ())))
    return block


def _fill(pw: PlaceWindow, e: Optional[Estimate], r_ms: Optional[float], judge: bool,
          v: VerdictParams) -> None:
    pw.r_ms = round(r_ms, 4) if r_ms is not None else None
    if e is None:
        return
    pw.added_by = e.measure
    pw.own_ms = round(max(e.own_ms, 0.0), 4)
    # never more than the response time measured (the samples' windows and the answered
    # requests' differ slightly: a request that timed out has a replayed end, no R)
    top = r_ms if r_ms else float("inf")
    pw.added_ms = round(min(max(e.ms, 0.0), top), 4)
    pw.added_low_ms = round(min(max(e.low, 0.0), top), 4)
    pw.added_high_ms = round(min(max(e.high, 0.0), top), 4)
    if r_ms:
        pw.added_share = round(pw.added_ms / r_ms, 4)
        pw.grade = grade_of(pw.added_share, v)
    tol = tolerance_ms(v, r_ms)
    if judge and tol is not None and np.isfinite(e.low):
        pw.beyond_tolerance = bool(e.low > tol)


def _summarise(block: HostShare, windows: list[WindowEvidence], judged: set[str],
               of: dict[str, str], r_dev: dict[tuple[str, int], tuple[int, float]],
               v: VerdictParams, loop_of: dict[str, str]) -> None:
    added_by: dict[tuple[str, int], float] = {}
    for w in windows:
        for pw in w.places:
            if pw.added_ms is not None:
                added_by[(pw.place, w.window)] = pw.added_ms
    places: dict[str, list[tuple[int, PlaceWindow]]] = {}
    for w in windows:
        for pw in w.places:
            places.setdefault(pw.place, []).append((w.window, pw))
    for place, rows in places.items():
        ps = PlaceShare()
        n = sum(pw.requests for _, pw in rows if pw.added_ms is not None)
        ps.requests = sum(pw.requests for _, pw in rows)
        if n:
            ps.added_ms = round(sum(pw.requests * pw.added_ms for _, pw in rows
                                    if pw.added_ms is not None) / n, 4)
            ps.own_ms = round(sum(pw.requests * (pw.own_ms or 0) for _, pw in rows
                                  if pw.added_ms is not None) / n, 4)
        rr = [(pw.requests, pw.r_ms) for _, pw in rows if pw.r_ms is not None]
        if rr and sum(c for c, _ in rr):
            ps.r_ms = round(sum(c * r for c, r in rr) / sum(c for c, _ in rr), 4)
            if ps.added_ms is not None:
                ps.added_share = round(ps.added_ms / ps.r_ms, 4)
        graded = [(w, pw) for w, pw in rows if pw.added_share is not None and
                  (place not in judged or pw.beyond_tolerance is not None)]
        if graded:
            w, worst = max(graded, key=lambda x: x[1].added_share)
            ps.worst_window, ps.worst_added_ms, ps.worst_share = w, worst.added_ms, \
                worst.added_share
            ps.grade = worst.grade
        ps.windows_beyond = sum(1 for _, pw in rows if pw.beyond_tolerance)
        block.per_place[place] = ps
    # per device: its own requests and R, its place's added latency per request in each window
    amounts: dict[str, PlaceShare] = {}
    by_dev: dict[str, list[tuple[int, int, float]]] = {}
    for (d, w), (c, r) in r_dev.items():
        by_dev.setdefault(d, []).append((w, c, r))
    for dev in {**of, **loop_of}:
        place, loop = of.get(dev), loop_of.get(dev)
        if place not in judged and loop is None:
            continue
        counts = by_dev.get(dev, [])
        if not counts:
            continue
        ps = PlaceShare(requests=sum(c for _, c, _ in counts))
        ps.r_ms = round(sum(c * r for _, c, r in counts) / ps.requests, 4)
        known = [(c, max(added_by.get((place, w), 0.0), added_by.get((loop, w), 0.0)))
                 for w, c, _ in counts if (place, w) in added_by or (loop, w) in added_by]
        if known and sum(c for c, _ in known):
            ps.added_ms = round(sum(c * a for c, a in known) / sum(c for c, _ in known), 4)
            ps.added_share = round(ps.added_ms / ps.r_ms, 4) if ps.r_ms else None
        amounts[dev] = ps
    # summary.json lists the engine devices one by one only for a small fleet (10^5 entries
    # would be megabytes; series/host_share.csv and the loops' places carry a large one)
    block.per_device.update({d: ps for d, ps in amounts.items()
                             if d in of or len(loop_of) <= PER_DEVICE_MAX})
    judged_rows = [(w.window, pw) for w in windows for pw in w.places
                   if pw.place in judged and pw.beyond_tolerance is not None]
    block.windows_judged = len({w for w, _ in judged_rows})
    block.windows_beyond = len({w for w, pw in judged_rows if pw.beyond_tolerance})
    shared = [(w, pw) for w, pw in judged_rows if pw.added_share is not None]
    if shared:
        w, worst = max(shared, key=lambda x: x[1].added_share)
        block.worst_window, block.worst_place = w, worst.place
        block.worst_added_ms, block.worst_share = worst.added_ms, worst.added_share
        block.grade = worst.grade or "none"
    # the run's amount per request: over the device places; with wot-fleet loops, whose
    # requests are also their devices' places', over the devices (each the larger of the two)
    rows = amounts.items() if loop_of else block.per_place.items()
    dev_rows = [ps for key, ps in rows if (loop_of or key in judged) and ps.added_ms is not None
                and ps.r_ms]
    n = sum(ps.requests for ps in dev_rows)
    if n:
        block.added_ms = round(sum(ps.requests * ps.added_ms for ps in dev_rows) / n, 4)
        r = sum(ps.requests * ps.r_ms for ps in dev_rows) / n
        block.added_share = round(block.added_ms / r, 4) if r else None


def by_group(per_device: dict[str, PlaceShare], group_of: dict[str, str]) -> dict[str, PlaceShare]:
    """The devices' amounts folded per group (request-weighted)."""
    out: dict[str, PlaceShare] = {}
    members: dict[str, list[PlaceShare]] = {}
    for d, ps in per_device.items():
        # an engine device is not in the run's device records: its name is <group>-<i>
        members.setdefault(group_of.get(d) or d.rpartition("-")[0] or d, []).append(ps)
    for group in sorted(members):
        ds = members[group]
        n = sum(ps.requests for ps in ds)
        g = PlaceShare(requests=n)
        if n:
            g.r_ms = round(sum(ps.requests * (ps.r_ms or 0) for ps in ds) / n, 4)
            known = [ps for ps in ds if ps.added_ms is not None]
            m = sum(ps.requests for ps in known)
            if m:
                g.added_ms = round(sum(ps.requests * ps.added_ms for ps in known) / m, 4)
                g.added_share = round(g.added_ms / g.r_ms, 4) if g.r_ms else None
        out[group] = g
    return out


def describe_window(pw: PlaceWindow, where: str, v: VerdictParams) -> str:
    """"devices on core 1: the host added 1.95 ms per request (95 % bounds 1.52-2.38 ms), 27 %
    of their 7.2 ms mean response time (severe; tolerance 5 % of R): run-queue wait ..."""
    conf = f"{100 * v.confidence:g} %"
    share = (f", {100 * pw.added_share:.0f} % of the {pw.r_ms:.2f} ms mean response time"
             if pw.added_share is not None and pw.r_ms else "")
    grade = f" ({pw.grade}; tolerance {tolerance_text(v)})" if pw.grade else ""
    what = MEASURE_WORDS.get(pw.added_by or "", pw.added_by or "")
    own = f"{pw.own_ms:.2f}" if pw.own_ms is not None else "?"
    return (f"{where}: the host added {pw.added_ms:.2f} ms per request ({conf} bounds "
            f"{pw.added_low_ms:.2f}-{pw.added_high_ms:.2f} ms){share}{grade}, shown by {what} "
            f"beyond the run's own {own} ms per request")


MEASURE_WORDS = {"cpu_wait": "run-queue wait (the CPU)", "stretch": "busy-service stretch",
                 "wakeup": "wake-up delay", "queueing": "the queueing they caused (replayed on a "
                 "device of its own)", "send_lag": "send lag",
                 "loop_lag": "the engine loop's lag (read late, timer late)"}
