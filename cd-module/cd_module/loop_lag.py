"""The kernel-evidence input of the wot-fleet engines (issue 29): rule ``loop_lag``.

An engine hosts thousands of devices on one event loop per core, so the devices' CPU wait (the
``cpu_wait`` rule of :mod:`cd_module.evidence`) no longer says whether a device was
served on time: the loop is one thread for all of them. The engine stamps each request instead:
the kernel's arrival, when the loop read it, when its service was due to end and when it did
(docs/CONTRACTS.md §3b). Per window of the evidence grid and per loop (place
``fleet <engine> loop <k>``), :func:`apply` adds the loop's requests, p99 read lag, p99 timer
lateness and late share to the evidence block, and flags the window when more than
``loop_max_late_share`` of them were read or ended more than ``loop_lag_ms`` late (one-sided
binomial test at ``loop_alpha``): an engine that falls behind its devices is the testbed's
distortion, as a GE that sends late is. The verdict takes the flag like any other
(:func:`cd_module.verdict.combine`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.stats import binom

from wotbench.rundir.evidence import EvidenceBlock, EvidenceParams, Flag, PlaceWindow


@dataclass(frozen=True)
class LoopLags:
    """One engine loop's requests (``wotbench.analysis.fleet``): when each arrived (absolute
    CLOCK_MONOTONIC ns), its read lag and its sleep service's timer lateness (ms; NaN: not a
    sleep service, or no kernel stamp)."""
    arrival_ns: np.ndarray
    read_lag_ms: np.ndarray
    timer_late_ms: np.ndarray
    cores: tuple[int, ...] = ()
    engine: str = ""


def _p99(v: np.ndarray) -> Optional[float]:
    v = v[np.isfinite(v)]
    return round(float(np.quantile(v, 0.99)), 4) if len(v) else None


def _ms(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.2f} ms"


def flag(pw: PlaceWindow, p: EvidenceParams) -> Optional[Flag]:
    """A loop that read or ended more of its requests late than the GE rule allows."""
    n = pw.requests
    late = int(round((pw.late_share or 0.0) * n))
    if n < p.min_requests or not late or \
            binom.sf(late - 1, n, p.loop_max_late_share) >= p.loop_alpha:
        return None
    return Flag(rule="loop_lag", place=pw.place, text=(
        f"{pw.place} handled {late} of its {n} requests more than {p.loop_lag_ms:g} ms late "
        f"({100 * late / n:.0f} %; p99 read lag {_ms(pw.read_lag_p99_ms)}, p99 timer lateness "
        f"{_ms(pw.timer_late_p99_ms)}): the engine fell behind its devices"))


def apply(block: EvidenceBlock, loops: dict[str, LoopLags], test_start_ns: int) -> EvidenceBlock:
    """Each loop's place in every test window of ``block`` (the evidence grid), and its flags."""
    p = block.params
    if not loops or not block.windows:
        return block
    if block.sources.device_logs == "no device logs":   # the engines' logs are the devices'
        block.sources.device_logs = None
    edges = test_start_ns + np.array([w.start_s for w in block.windows] +
                                     [block.windows[-1].end_s]) * 1e9
    for place, lg in loops.items():
        idx = np.searchsorted(edges, lg.arrival_ns, side="right") - 1
        late = (lg.read_lag_ms > p.loop_lag_ms) | (lg.timer_late_ms > p.loop_lag_ms)
        for i, w in enumerate(block.windows):
            sel = idx == i
            pw = PlaceWindow(place=place, requests=int(sel.sum()))
            if pw.requests:
                pw.read_lag_p99_ms = _p99(lg.read_lag_ms[sel])
                pw.timer_late_p99_ms = _p99(lg.timer_late_ms[sel])
                pw.late_share = round(float(late[sel].mean()), 4)
            w.places.append(pw)
            f = flag(pw, p)
            if f is not None:
                w.flags.append(f)
    return block
