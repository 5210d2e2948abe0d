"""A valid ``Summary`` (the summary.json model) with chosen facts, for tests of the readers
(sweep report, capacity search, validation) that need many runs without running the analysis:
it goes through the same model the analysis writes, so it cannot drift from it."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir import AnalysisParams, Summary
from wotbench.rundir.summary import (Baseline, CdPhaseRd, CdRd, ContentionBlock, DecompStats,
                                     Decomposition, DeviceRd, FlaggedWindow, GeIntegrity,
                                     GeIntegrityBlock, GeRule, JoinCounters, LagStats,
                                     MonitorBlock, OutcomeRates, Outcomes, Overall, RdBlock,
                                     RdStats, ResponseTimes, RitStats, RtStats, RunBlock, Verdict,
                                     Checks)

CONTENTION_OF = {"contention": "detected"}


def make_summary(*, name: str = "t", devices: int = 5, duration_s: float = 10.0,
                 offered_rps: float = 50.0, throughput_rps: Optional[float] = None,
                 rt_p50_ms: float = 5.0, rt_mean_ms: Optional[float] = None,
                 rt_p95_ms: Optional[float] = None, rt_p99_ms: Optional[float] = None,
                 verdict: str = "trustworthy", reasons: Optional[list[str]] = None,
                 ge_kept_up: bool = True, late_share: float = 0.0, ks_tol: float = 0.0,
                 lag_p99_ms: float = 0.01, rd_devices: Optional[float] = 0.1,
                 rd_cd_calibration: Optional[float] = 0.05, rd_cd_test: Optional[float] = 0.05,
                 contention: Optional[str] = None, flagged_windows: tuple = (),
                 host_cpu_busy_pct: Optional[float] = None, ok_share: float = 1.0,
                 timeouts: int = 0) -> Summary:
    requests = int(offered_rps * duration_s)
    ok = int(round(requests * ok_share)) - timeouts
    throughput_rps = ok / duration_s if throughput_rps is None else throughput_rps
    rt = RtStats(count=ok, mean_ms=rt_mean_ms or rt_p50_ms * 1.1, p50_ms=rt_p50_ms,
                 p90_ms=(rt_p95_ms or rt_p50_ms * 2) * 0.9, p95_ms=rt_p95_ms or rt_p50_ms * 2,
                 p99_ms=rt_p99_ms or rt_p50_ms * 3, p999_ms=rt_p50_ms * 4, max_ms=rt_p50_ms * 5)
    oc = Outcomes(ok=ok, error=requests - ok - timeouts, timeout=timeouts)
    rates = OutcomeRates(**{k: v / requests for k, v in oc.model_dump().items()}) if requests \
        else OutcomeRates()
    overall = Overall(requests=requests, sent=requests, outcomes=oc, rates=rates,
                      loss_rate_of_sent=timeouts / requests if requests else None,
                      offered_rps=offered_rps, throughput_rps=throughput_rps, devices=devices,
                      duration_s=duration_s, response_time_ms=ResponseTimes(from_sent=rt,
                                                                            from_scheduled=rt))
    ge = GeIntegrity(sent=requests, expected_rit=RitStats(), submitted_rit=RitStats(),
                     ks_tol=ks_tol, lag_ms=LagStats(p99=lag_p99_ms), late_share=late_share,
                     early_share=0.0, kept_up=ge_kept_up, requests=requests, interrupted=False)
    dec = Decomposition(network_stack=DecompStats(), queueing=DecompStats(), service=DecompStats())
    cd = CdRd(calibration=CdPhaseRd(p50=rd_cd_calibration), test=CdPhaseRd(p50=rd_cd_test),
              device="cd-node") if rd_cd_test is not None else None
    status = contention or CONTENTION_OF.get(verdict, "none")
    p = AnalysisParams()
    return Summary(
        run=RunBlock(name=name, run_dir=".", test_start_mono_ns=1, duration_s=duration_s,
                     interrupted=False, devices=[f"cpu-{i}" for i in range(devices)],
                     ges=["ge-0"], analysis_version=1, params=p),
        overall=overall,
        ge_integrity=GeIntegrityBlock(
            rule=GeRule(late_threshold_ms=1.0, max_late_share=0.01, max_ks=0.05, text="fake"),
            kept_up=ge_kept_up, interrupted=False, per_ge={"ge-0": ge}),
        rd=RdBlock(definition="fake", requests_with_s=ok,
                   overall=DeviceRd(rd=RdStats(p50=rd_devices), decomposition_ms=dec),
                   join=JoinCounters(log_rows=0, matched=0, unmatched_log_rows=0, ok_requests=ok,
                                     ok_requests_matched=0), cd=cd),
        contention=ContentionBlock(
            status=status, params=p.contention,
            baseline=Baseline(samples=40, lost=0, median_rd=rd_cd_calibration),
            flagged_windows=[FlaggedWindow(start_s=a, end_s=b) for a, b in flagged_windows],
            windows_flagged=len(flagged_windows), onset_s=flagged_windows[0][0] if flagged_windows else None),
        verdict=Verdict(status=verdict, reasons=reasons if reasons is not None else
                        ([] if verdict == "trustworthy" else [f"fake {verdict}"]),
                        exit_code=0 if verdict == "trustworthy" else 3,
                        checks=Checks(data="ok", ge="kept_up" if ge_kept_up else "bottleneck",
                                      contention=status)),
        monitor=MonitorBlock(host_cpu_busy_pct=host_cpu_busy_pct))
