"""The ``load`` block of summary.json (``wotbench.rundir.load``): throughput, latency, timeouts
and requests per client of the main GEs' counted requests, with what the loop (open or closed)
means for those latencies. The closed loop's warm-up / cool-down rows were set apart when the
run was loaded (``GeData.marked_requests``); here they are only counted."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.loading import RunData
from wotbench.analysis.stats import fnum, quantiles_of
from wotbench.rundir.load import ClientFairness, LatencyStats, LoadBlock, LoadExcluded

# a closed loop whose equally-served clients (Jain's index x N) fall below this share of N did
# not apply the concurrency it was configured with: said in the verdict's notes and the report
MIN_REALISED_SHARE = 0.5

OPEN_NOTE = ("open loop: requests left at their scheduled instants whatever the answers, so the "
             "latency from the scheduled send has no coordinated omission (a late send does "
             "not hide the wait it caused); the latency from the actual send is R")
CLOSED_NOTE = ("closed loop: {n} clients, each waiting for its answer (then thinking) before "
               "its next request: while the server is slow it is sent fewer requests, so these "
               "latencies are what {n} such clients saw, not what an open stream of arrivals "
               "would see (coordinated omission); throughput is the figure of merit, and the "
               "open-loop run of the same study gives the schedule-based latency")


def fairness(client: np.ndarray, clients: int) -> Optional[ClientFairness]:
    """Requests per client 0..clients-1 (NaN rows: no client)."""
    c = client[~np.isnan(client)].astype(np.int64)
    if clients <= 0 or not len(c):
        return None
    per = np.bincount(c, minlength=clients).astype(np.float64)
    mean = float(per.mean())
    sq = float((per ** 2).sum())
    return ClientFairness(clients=len(per), min=int(per.min()), max=int(per.max()), mean=mean,
                          cv=fnum(float(per.std() / mean)) if mean else None,
                          jain=fnum(float(per.sum() ** 2 / (len(per) * sq))) if sq else None)


def shortfall(n_clients: int, per: Optional[ClientFairness], unanswered: int
              ) -> tuple[Optional[float], Optional[str]]:
    """(realised clients, the note when they fell far short of the configured ones)."""
    if per is None or per.jain is None or not n_clients:
        return None, None
    realised = per.jain * n_clients
    if realised >= MIN_REALISED_SHARE * n_clients:
        return realised, None
    return realised, (
        f"closed loop: {n_clients} clients configured, but the requests came from about "
        f"{realised:.0f} of them (Jain's index {per.jain:.3f} x {n_clients}; requests per "
        f"client min {per.min}, max {per.max}; {unanswered} clients never answered in the "
        "measured window): the figures describe that smaller concurrency. A ramp-up "
        "(gateways.ramp_up_s), a think time or retransmission lets the server admit them")


def _window(cl) -> float:
    """The measured window (s): warm-up end to cool-down start, or to when the clients stopped
    (every budget spent) if that came first."""
    end = cl.duration_ms - cl.cooldown_ms
    if cl.requests_per_client and 0 < cl.stopped_ms < end:
        end = cl.stopped_ms
    return (end - cl.warmup_ms) / 1e3


def load_block(run: RunData, req: pd.DataFrame) -> Optional[LoadBlock]:
    """None for a run without a main GE."""
    if not run.ges:
        return None
    closed = [g for g in run.ges if g.closed_loop]
    excluded = LoadExcluded()
    for g in run.ges:
        if g.marked_requests is not None:
            ph = g.marked_requests["phase"].astype(str)
            excluded.warmup += int((ph == "warmup").sum())
            excluded.cooldown += int((ph == "cooldown").sum())
    clients = [g.summary.clients for g in run.ges if g.summary.clients]
    n_clients = sum(clients) if clients else None
    think = select = None
    if closed:
        cl = closed[0].summary.closed_loop
        window = _window(cl)
        think = {"0": "none", "uniform": f"uniform {cl.think_a_us:g}..{cl.think_b_us:g} µs"}.get(
            cl.think, f"{cl.think} {cl.think_a_us:g} µs")
        select = cl.select
        note = CLOSED_NOTE.format(n=n_clients)
    else:
        window = run.duration_s
        note = OPEN_NOTE
    outcome = req["outcome"].to_numpy()
    ok = int((outcome == "ok").sum())
    timeouts = int((outcome == "timeout").sum())
    rt = req["rt_sent_ms"].to_numpy(np.float64)
    rt = rt[~np.isnan(rt)]
    n = len(req)
    per = fairness(req["client"].to_numpy(np.float64), n_clients or 0)
    budget: dict = {}
    if closed:
        answered = req["client"].to_numpy(np.float64)[outcome == "ok"]
        unanswered = (n_clients or 0) - len(np.unique(answered[~np.isnan(answered)]))
        realised, short = shortfall(n_clients or 0, per, unanswered)
        budget = dict(requests_per_client=cl.requests_per_client or None,
                      ramp_s=cl.ramp_ms / 1e3 or None,
                      clients_done=cl.clients_done if cl.requests_per_client else None,
                      realised_clients=fnum(realised) if realised is not None else None,
                      clients_unanswered=unanswered, concurrency_shortfall=short)
    return LoadBlock(
        loop="closed" if closed else "open", clients=n_clients, window_s=window, requests=n,
        throughput_rps=ok / window if window > 0 else 0.0, timeouts=timeouts,
        timeout_share=timeouts / n if n else None,
        latency_ms=quantiles_of(LatencyStats, rt),
        latency_stdev_ms=fnum(float(rt.std(ddof=1))) if len(rt) > 1 else None,
        latency_from_schedule_ms=None if closed else quantiles_of(
            LatencyStats, req["rt_sched_ms"].to_numpy(np.float64)),
        per_client=per, excluded=excluded, think=think, select=select, note=note, **budget)
