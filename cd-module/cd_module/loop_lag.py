"""The kernel-evidence input of the wot-fleet engines (issue 29): rule ``loop_lag``.

An engine hosts thousands of devices on one event loop per core, so the devices' CPU wait (the
``cpu_wait`` rule of :mod:`cd_module.evidence`) no longer says whether a device was
served on time: the loop is one thread for all of them. The engine stamps each request instead:
the kernel's arrival, when the loop read it, when its service was due to end and when it did
(docs/CONTRACTS.md §3b). Per window of the evidence grid and per loop (place
``fleet <engine> loop <k>``), :func:`add_places` adds the loop's requests, p99 read lag, p99
timer lateness and late share to the evidence windows, and :func:`add_flags` flags the window
when more than ``loop_max_late_share`` of them were read or ended more than ``loop_lag_ms``
late (one-sided binomial test at ``loop_alpha``): an engine that falls behind its devices is the
testbed's distortion, as a GE that sends late is. The verdict takes the flag like any other
(:func:`cd_module.verdict.combine`). The same per-request lags are the host share's
``loop_lag`` source (:mod:`cd_module.hostshare`): how many ms per request the loop added beyond
its own level, as a share of its devices' R.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.stats import binom

from wotbench.rundir.evidence import EvidenceParams, Flag, PlaceWindow, WindowEvidence


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
    devices: frozenset[str] = frozenset()    # the loop's devices (their R is the loop's R)

    def added_ms(self) -> np.ndarray:
        """What the loop added to each request: read late plus timer late (a missing stamp or
        a busy service: that part 0), the host share's per-request sample."""
        return np.clip(np.nan_to_num(self.read_lag_ms), 0, None) + \
            np.clip(np.nan_to_num(self.timer_late_ms), 0, None)


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


def add_places(windows: list[WindowEvidence], loops: dict[str, LoopLags], edges_ns: np.ndarray,
               p: EvidenceParams) -> None:
    """Each loop's place in every window (``edges_ns``: the windows' edges, absolute ns)."""
    for place, lg in loops.items():
        idx = np.searchsorted(edges_ns, lg.arrival_ns, side="right") - 1
        late = (lg.read_lag_ms > p.loop_lag_ms) | (lg.timer_late_ms > p.loop_lag_ms)
        for i, w in enumerate(windows):
            sel = idx == i
            pw = PlaceWindow(place=place, requests=int(sel.sum()))
            if pw.requests:
                pw.read_lag_p99_ms = _p99(lg.read_lag_ms[sel])
                pw.timer_late_p99_ms = _p99(lg.timer_late_ms[sel])
                pw.late_share = round(float(late[sel].mean()), 4)
            w.places.append(pw)


def add_flags(windows: list[WindowEvidence], loops: dict[str, LoopLags], p: EvidenceParams
              ) -> None:
    for w in windows:
        for pw in w.places:
            if pw.place in loops:
                f = flag(pw, p)
                if f is not None:
                    w.flags.append(f)
