"""Assemble summary.json and series/*.csv from a loaded run (docs/CONTRACTS.md §7).

:func:`build` returns the :class:`~wotbench.rundir.Summary` model (the schema every reader
uses) and the series frames; :func:`write` puts both into the run directory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis import http_phases, notify_sink, notify_slo, sut_faults
from wotbench.analysis import blockwise as blkm
from cd_module import evidence as evid
from cd_module import verdict as cont
from wotbench.analysis import decomposition as decomp
from wotbench.analysis import dtls as dtlsm
from wotbench.analysis import fleet as fleetm
from wotbench.analysis.per_device import per_device_table
from wotbench.analysis import fleet_load
from wotbench.analysis import http_figures as httpm
from wotbench.analysis import ge_integrity as gei
from wotbench.analysis import http_proxy as proxy_http
from wotbench.analysis import killed
from wotbench.analysis import load_figures as loadm
from wotbench.analysis import loss as lossm
from wotbench.analysis import monitor as mon
from wotbench.analysis import sut_resources as sutm
from wotbench.analysis import observe as obsm
from wotbench.analysis import push_figures as pushm
from wotbench.analysis import push_merge as pushmerge
from wotbench.analysis import rd as rdm
from wotbench.analysis import responses as resp
from wotbench.analysis import resolved
from wotbench.analysis import slo_judge as sloa
from wotbench.rundir import AnalysisParams, RunDir, Summary
from wotbench.rundir import atomic
from wotbench.rundir.summary import (CdSplit, Checks, ContentionBlock, GeIntegrityBlock, GeRule, LossBlock,
                                     Overall, RunBlock, Verdict)

from wotbench.analysis.loading import RunData
from wotbench.workload import httpproxy
from wotbench.rundir.evidence import VerdictParams
from wotbench.rundir.values import json_clean

# 2: the kernel evidence (summary "evidence", contention "cd_status", "evidence_missing",
# "notes", flagged windows "shown_by"/"evidence"); version-1 summaries still read (all optional)
ANALYSIS_VERSION = 2
SEVERITY = {"trustworthy": 0, "ge_bottleneck": 1, "contention": 2, "testbed_loss": 3, "invalid": 4}


def _cd_samples(run: RunData, req: pd.DataFrame) -> pd.DataFrame:
    """CD probes with t_s (send time, s from the test start), phase, outcome, rt_ms, rd.

    ``req`` is the CD GE's requests, ``resp.combine_ge([run.cd_ge], run.test_start_ns)``.
    """
    codes = np.zeros(len(req), np.int64)
    s_ms = rdm.service_times_ms(req, codes, [run.cd.resources if run.cd else None])
    rd = rdm.rd_values(req, s_ms)
    t_ns = np.where(np.isnan(req["sent"].to_numpy()), req["sched"].to_numpy(),
                    req["sent"].to_numpy())
    t_s = t_ns / 1e9
    cal = run.run.calibration
    c0, c1 = (cal.start_mono_ns, cal.end_mono_ns) if cal else (None, None)
    if cal is not None and c1 > c0:
        lo, hi = (c0 - run.test_start_ns) / 1e9, (c1 - run.test_start_ns) / 1e9
        in_cal = (t_s >= lo) & (t_s < hi)
    else:
        run.warnings.append("run.json has no calibration window; CD probes sent before the "
                            "test start are used as the calibration baseline")
        in_cal = t_s < 0
    in_test = (t_s >= 0) & (t_s < run.duration_s)
    phase = np.where(in_cal, "calibration", np.where(in_test, "test", "other"))
    if run.cd is not None and run.cd.resources is not None and np.isnan(s_ms).all():
        run.warnings.append(f"no CD request path matches {run.cd.name}'s resource file")
    return pd.DataFrame({"t_s": t_s, "phase": phase, "outcome": req["outcome"].astype(str),
                         "rt_ms": req["rt_sent_ms"].to_numpy(), "rd": rd, "s_ms": s_ms})


def _cd_split(run: RunData, cd_req: pd.DataFrame, cd: pd.DataFrame, timeout_ms: float,
              p: AnalysisParams) -> Optional[CdSplit]:
    """R − S of the CD probes by place, per phase (None without the CD's device log)."""
    if run.cd is None or run.cd.log is None or run.cd_ge is None:
        return None
    salt = run.cd_ge.summary.salt
    salts = {run.cd_ge.ge_id: salt} if salt is not None else {}
    codes = np.zeros(len(cd_req), np.int64)
    matched, _ = rdm.join_device_logs(cd_req, codes, [run.cd], run.test_start_ns, timeout_ms,
                                      p.rd, salts)
    frame = decomp.split(cd_req, matched, cd["s_ms"].to_numpy())
    return decomp.cd_block(frame, cd["phase"].to_numpy()[frame["row"].to_numpy(np.int64)])


def _device_tables(run: RunData) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Every device's log and resource table by name, the CD node's included."""
    infos = list(run.devices.values()) + ([run.cd] if run.cd is not None else [])
    return ({d.name: d.log for d in infos if d.log is not None},
            {d.name: d.resources for d in infos if d.resources is not None})


def _ge_sends(req: pd.DataFrame, cd_req: Optional[pd.DataFrame], ge_block: GeIntegrityBlock,
              run: RunData) -> dict[str, evid.GeSends]:
    """Each GE's (the CD-GE's too) sends: absolute scheduled instants, lag, GE-rule tolerance."""
    out = {}
    blocks = {**ge_block.per_ge, "cd-ge": ge_block.cd_ge}
    frames = [(gid, req[req["ge"].astype(str) == gid]) for gid in ge_block.per_ge]
    if cd_req is not None:
        frames.append(("cd-ge", cd_req))
    for gid, df in frames:
        sent = df["sent"].to_numpy(np.float64)
        ok = np.isfinite(sent)
        sched = df["sched"].to_numpy(np.float64)[ok]
        b = blocks.get(gid)
        tol = b.tolerance_ms if b is not None else None
        out[gid] = evid.GeSends(sched_ns=sched + run.test_start_ns,
                                lag_ms=(sent[ok] - sched) / 1e6, tolerance_ms=tol)
    return out


def _answered(req: pd.DataFrame, codes: np.ndarray, names: list[str],
              cd_req: Optional[pd.DataFrame], run: RunData) -> pd.DataFrame:
    """The answered requests (device, sent_ns absolute, rt_ms): the R the host's share is of."""
    frames = []
    for df, dev in ((req, np.asarray(names, object)[codes] if len(codes) else np.zeros(0, object)),
                    (cd_req, None)):
        if df is None or not len(df):
            continue
        ok = (df["outcome"].astype(str) == "ok").to_numpy() & np.isfinite(
            df["sent"].to_numpy(np.float64))
        name = dev[ok] if dev is not None else (run.cd.name if run.cd else "cd-node")
        frames.append(pd.DataFrame({"device": name,
                                    "sent_ns": df["sent"].to_numpy(np.float64)[ok] + run.test_start_ns,
                                    "rt_ms": df["rt_sent_ms"].to_numpy(np.float64)[ok]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["device", "sent_ns", "rt_ms"])


def _evidence_params(p: AnalysisParams, v: Optional[VerdictParams]):
    """The evidence parameters with the config's ``verdict:`` (tolerance) in them."""
    if v is None:
        return p.evidence
    mine = v.model_dump(include={"tolerance_share", "tolerance_ms", "confidence"})
    return p.evidence.model_copy(update={"verdict": p.evidence.verdict.model_copy(update=mine)})


def _loss_reason(loss: LossBlock) -> str:
    c = loss.by_cause
    legs = ", ".join(f"{n} {what}" for n, what in (
        (c.to_device, "on the way to the devices"), (c.from_device, "on the way back"),
        (c.local_send, "in the GE's own sends"),
        (c.push_late_send, "sent late by starved pushing devices")) if n)
    return (f"the testbed lost {loss.testbed} of {loss.sent} requests "
            f"({loss.testbed_share:.2%}): {legs}; on {loss.testbed_devices} device(s), "
            f"the first at {loss.first_testbed_loss_s:.1f} s. WoTbench itself lost them, not the "
            f"system under test (losses the configured impairments caused are not counted)")


def _verdict(run: RunData, overall: Overall, ge_block: GeIntegrityBlock,
             contention: ContentionBlock, loss: Optional[LossBlock]) -> Verdict:
    invalid, flags, notes = [], [], []
    if loss is not None and loss.testbed:
        flags.append(("testbed_loss", _loss_reason(loss)))
    for f in run.run.failures:
        invalid.append(f"component {f.component} failed: {f.what}")
    if overall.requests == 0:
        invalid.append("no requests in the GE logs nor in the devices' push logs")
    elif overall.sent == 0:
        invalid.append("no request was sent")
    elif overall.outcomes.ok == 0:
        invalid.append("no request was answered with 2.xx")
    ge_state = "not_checked"
    bottleneck = []
    for gid, g in ge_block.per_ge.items():
        if g.kept_up is False:
            what = "held its closed-loop clients back" if g.closed_loop else \
                "did not keep up with the trace"
            bottleneck.append(f"{gid} {what}: " + "; ".join(g.problems))
    checked = [g.kept_up for g in ge_block.per_ge.values() if g.kept_up is not None]
    if bottleneck:
        ge_state = "bottleneck"
    elif checked:
        ge_state = "kept_up"
    cd_ge = ge_block.cd_ge
    if cd_ge is not None and cd_ge.kept_up is False:
        notes.append("the CD's GE sent late (" + "; ".join(cd_ge.problems) + ")")
    if contention.status == "detected":
        flags.append(("contention", "contention: " + (contention.reason or "")))
    elif contention.status in ("inconclusive", "not_checked"):
        notes.append(f"contention {contention.status.replace('_', ' ')}: {contention.reason}")
    elif contention.evidence_missing:   # "none", on part of the evidence: say which
        notes.append("no contention seen; " + cont.missing_text(contention.evidence_missing))
    elif contention.grade is not None:  # "none": say how much the host added, within tolerance
        notes.append("the host's share within the tolerance: " + (contention.reason or ""))
    notes.extend(contention.notes)
    notes.extend("push verify: " + v.describe() for v in run.run.push_verify
                 if v.found < v.expected)     # the platform lost devices (devices[].push)
    for b in bottleneck:
        flags.append(("ge_bottleneck", b))
    if run.run.interrupted or ge_block.interrupted:
        notes.append(f"run interrupted: {overall.outcomes.unsent} requests unsent; "
                     "statistics cover the part that ran")
    if invalid:
        status = "invalid"
    elif flags:
        status = max((f[0] for f in flags), key=SEVERITY.__getitem__)
    else:
        status = "trustworthy"
    reasons = invalid + [f[1] for f in flags] + notes
    if status == "trustworthy" and not reasons:
        reasons = ["GEs kept up with the trace; neither the CD node nor the kernel's evidence "
                   "(the components' CPU wait, busy stretch, send lag) showed contention"]
    return Verdict(status=status, reasons=reasons, exit_code=0 if status == "trustworthy" else 3,
                   checks=Checks(data="invalid" if invalid else "ok", ge=ge_state,
                                 contention=contention.status,
                                 loss="not_checked" if loss is None else
                                 "testbed_loss" if loss.testbed else "none"))


def build(run: RunData, p: AnalysisParams) -> tuple[Summary, dict[str, pd.DataFrame]]:
    req = resp.combine_ge(run.ges, run.test_start_ns)
    http_proxy = run.run.proxy_mode == "http"
    if http_proxy:   # the GE recorded proxy/coap://HOST:PORT/r0: the device's path is r0
        req = httpproxy.to_device_paths(req)
    codes, names = resp.device_codes(req, run)
    # the run's figures count the devices' own test requests beside the GEs' (issue 23)
    push_req, push_codes = pushmerge.test_rows(run, names)
    all_req, all_codes = pushmerge.merge(req, codes, push_req, push_codes)
    # a fleet's 10^4-10^5 devices: per-device figures in series/per_device.csv only
    detail = len(names) <= p.per_device_max
    if not detail:
        run.warnings.append(f"{len(names)} devices > per_device_max {p.per_device_max}: the "
                            "per-device figures are in series/per_device.csv, not summary.json")
    overall, per_device = resp.compute_responses(all_req, all_codes, names, run.duration_s,
                                                 detail)
    series: dict[str, pd.DataFrame] = {}
    series["response_times"] = resp.response_series(all_req, all_codes, names, detail)
    series["outcomes"], series["outcomes_over_time"] = resp.outcome_series(all_req, all_codes,
                                                                           names)
    series["rt_cdf"] = resp.rt_cdf_series(all_req)

    # GE integrity, per GE
    id_to_name = {int(d.id): n for n, d in run.devices.items() if d.id is not None}
    per_ge, rit_cdfs, lag_cdfs = {}, [], []
    ge_col = req["ge"].astype(str).to_numpy() if len(req) else np.zeros(0, object)
    for g in run.ges:
        sub = dtlsm.integrity_view(req[ge_col == g.ge_id], g, run.test_start_ns)
        b, rc, lc = gei.ge_integrity(sub, g.ge_id, id_to_name, p.ge, g.summary, detail)
        per_ge[g.ge_id] = b
        rit_cdfs.append(rc)
        lag_cdfs.append(lc)
    cd_ge_block = None
    cd_req = None
    if run.cd_ge is not None:
        cd_req = resp.combine_ge([run.cd_ge], run.test_start_ns)
        cd_name = run.cd.name if run.cd else "cd-node"
        ids = {int(x): cd_name for x in np.unique(cd_req["device"].to_numpy())}
        cd_ge_block, rc, lc = gei.ge_integrity(cd_req, "cd-ge", ids, p.ge, run.cd_ge.summary)
        rit_cdfs.append(rc)
        lag_cdfs.append(lc)
    kept = [b.kept_up for b in per_ge.values()]
    ge_block = GeIntegrityBlock(
        rule=GeRule(**p.ge.model_dump(exclude={"cdf_points"}), text=gei.RULE_TEXT,
                    closed_text=gei.CLOSED_RULE_TEXT if any(g.closed_loop for g in run.ges)
                    else None),
        kept_up=False if False in kept else (True if kept and None not in kept else None),
        interrupted=any(b.interrupted for b in per_ge.values()),
        per_ge=per_ge, cd_ge=cd_ge_block)
    series["rit_cdf"] = pd.concat(rit_cdfs, ignore_index=True) if rit_cdfs else pd.DataFrame(
        columns=["ge", "cdf", "expected_rit_ms", "submitted_rit_ms"])
    series["send_lag_cdf"] = pd.concat(lag_cdfs, ignore_index=True) if lag_cdfs else \
        pd.DataFrame(columns=["ge", "cdf", "lag_ms"])

    # R_d and decomposition for the main devices
    dev_infos = [run.devices.get(n) for n in names]
    s_ms = rdm.service_times_ms(req, codes, [d.resources if d else None for d in dev_infos])
    rd = rdm.rd_values(req, s_ms)
    # a run without a main GE has no request to time out; 10 s is the GE's default
    timeout_ms = float(max((g.summary.timeout_ms for g in run.ges), default=10000))
    # a forward proxy sends its own tokens to the devices: join its runs by path and time
    salts = {g.ge_id: g.summary.salt for g in run.ges
             if g.summary.salt is not None and run.run.proxy is None}
    code_of = {n: i for i, n in enumerate(names)}
    fleet_logs = [(fleet_load.device_codes(f, code_of), f.log) for f in run.fleets.values()
                  if f.log is not None]
    matched, counters = rdm.join_device_logs(req, codes, dev_infos, run.test_start_ns,
                                             timeout_ms, p.rd, salts, fleet_logs)
    dec = rdm.decomposition(req, matched)
    logged_fleets = {f.name for f in run.fleets.values() if f.log is not None}
    has_log = np.array([d is not None and (d.log is not None or d.fleet in logged_fleets)
                        for d in dev_infos], bool)
    cause = lossm.classify(req, matched, has_log, codes, timeout_ms)
    if http_proxy:
        cause = proxy_http.reclassify(cause, req, matched, has_log[codes] if len(codes) else
                                 np.zeros(0, bool), timeout_ms, run.run.interrupted)
    if len(push_req):   # the push rows follow the GE rows in all_req
        cause = np.concatenate([cause, lossm.classify_push(push_req, pushm.LATE_US)])
    cause = lossm.attribute_failures(cause, all_req, all_codes, names, {
        f.component: f.at_mono_ns - run.test_start_ns for f in run.run.failures
        if f.at_mono_ns is not None}, max(timeout_ms, pushm.timeout_ms(run)))
    loss, series["loss_over_time"] = lossm.loss_block(all_req, cause, all_codes, names,
                                                      run.run.network, run.duration_s)
    # the join is the GEs' requests to device logs: the devices' own requests have none
    counters["ok_requests"] = int((req["outcome"].astype(str) == "ok").sum())
    counters["ok_requests_matched"] = int(len(dec))
    rd_frames = [rdm.rd_series(req, rd, codes, names, p.rd.window_s, detail=detail)]
    split_frame = decomp.split(req, matched, s_ms)

    # CD node
    cd = _cd_samples(run, cd_req) if cd_req is not None else None
    cd_rd_block = cd_split = None
    if cd is not None:
        cd_name = run.cd.name if run.cd else "cd-node"
        cd_rd_block = rdm.cd_rd(cd, cd_name)
        tmask = cd["phase"].to_numpy() == "test"
        fake = pd.DataFrame({"sched": cd["t_s"].to_numpy()[tmask] * 1e9})
        cd_series = rdm.rd_series(fake, cd["rd"].to_numpy()[tmask],
                                  np.zeros(int(tmask.sum()), np.int64), [cd_name],
                                  p.contention.window_s or p.rd.window_s, label_all="")
        rd_frames.append(cd_series[cd_series["device"] == cd_name])
        series["cd_samples"] = cd[["t_s", "phase", "outcome", "rt_ms", "rd"]]
        cd_split = _cd_split(run, cd_req, cd, timeout_ms, p)
    rd_block = rdm.rd_block(rd, codes, names, dec, counters, ~np.isnan(s_ms), cd_rd_block,
                            detail)
    split_block = decomp.split_block(split_frame, names, cd_split, detail)
    series["per_device"] = per_device_table(names, all_req, all_codes, rd, codes, split_frame,
                                            loss)
    series["rd_over_time"] = pd.concat([f for f in rd_frames if len(f)], ignore_index=True) \
        if any(len(f) for f in rd_frames) else rd_frames[0]

    contention, windows = cont.assess(cd, run.duration_s, p.contention)
    series["contention_windows"] = windows
    fleet_block, fleet_series, loop_lags = fleetm.analyse(
        run, names, p.contention.window_s or p.rd.window_s, p.evidence.loop_lag_ms)
    if fleet_series is not None:
        series["fleet_lag"] = fleet_series
    # config.resolved.yaml's verdict:, slo: and notify.slo, read once (the notify block too)
    specs = resolved.read(RunDir(run.run_dir).config_resolved, run.warnings)
    evidence, series["evidence"] = evid.assess(
        RunDir(run.run_dir), run.run, *_device_tables(run),
        {**_ge_sends(req, cd_req, ge_block, run),
         **pushmerge.sends(push_req, push_codes, names, run, p.ge)},
        run.test_start_ns, run.duration_s, p.contention.window_s or p.rd.window_s,
        _evidence_params(p, specs.verdict), _answered(all_req, all_codes, names, cd_req, run),
        loop_lags)    # the engines' loops: evidence of their own (cd_module/loop_lag.py)
    series["host_share"] = evid.host_share_series(evidence)
    fleet_block = fleetm.with_flags(fleet_block, evidence)
    contention = cont.combine(contention, evidence)

    groups = {d.name: d.group or d.name.rpartition("-")[0] for d in run.run.devices}
    groups.update({n: d.group for n, d in run.devices.items() if d.fleet and d.group})
    slo_spec = specs.slo
    answered: dict[str, int] = {}
    for name, d in per_device.items():
        g = groups.get(name, name)
        answered[g] = answered.get(g, 0) + d.outcomes.ok
    monitor_block, monitor_series = mon.analyse(RunDir(run.run_dir), run.test_start_ns,
                                                run.duration_s, groups, answered)
    series.update(monitor_series)
    sut_block, sut_series = sutm.analyse(RunDir(run.run_dir), run.test_start_ns, run.duration_s,
                                         p.contention.window_s or p.rd.window_s)
    if sut_series is not None:
        series["sut_resources"] = sut_series

    observe_block, observe_series = obsm.analyse(run, names)
    series.update(observe_series)
    blockwise_block, blockwise_series = blkm.analyse(run)
    series.update(blockwise_series)
    dtls_block, dtls_series = dtlsm.analyse(run)
    series.update(dtls_series)

    load_block = loadm.load_block(run, req)
    verdict = _verdict(run, overall, ge_block, contention, loss)
    if load_block is not None and load_block.concurrency_shortfall:   # issue 35
        verdict.reasons.append(load_block.concurrency_shortfall)
    if run.run.in_progress:   # its harness was killed (loading refuses one still running)
        verdict.reasons.insert(0, killed.reason(run.run, req, run.duration_s))
        verdict.status, verdict.exit_code, verdict.checks.data = "invalid", 3, "invalid"
    dtls_note = dtlsm.verdict_note(dtls_block)
    if dtls_note:   # the loss block counts these requests as local_send (testbed)
        verdict.reasons.append(dtls_note)
    notify_block = notify_sink.block(run.run_dir, [(g.dir, g.summary) for g in run.ges],
                                     specs)
    notify_sink.invalidate(verdict, notify_block)
    slo_block = None
    if slo_spec is not None:
        frame = sloa.RequestFrame.from_requests(all_req, all_codes, names, groups)
        slo_block = sloa.with_verdict(sloa.evaluate(slo_spec, frame, run.duration_s),
                                      verdict.status)
        verdict.exit_code = sloa.exit_code(verdict.status, slo_block)
    phases_block = http_phases.block(run.run_dir)
    faults_block = sut_faults.analyse(run.run_dir, all_req, {
        n: int(d.id) for n, d in run.devices.items() if d.id is not None})
    verdict.reasons.extend(sut_faults.notes(faults_block))
    if http_phases.verify_note(phases_block):
        verdict.reasons.append(http_phases.verify_note(phases_block))
    notify_spec = specs.notify_slo
    if notify_block is not None and notify_spec is not None:   # issue 35
        slo_block = notify_slo.merge(slo_block, notify_slo.results(notify_spec, notify_block))
        slo_block = sloa.with_verdict(slo_block, verdict.status)
        verdict.exit_code = sloa.exit_code(verdict.status, slo_block)
    run_block = {
        "name": run.run.name,
        "run_id": run.run.run_id,
        "run_dir": str(run.run_dir),
        "backend": run.run.backend,
        "test_start_mono_ns": run.test_start_ns,
        "duration_s": run.duration_s,
        "interrupted": run.run.interrupted or ge_block.interrupted,
        "failures": [f.model_dump() for f in run.run.failures],
        "ges": [g.ge_id for g in run.ges],
        "devices": names,
        "cd_device": run.cd.name if run.cd else None,
        "analysis_version": ANALYSIS_VERSION,
        "params": p.model_dump(),
        "warnings": run.warnings,
    }
    return Summary(run=RunBlock.model_validate(json_clean(run_block)), overall=overall,
                   per_device=per_device, ge_integrity=ge_block, rd=rd_block,
                   contention=contention, verdict=verdict, monitor=monitor_block, loss=loss,
                   decomposition=split_block, slo=slo_block, observe=observe_block,
                   blockwise=blockwise_block, dtls=dtls_block, http=httpm.analyse(run, req),
                   push=pushm.analyse(run),
                   notify=notify_block, phases=phases_block, sut_faults=faults_block,
                   evidence=evidence, sut_resources=sut_block, load=load_block,
                   fleet=fleet_block), series


# series a figure draws point by point: full precision, so the report shows the exact values
FULL_PRECISION = {"rt_cdf", "cpu_cores", "cpu_components", "cpu_groups"}


def write(run_dir: Path, summary: Summary, series: dict[str, pd.DataFrame]) -> None:
    """Write the series files, then ``summary.json`` (last: a summary is never there without
    the series it describes), each whole (a full disk leaves the previous file or none)."""
    rd = RunDir(run_dir)
    rd.series_dir.mkdir(exist_ok=True)
    for name, df in series.items():
        with atomic.replacing_path(rd.series(name)) as tmp:
            df.to_csv(tmp, index=False, float_format=None if name in FULL_PRECISION else "%.6g")
    rd.write_summary(summary)
