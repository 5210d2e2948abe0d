"""The host's share of the response time (cd-module/cd_module/hostshare.py) on synthetic
sub-interval measures: the amount beyond the run's own level, its confidence bound, the
grade, the tolerance; and the config's verdict.tolerance."""
from __future__ import annotations

import numpy as np
import pytest

from cd_module import hostshare
from cd_module.tolerance import from_config, parse_tolerance
from wotbench.rundir.evidence import (Antagonist, EvidenceParams, PlaceWindow, VerdictParams,
                                      WindowEvidence)

K = 10          # sub-intervals per window
S_MS = 5.0      # service time per request


def _inputs(wait_of_service: list[float], n_per_sub: int = 2, noise: float = 0.0,
            seed: int = 1) -> hostshare.Inputs:
    """One place ``core 1``; per window its run-queue wait per request is
    ``wait_of_service[w]`` × S (± ``noise`` of it per sub-interval)."""
    rng = np.random.default_rng(seed)
    nwin = len(wait_of_service)
    inp = hostshare.Inputs(nwin=nwin, k=K)
    n = np.full(nwin * K, float(n_per_sub))
    ratio = np.repeat(wait_of_service, K) * (1 + noise * rng.standard_normal(nwin * K))
    inp.requests["core 1"] = n
    inp.served["core 1"] = n
    inp.service_ms["core 1"] = n * S_MS
    inp.wait_ns["core 1"] = ratio * S_MS * n * 1e6
    return inp


def _windows(nwin: int, foreign: dict[int, float] = {}) -> list[WindowEvidence]:
    out = []
    for w in range(nwin):
        pw = PlaceWindow(place="core 1", requests=K * 2, cores=[1],
                         foreign_share=foreign.get(w, 0.0))
        ev = WindowEvidence(window=w, start_s=10.0 * w, end_s=10.0 * (w + 1), places=[pw])
        if w in foreign:
            ev.antagonists.append(Antagonist(core=1, pid=9, comm="x", owner_kind="host",
                                             share=foreign[w]))
        out.append(ev)
    return out


def _assess(inp, windows, r_ms: float = 6.0, v: VerdictParams | None = None):
    import pandas as pd
    edges = np.arange(inp.nwin + 1) * 10e9
    t = np.arange(inp.nwin * 20) * 0.5e9 + 0.25e9
    responses = pd.DataFrame({"device": "d0", "sent_ns": t, "rt_ms": r_ms})
    p = EvidenceParams(verdict=v or VerdictParams())
    return hostshare.assess(inp, windows, {"core 1"}, {"d0": "core 1"}, responses, edges, p)


def test_the_amount_is_the_wait_beyond_the_runs_own_level_with_a_bound():
    # own level 0.12 of S in the quiet windows; window 2 at 0.40 while an outside process ran
    inp = _inputs([0.12, 0.12, 0.40, 0.12], noise=0.05)
    ws = _windows(4, foreign={2: 0.45})
    block = _assess(inp, ws)
    pw = ws[2].places[0]
    assert pw.added_by == "cpu_wait"
    assert pw.own_ms == pytest.approx(0.12 * S_MS, rel=0.05)
    assert pw.added_ms == pytest.approx(0.28 * S_MS, rel=0.1)
    assert pw.added_low_ms < pw.added_ms < pw.added_high_ms
    assert pw.added_share == pytest.approx(pw.added_ms / 6.0, rel=1e-3)
    assert pw.grade == "severe" and pw.beyond_tolerance is True
    for w in (0, 1, 3):      # the run's own level: nothing added, within the tolerance
        q = ws[w].places[0]
        assert q.added_ms < 0.05 and q.beyond_tolerance is False and q.grade == "none"
    assert block.windows_beyond == 1 and block.worst_window == 2 and block.grade == "severe"
    assert block.per_device["d0"].added_ms == pytest.approx(pw.added_ms / 4, rel=0.1)
    assert block.per_place["core 1"].own_from == "cpu_wait: median of 3 quiet window(s)"


def _per_request(rng, nwin: int, added: dict[int, float] = {}, rate: float = 20.0,
                 level: float = 0.2, drift: float = 0.0) -> tuple[hostshare.Inputs, dict]:
    """A place ``core 1`` built request by request: per 1 s sub-interval Poisson(``rate``)
    requests, S ~ Exp(5 ms), each waiting ``level`` × S × Exp(1) of its own (the run's noise:
    a clean busy run's 0.12-0.3 S with a per-request spread as large as its mean), times
    1 + ``drift`` × N(0, 1) per window (the host drifting between windows); ``added[j]``: the
    mean extra wait (Exp) per request the host added in sub-interval j. Returns the inputs and
    the truth: the added wait per request of each window."""
    inp = hostshare.Inputs(nwin=nwin, k=K)
    n = rng.poisson(rate, nwin * K).astype(np.float64)
    wait, svc, extra = np.zeros(nwin * K), np.zeros(nwin * K), np.zeros(nwin * K)
    scale = 1 + drift * rng.standard_normal(nwin)
    for j in range(nwin * K):
        s_i = rng.exponential(S_MS, int(n[j]))
        a_i = rng.exponential(added[j], int(n[j])) if added.get(j) else np.zeros(int(n[j]))
        svc[j] = s_i.sum()
        extra[j] = a_i.sum()
        wait[j] = (level * scale[j // K] * s_i * rng.exponential(1.0, int(n[j]))).sum() + \
            extra[j]
    inp.requests["core 1"] = n
    inp.served["core 1"] = n
    inp.service_ms["core 1"] = svc
    inp.wait_ns["core 1"] = wait * 1e6
    truth = {w: float(extra[inp.sub(w)].sum() / n[inp.sub(w)].sum()) for w in range(nwin)}
    return inp, truth


def test_a_half_window_episode_well_beyond_the_tolerance_is_flagged():
    """Issue 31's miss: the host added ~2 ms per request in half of a window's seconds (1 ms
    per request over the window, 3x the tolerance of 5 % of 6 ms). The episode's shape in
    time is the kernel's measurement, not noise: the bound comes from the run's quiet
    windows, and the window is flagged; the quiet windows are not."""
    rng = np.random.default_rng(31)
    inp, truth = _per_request(rng, 4, added={j: 2.0 for j in range(2 * K + 5, 3 * K)})
    ws = _windows(4, foreign={2: 0.45})
    block = _assess(inp, ws)
    pw = ws[2].places[0]
    assert pw.added_by == "cpu_wait" and pw.added_ms == pytest.approx(truth[2], abs=0.25)
    assert pw.added_low_ms > 0.05 * 6.0 and pw.beyond_tolerance is True
    assert [ws[w].places[0].beyond_tolerance for w in (0, 1, 3)] == [False] * 3
    assert block.per_place["core 1"].noise_from.startswith(
        "cpu_wait: the run's own noise: 3 quiet window(s), 30 sub-intervals")
    assert block.per_place["core 1"].noise_from.endswith(
        "; a quiet window against the other quiet windows")
    # the same windows with no quiet window to measure the noise in: the window's own
    # sub-intervals bound it (its shape counts as noise), a wider interval, and it says so
    ws2 = _windows(4, foreign={w: 0.45 for w in range(4)})
    block2 = _assess(inp, ws2)
    wide = ws2[2].places[0]
    assert wide.added_high_ms - wide.added_low_ms > pw.added_high_ms - pw.added_low_ms
    assert "the window's own sample" in block2.per_place["core 1"].noise_from


def test_an_amount_within_the_runs_own_noise_is_not_flagged():
    """A point estimate beyond the tolerance that the run's own scatter could give with
    nothing added: 3 requests a second (the bound grows as 1/sqrt(N) with fewer requests)."""
    rng = np.random.default_rng(5)
    inp, truth = _per_request(rng, 4, added={j: 0.6 for j in range(2 * K, 3 * K)}, rate=3.0)
    ws = _windows(4, foreign={2: 0.2})
    _assess(inp, ws)
    pw = ws[2].places[0]
    assert pw.added_ms > 0.05 * 6.0 and pw.beyond_tolerance is False
    assert pw.added_low_ms <= 0.05 * 6.0 < pw.added_high_ms


def test_clean_runs_with_typical_scatter_raise_no_false_window():
    """200 clean runs of 4 windows (2 busy devices' 20 requests a second, their own wait's
    per-request spread as large as its mean, the host drifting 10 % between windows): no
    window beyond the default tolerance; and against a tolerance of ~0 the bound is beyond it
    in at most its 5 % of the windows (it is a 95 % bound)."""
    beyond = beyond0 = total = 0
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        inp, _ = _per_request(rng, 4, drift=0.1)
        ws = _windows(4)
        _assess(inp, ws)
        beyond += sum(bool(w.places[0].beyond_tolerance) for w in ws)
        ws0 = _windows(4)
        _assess(inp, ws0, v=VerdictParams(tolerance_ms=1e-9))
        beyond0 += sum(bool(w.places[0].beyond_tolerance) for w in ws0)
        total += 4
    assert beyond == 0
    assert beyond0 <= 0.05 * total


@pytest.mark.parametrize("drift", [0.0, 0.15])
def test_the_bound_is_honest_where_the_truth_is_known(drift):
    """Synthetic runs whose added wait per request is known: the 95 % one-sided bounds hold the
    truth in about 95 % of the episode windows (each side), whether the episode covers the
    whole window or half of it, and when the host drifts between windows (the quiet windows'
    overdispersion widens the bound; known from 4 quiet windows only, it covers 92 % at a 15 %
    drift, 97-98 % without drift: measured with these seeds)."""
    below = above = n = 0
    widths = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        first = 2 * K + (5 if seed % 2 else 0)        # half or all of window 2
        inp, truth = _per_request(rng, 5, added={j: rng.uniform(0.2, 2.0)
                                                 for j in range(first, 3 * K)}, drift=drift)
        ws = _windows(5, foreign={2: 0.3})
        _assess(inp, ws, r_ms=50.0)     # R large enough that no amount is capped at it
        pw = ws[2].places[0]
        below += pw.added_low_ms <= truth[2]
        above += pw.added_high_ms >= truth[2]
        widths.append(pw.added_high_ms - pw.added_low_ms)
        n += 1
    assert 0.90 <= below / n <= 0.995 and 0.90 <= above / n <= 0.995
    # and not honest by being useless: the 90 % interval of a window of ~200 requests whose
    # own wait scatters by ~1.4 ms per request is well under a millisecond
    assert np.median(widths) < 0.8


def test_the_sample_measures_bound_comes_from_the_quiet_requests_too():
    """Busy stretch: a window whose first half of requests was stretched by 2 ms: flagged on
    the quiet requests' scatter (before: the window's own, which the episode widened)."""
    rng = np.random.default_rng(7)
    inp = _inputs([0.12, 0.12, 0.12, 0.12], noise=0.02)
    inp.stretch_ms["core 1"] = [list(rng.exponential(0.1, 2) + (2.0 if 2 * K <= i < 2 * K + 5
                                                                 else 0.0))
                                for i in range(4 * K)]
    ws = _windows(4, foreign={2: 0.3})
    block = _assess(inp, ws)
    pw = ws[2].places[0]
    assert pw.added_by == "stretch" and pw.added_ms == pytest.approx(1.0, abs=0.1)
    assert pw.beyond_tolerance is True
    assert "stretch: the run's own noise: 3 quiet window(s) of 60 requests" in \
        block.per_place["core 1"].noise_from


def test_grades_and_a_tolerance_in_ms():
    v = VerdictParams()
    assert [hostshare.grade_of(x, v) for x in (0.0, 0.009, 0.01, 0.05, 0.149, 0.15, 2.0)] == \
        ["none", "none", "mild", "moderate", "moderate", "severe", "severe"]
    # the same 0.28 x 5 ms = 1.4 ms added: beyond a 1 ms tolerance, within a 2 ms one
    for tol, beyond in ((1.0, True), (2.0, False)):
        inp = _inputs([0.12, 0.40, 0.12], noise=0.02)
        ws = _windows(3, foreign={1: 0.45})
        block = _assess(inp, ws, v=VerdictParams(tolerance_ms=tol))
        assert ws[1].places[0].beyond_tolerance is beyond and block.tolerance == f"{tol:g} ms"


def test_without_a_quiet_window_the_own_level_is_the_quietest_capped():
    inp = _inputs([0.5, 0.9, 0.5], noise=0.01)
    ws = _windows(3, foreign={0: 0.3, 1: 0.6, 2: 0.3})
    block = _assess(inp, ws)
    # the quietest window's 0.5 is above the cap 0.3 of S: the cap is the own level
    assert ws[0].places[0].own_ms == pytest.approx(0.3 * S_MS, rel=0.02)
    assert block.per_place["core 1"].own_from == "cpu_wait: no quiet window: the cap 0.3 of S"
    assert ws[1].places[0].added_ms == pytest.approx(0.6 * S_MS, rel=0.05)


def test_the_largest_overlapping_measure_is_the_amount_never_their_sum():
    inp = _inputs([0.12, 0.12, 0.30, 0.12], noise=0.02)
    # busy stretch 2 ms per request in window 2 (steal: no run-queue wait), 0.1 ms elsewhere
    inp.stretch_ms["core 1"] = [[2.0 + 0.1 * (i % 3)] * 2 if 2 * K <= i < 3 * K else [0.1] * 2
                                for i in range(4 * K)]
    ws = _windows(4, foreign={2: 0.3})
    _assess(inp, ws)
    pw = ws[2].places[0]
    assert pw.added_by == "stretch" and pw.added_ms == pytest.approx(2.0, abs=0.1)


@pytest.mark.parametrize("raw, share, ms", [
    (0.05, 0.05, None), ("10 %", 0.10, None), ("0.5 ms", 0.05, 0.5), ("2ms", 0.05, 2.0)])
def test_verdict_tolerance_forms(raw, share, ms):
    v = from_config({"tolerance": raw})
    assert v.tolerance_share == pytest.approx(share) and v.tolerance_ms == ms


@pytest.mark.parametrize("raw, msg", [
    (5, "0 < x < 1"), (True, "expected"), ("5 s", "expected"), ("0 ms", "> 0"),
    ("150 %", "(0, 100)")])
def test_verdict_tolerance_refuses_bad_values(raw, msg):
    with pytest.raises(ValueError, match=msg):
        parse_tolerance(raw)


def test_the_queue_replay_serves_each_request_in_exactly_its_service_time():
    arr = np.array([0.0, 1.0, 2.0, 10.0])
    s = np.array([3.0, 3.0, 3.0, 1.0])
    # one worker: 0-3, 3-6, 6-9, 10-11; two workers: 0-3, 1-4, 3-6, 10-11
    assert list(hostshare.replay_ends(arr, s, 1)) == [3.0, 6.0, 9.0, 11.0]
    assert list(hostshare.replay_ends(arr, s, 2)) == [3.0, 4.0, 6.0, 11.0]


def test_the_knock_on_of_a_stretched_request_is_the_queueings_amount():
    """A request stretched by 4 ms delays the two queued behind it: the queueing source sees
    4 ms on each of the three, the per-request stretch only on the first."""
    inp = _inputs([0.12, 0.12, 0.12])
    q = [[0.1, 0.1] for _ in range(3 * K)]
    for i in range(K, 2 * K):
        q[i] = [4.1, 4.1]
    inp.queue_ms["core 1"] = q
    inp.stretch_ms["core 1"] = [[0.1, 0.1] if not K <= i < 2 * K else [4.1, 0.1]
                                for i in range(3 * K)]
    ws = _windows(3, foreign={1: 0.3})
    _assess(inp, ws)
    pw = ws[1].places[0]
    assert pw.added_by == "queueing" and pw.added_ms == pytest.approx(4.0, abs=0.01)
    assert pw.own_ms == pytest.approx(0.1)


def test_devices_fold_into_their_groups_request_weighted():
    from wotbench.rundir.evidence import PlaceShare
    per = {"a-0": PlaceShare(requests=100, r_ms=6.0, added_ms=1.0),
           "a-1": PlaceShare(requests=300, r_ms=10.0, added_ms=2.0),
           "b-0": PlaceShare(requests=50, r_ms=4.0)}
    g = hostshare.by_group(per, {"a-0": "a", "a-1": "a", "b-0": "b"})
    assert g["a"].requests == 400 and g["a"].r_ms == 9.0 and g["a"].added_ms == 1.75
    assert g["a"].added_share == pytest.approx(1.75 / 9.0, abs=1e-4)
    assert g["b"].added_ms is None and g["b"].r_ms == 4.0


def test_short_windows_are_quiet_only_when_their_span_is():
    """2 s windows, the process scan once in 5 s: a window without a scan sample inside a span
    with an outside process is not one of the run's own."""
    ws = _windows(10, foreign={2: 1.2, 7: 0.3})
    for w in ws:
        w.end_s = w.start_s = 2.0 * w.window
        w.end_s += 2.0
    q = hostshare._quiet(ws, VerdictParams())
    # spans 0-10 s (windows 0-4) and 10-20 s (5-9) both had an outside process
    assert not any(q[("core 1", w)] for w in range(10))
    q2 = hostshare._quiet(_windows(4, foreign={2: 0.5}), VerdictParams())
    assert [q2[("core 1", w)] for w in range(4)] == [True, True, False, True]


def test_an_amount_beyond_the_tolerance_that_the_bound_does_not_confirm_is_said():
    from cd_module.verdict import _unconfirmed
    from wotbench.rundir.evidence import EvidenceBlock
    pw = PlaceWindow(place="core 1", requests=200, r_ms=7.4, added_ms=1.46, added_low_ms=0.03,
                     added_high_ms=2.9, added_share=0.197, grade="severe",
                     beyond_tolerance=False)
    within = PlaceWindow(place="core 1", requests=200, r_ms=7.4, added_ms=0.2,
                         added_low_ms=0.0, added_high_ms=0.5, added_share=0.027,
                         grade="mild", beyond_tolerance=False)
    from wotbench.rundir.evidence import HostShare, PlaceShare

    def block(noise_from: str) -> EvidenceBlock:
        return EvidenceBlock(windows=[
            WindowEvidence(window=0, start_s=0, end_s=10, places=[within]),
            WindowEvidence(window=1, start_s=10, end_s=20, places=[pw])],
            host_share=HostShare(tolerance="5 % of R",
                                 per_place={"core 1": PlaceShare(noise_from=noise_from)}))
    head = ("10-20 s, core 1: the host added 1.46 ms per request (19.7 % of R, severe), "
            "beyond the tolerance, but its 95 % bounds 0.03-2.90 ms do not confirm it ")
    assert _unconfirmed(block("cpu_wait: the run's own noise: 2 quiet window(s), 20 "
                              "sub-intervals of 200 requests")) == [
        head + "(it is within the run's own noise): not flagged"]
    # a bound from the window's own sample is not said to be the run's noise
    assert _unconfirmed(block(f"cpu_wait: {hostshare.WINDOW_NOISE}")) == [
        head + "(the window's own sample is too uncertain: no quiet windows measured the run's "
        "noise): not flagged"]
