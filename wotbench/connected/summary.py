"""A connected run's summary.json (CONTRACTS §7): the same :class:`Summary` every run writes, so
the report, ``wotbench sweep`` and the validation tools read it unchanged. Its requests are the
applications' RPCs (``overall``: outcomes and the round trip, app send → reply), the
``connected`` block carries the rest (:mod:`wotbench.connected.analysis`); the blocks of the
CoAP path that do not apply (GE integrity, R_d, the CD node) say so in their text.

The verdict, in the words of issue 30: a device engine that falls behind its connections, an
application that sent late, or a testbed process that waited on a run queue are the testbed's
distortion (``contention``); a connection the testbed itself lost is ``testbed_loss``; what the
server did (closed, reset, relayed late, lost a reply) is the system's, reported, not flagged."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis.stats import quantiles_of
from wotbench.connected.events import event_reason
from wotbench.connected.rpc_outcomes import judged_counts
from wotbench.rundir.connected_block import ConnectedBlock
from wotbench.rundir.evidence import EvidenceParams
from wotbench.rundir.summary import (AnalysisParams, Checks, ContentionBlock, DecompStats,
                                     Decomposition, DeviceRd, FlaggedWindow, GeIntegrityBlock,
                                     GeRule, JoinCounters, OutcomeRates, Outcomes, Overall,
                                     RdBlock, RdStats, ResponseTimes, RtStats, RunBlock, Summary,
                                     Verdict)

NOT_COAP = ("not applicable: a connected run (issue 30) has no gateway emulator requests to "
            "CoAP devices; see summary.json connected")
ANALYSIS_VERSION = 1


def _overall(b: ConnectedBlock, rtt_ms: np.ndarray, sched_ms: np.ndarray,
             duration_s: float) -> Overall:
    r = b.rpc
    o = r.outcomes if r else {}
    n = sum(o.values())
    outc = Outcomes(**judged_counts(o, r.unsent_lost if r else 0))
    rate = {k: (v / n if n else None) for k, v in outc.model_dump().items()}
    sent = n - outc.unsent
    # throughput: answered RPCs per second of the measured window; offered: scheduled ones
    return Overall(requests=n, sent=sent, outcomes=outc, rates=OutcomeRates(**rate),
                   loss_rate_of_sent=(sent - outc.ok) / sent if sent else None,
                   throughput_rps=r.answered_per_s if r else None,
                   offered_rps=(r.offered_per_s if r.offered_per_s is not None else r.rpc_per_s)
                   if r else None, devices=b.devices,
                   duration_s=duration_s,
                   response_time_ms=ResponseTimes(from_sent=quantiles_of(RtStats, rtt_ms),
                                                  from_scheduled=quantiles_of(RtStats, sched_ms)))


def _window_flags(sched: pd.DataFrame, rpcs: pd.DataFrame, window_s: float, median_rt_ms: float,
                  limit: float) -> list[FlaggedWindow]:
    """Windows where a testbed component's run-queue wait per answered RPC exceeds ``limit`` of
    the run's median round trip (the device rule's wait_of_service, on the RPC's scale)."""
    if not len(sched) or not len(rpcs) or not median_rt_ms:
        return []
    tb = sched[sched["role"] == "testbed"].copy()
    tb["w"] = (tb["t_s"] // window_s).astype(int)
    wait_s = tb.groupby(["w", "component"])["wait_s"].sum()
    ok = rpcs.assign(w=(rpcs["t_s"] // window_s).astype(int)).groupby("w")["ok"].sum()
    out = []
    for (w, comp), secs in wait_s.items():
        n = int(ok.get(w, 0))
        if n < EvidenceParams().min_requests:
            continue
        per_rpc_ms = secs * 1e3 / n
        if per_rpc_ms > limit * median_rt_ms:
            out.append(FlaggedWindow(
                start_s=w * window_s, end_s=(w + 1) * window_s, shown_by=["runqueue_wait"],
                evidence=[f"{comp} waited on a run queue {secs * 1e3:.0f} ms in this window: "
                          f"{per_rpc_ms:.2f} ms per answered RPC, > {limit:.0%} of the median "
                          f"round trip {median_rt_ms:.2f} ms"]))
    merged: dict[float, FlaggedWindow] = {}
    for f in out:   # one window, several components: one entry with every sentence
        if f.start_s in merged:
            merged[f.start_s].evidence.extend(f.evidence)
        else:
            merged[f.start_s] = f
    return [merged[k] for k in sorted(merged)]


def judge(b: ConnectedBlock, tolerance: float, think_min_ms: float,
          flagged: list[FlaggedWindow], params: AnalysisParams
          ) -> tuple[Verdict, ContentionBlock]:
    r = b.rpc
    reasons: list[str] = []
    notes: list[str] = []
    median = r.round_trip.p50_ms if r else None
    if r and r.send_lag.p99_ms is not None and r.send_lag.p99_ms > max(1.0, tolerance * think_min_ms):
        reasons.append(f"the applications sent late: send lag p99 {r.send_lag.p99_ms:.2f} ms")
    if r and median and r.engine_part.p99_ms is not None and \
            r.engine_part.p99_ms > tolerance * median:
        reasons.append(f"the engines fell behind their devices: their own part of the round trip "
                       f"p99 {r.engine_part.p99_ms:.2f} ms > {tolerance:.0%} of the median round "
                       f"trip {median:.2f} ms")
    late_events = event_reason(b.events)
    if late_events:
        reasons.append(late_events)
    elif b.events and b.events.send_lag.p99_ms is not None:
        notes.append(f"the devices' upstream events went out on their schedule: send lag "
                     f"(sent − due) p99 {b.events.send_lag.p99_ms:.3f} ms <= "
                     f"{b.events.rule_ms:g} ms (the open-loop applications' rule)")
    limit = params.evidence.wait_of_service
    for s in b.sched:
        if s.role == "testbed" and median and s.wait_per_rpc_ms is not None and \
                s.wait_per_rpc_ms > limit * median:
            reasons.append(f"{s.component} waited on a run queue {s.runqueue_s:.2f} s over the "
                           f"test ({s.wait_per_rpc_ms:.3f} ms per RPC, > {limit:.0%} of the median "
                           f"round trip {median:.2f} ms)")
    if flagged:
        reasons.append(f"{len(flagged)} window(s) of {params.contention.window_s:g} s where a "
                       f"testbed process waited on a run queue more than {limit:.0%} of the "
                       f"median round trip per RPC (contention windows in the report)")
    missing = {"thread_runqueue_wait": b.sched_missing} if b.sched_missing else {}
    if missing:
        notes.append(f"no kernel run-queue evidence: {b.sched_missing}")
    contention = ContentionBlock(
        status="detected" if reasons else "none", cd_status="not_checked",
        reason="; ".join(reasons) if reasons else
        "the engines' own stamps, the applications' and the devices' events' send lag and the "
        "testbed processes' run-queue wait stayed within the tolerance", evidence_missing=missing,
        params=params.contention, flagged_windows=flagged, windows_flagged=len(flagged),
        tolerance=f"{tolerance:.0%}",
        # the testbed's part of the round trip (the engines' own stamps), per RPC and as a
        # share of the mean round trip: the sweep's "host added" columns
        added_ms=r.engine_part.mean_ms if r else None,
        added_share=(r.engine_part.mean_ms / r.round_trip.mean_ms
                     if r and r.engine_part.mean_ms is not None and r.round_trip.mean_ms
                     else None))
    lost = {k: v for k, v in b.testbed_loss.items() if v}
    invalid = []
    if not b.engines or not b.attached_all:
        invalid.append("not every device attached" if not b.attached_all
                       else "no engine wrote its files")
    elif r is None or not r.outcomes.get("ok"):
        invalid.append("no RPC answered or the applications wrote no files")
    if r:
        if r.replied_not_received:
            notes.append(f"{r.replied_not_received} RPC(s) timed out although their device sent "
                         f"the reply ({r.late_replies} replies came after their timeout, the rest "
                         "never): lost or delayed between the server and the applications "
                         "(the system's)")
        if r.outcomes.get("overflow"):
            notes.append(f"{r.outcomes['overflow']} RPC(s) of the open-loop schedule were not "
                         "sent: their application already had applications.max_outstanding "
                         "RPCs unanswered (the server fell behind the offered rate: the "
                         "system's; the load it got was below the configured rate)")
        if r.not_delivered:
            notes.append(f"{r.not_delivered} RPC(s) timed out without reaching their device "
                         "(the server did not deliver them: the system's)")
    ev = b.events
    if ev and ev.unlogged:
        notes.append(f"{ev.unlogged} of the devices' {ev.scheduled} upstream events beyond the "
                     "rows reserved were counted and put in the engines' send-lag histogram, "
                     "not logged row by row")
    if ev and ev.outcomes.get("unsent_down"):
        notes.append(f"{ev.outcomes['unsent_down']} upstream event(s) were due while their "
                     "device's connection was down: not sent (see the disconnects)")
    if b.disconnects.server_closed + b.disconnects.reset + b.disconnects.protocol:
        notes.append(f"the server ended connections: {b.disconnects.model_dump()} (the system's)")
    if invalid:
        status = "invalid"
    elif lost:
        status = "testbed_loss"
        reasons.insert(0, f"the testbed lost connections or RPCs: {lost}")
    elif reasons:
        status = "contention"
    else:
        status = "trustworthy"
    verdict = Verdict(status=status, reasons=invalid + reasons + notes,
                      exit_code=0 if status == "trustworthy" else 3,
                      checks=Checks(data="invalid" if invalid else "ok", ge="not_checked",
                                    contention=contention.status,
                                    loss="testbed_loss" if lost else "none"))
    return verdict, contention


def build(b: ConnectedBlock, series: dict[str, pd.DataFrame], rtt_ms: np.ndarray,
          sched_ms: np.ndarray, *, name: str, run_dir: str, test_start_ns: int,
          duration_s: float, interrupted: bool, tolerance: float, think_min_ms: float,
          device_names: Optional[list[str]] = None) -> Summary:
    params = AnalysisParams()
    overall = _overall(b, rtt_ms, sched_ms, duration_s)
    median = overall.response_time_ms.from_sent.p50_ms
    flagged = _window_flags(series.get("connected_sched", pd.DataFrame()),
                            series.get("connected_rpc_over_time", pd.DataFrame()),
                            params.contention.window_s, median or 0,
                            params.evidence.wait_of_service)
    verdict, contention = judge(b, tolerance, think_min_ms, flagged, params)
    ge = params.ge.model_dump(exclude={"cdf_points"})
    empty_dec = Decomposition(network_stack=DecompStats(), queueing=DecompStats(),
                              service=DecompStats())
    return Summary(
        run=RunBlock(name=name, run_id=run_dir.rstrip("/").rsplit("/", 1)[-1], run_dir=run_dir,
                     backend="process", test_start_mono_ns=test_start_ns,
                     duration_s=duration_s, interrupted=interrupted,
                     devices=device_names or [], analysis_version=ANALYSIS_VERSION,
                     params=params),
        overall=overall,
        ge_integrity=GeIntegrityBlock(rule=GeRule(**ge, text=NOT_COAP), interrupted=interrupted),
        rd=RdBlock(definition=NOT_COAP, requests_with_s=0,
                   overall=DeviceRd(rd=RdStats(), decomposition_ms=empty_dec),
                   join=JoinCounters(log_rows=0, matched=0, unmatched_log_rows=0,
                                     ok_requests=overall.outcomes.ok, ok_requests_matched=0)),
        contention=contention, verdict=verdict, connected=b)
