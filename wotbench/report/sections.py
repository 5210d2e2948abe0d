"""The report's sections, each mapped from the typed run-directory models (``Summary``,
``RunRecord``, ``Plan``) to the plain values the template shows. Nothing here reads a raw file
or recomputes a statistic: the analysis owns the numbers."""
from __future__ import annotations

import shlex
from typing import Any, Optional

from wotbench.deploy.plan import Plan, parse_cpuset
from wotbench.report.evidence import shown_by
from wotbench.rundir import NetworkRecord, RunRecord, Summary
from wotbench.rundir.summary import GeIntegrity, RtStats

VERDICTS = {
    "trustworthy": ("ok", "Results trustworthy",
                    "The load was sent on schedule, and neither the contention detector nor the "
                    "kernel's evidence (the components' CPU wait, other processes on their cores) "
                    "showed host contention: these response times describe the system under test."),
    "ge_bottleneck": ("bad", "GE bottleneck",
                      "The gateway emulator could not send requests on schedule, so the offered load "
                      "was not the configured one. Do not use these numbers for capacity planning."),
    "testbed_loss": ("bad", "Testbed lost requests",
                     "Requests vanished inside WoTbench itself (between the gateway emulator and the "
                     "devices, not in the system under test or a configured impairment): loss "
                     "rates and response times of this run are not the system's. See where below."),
    "contention": ("warn", "Contention detected",
                   "The host itself slowed the emulated devices during the windows below; response "
                   "times inside them are inflated by the testbed, not by the system under test."),
    "invalid": ("bad", "Run invalid",
                "The run did not produce usable results."),
}

CONTENTION_STATUS = {"detected": ("warn", "contention detected"), "none": ("ok", "no contention"),
                     "inconclusive": ("unknown", "inconclusive"), "not_checked": ("unknown", "not checked")}

OUTCOME_MEANING = {"ok": "2.xx response", "error": "4.xx/5.xx response or local send failure",
                   "timeout": "no answer within the timeout", "reset": "RST received",
                   "unsent": "not sent (run interrupted first)"}

# device-summary.json "impair" counts shown per impairment (CONTRACTS §3)
IMPAIR_COUNTERS = ("dropped_in", "dropped_out", "duplicated", "corrupted")


def verdict(s: Summary, contention: dict) -> dict:
    v = s.verdict
    cls, headline, explain = VERDICTS[v.status]
    detail = None
    if contention["windows"]:
        detail = (f"from {contention['onset_s']:g} s, " if contention["onset_s"] is not None else "") + \
            f"{len(contention['windows'])} window(s), {contention['contended_s']:.0f} s in total"
        if contention["contended_share"] is not None:
            detail += f" ({contention['contended_share']:.0%} of the test)"
        if contention["peak_ratio"]:
            detail += f"; CD node response time up to {contention['peak_ratio']:.2f}× its calibration baseline"
        detail += ": " + ", ".join(w["label"] for w in contention["windows"])
    return {"status": v.status, "cls": cls, "headline": headline, "explain": explain,
            "reasons": list(v.reasons), "detail": detail, "exit_code": v.exit_code,
            "checks": v.checks.model_dump()}


def contention(s: Summary) -> dict:
    c, b = s.contention, s.contention.baseline
    wins = [{"start_s": w.start_s, "end_s": w.end_s, "duration_s": w.end_s - w.start_s,
             "shift": w.shift, "ratio": w.ratio, "p_value": w.p_value,
             "label": f"{w.start_s:g}–{w.end_s:g} s", "shown_by": shown_by(w.shown_by),
             "evidence": list(w.evidence)} for w in c.flagged_windows]
    pill_cls, pill = CONTENTION_STATUS[c.status]
    return {"status": c.status, "available": c.status in ("detected", "none"),
            "detected": c.status == "detected", "pill": pill, "pill_cls": pill_cls,
            "reason": c.reason, "windows": wins, "contended_s": c.contended_s,
            "contended_share": s.contended_share, "peak_ratio": c.max_ratio,
            "onset_s": c.onset_s, "windows_tested": c.windows_tested,
            "cd_status": c.cd_status, "evidence_missing": c.evidence_missing,
            "baseline_rd": b.median_rd if b else None,
            "threshold_rd": b.threshold_rd if b else None,
            "threshold_shift": b.threshold_shift if b else None,
            "baseline_samples": b.samples if b else None}


def host(run: RunRecord) -> list[tuple[str, str]]:
    h = run.host
    rows = [("Host", h.hostname), ("CPU", h.cpu_model), ("Cores", h.cpus), ("Kernel", h.kernel),
            ("Docker", h.docker),
            ("Host tuning", ", ".join(f"{t.name} {t.before} → {t.during}" for t in run.host_tuning)
             or None),
            ("Core isolation", run.isolation.describe() if run.isolation else None)]
    return [(k, str(v)) for k, v in rows if v is not None]


def compress(names: list[str]) -> str:
    """['cpu-0', 'cpu-1', 'cpu-2', 'io-0'] -> 'cpu-0…2 (3 devices), io-0'."""
    groups: dict[str, list[int]] = {}
    other = []
    for n in names:
        base, _, idx = n.rpartition("-")
        if base and idx.isdigit():
            groups.setdefault(base, []).append(int(idx))
        else:
            other.append(n)
    parts = []
    for base, idx in groups.items():
        idx.sort()
        parts.append(f"{base}-{idx[0]}" if len(idx) == 1 else f"{base}-{idx[0]}…{idx[-1]} ({len(idx)} devices)")
    return ", ".join(parts + other)


def core_roles(plan: Plan) -> dict[str, list[str]]:
    """What each core of the plan runs (core -> components, "(idle)" for a usable core with
    none), in core order: the placement table's rows and the CPU-per-core figure's labels."""
    roles: dict[str, list[str]] = {}

    def add(cores: list[int], what: str) -> None:
        for c in map(str, cores):
            roles.setdefault(c, [])
            if what not in roles[c]:
                roles[c].append(what)

    for c in plan.os_cores:
        add([c], "OS + harness")
    for ge, c in plan.ge_cores.items():
        add([c], ge)
    if plan.cd_ge_core is not None:
        add([plan.cd_ge_core], "cd-ge")
    if plan.cd_node_cpuset is not None:
        add(parse_cpuset(plan.cd_node_cpuset), "cd-node")
    by_core: dict[str, list[str]] = {}
    for dev, cs in plan.devices.items():
        for c in parse_cpuset(cs):
            by_core.setdefault(str(c), []).append(dev)
    for c, devs in by_core.items():
        add([int(c)], compress(devs))
    allc = sorted(set(roles) | {str(c) for c in plan.usable_cores}, key=lambda s: (len(s), s))
    return {c: roles.get(c, []) or ["(idle)"] for c in allc}


def placement(plan: Optional[Plan], why_not: Optional[str]) -> dict:
    if plan is None:
        return {"available": False, "reason": why_not or "plan.json is missing"}
    rows = [{"core": c, "components": comps} for c, comps in core_roles(plan).items()]
    return {"available": True, "rows": rows, "faithful": plan.faithful,
            "warnings": list(plan.warnings), "ge_wait": plan.ge_wait, "affinity": plan.affinity,
            "cores_total": plan.cores_total}


def rt_stats(rt: RtStats) -> dict:
    """{count, mean, p50, p90, p95, p99, p999, max} (ms) of a response-time block."""
    return {"mean": rt.mean_ms, "p50": rt.p50_ms, "p90": rt.p90_ms, "p95": rt.p95_ms,
            "p99": rt.p99_ms, "p999": rt.p999_ms, "max": rt.max_ms, "count": rt.count}


def overall(s: Summary) -> dict:
    o = s.overall
    return {"requests": float(o.requests), "sent": float(o.sent),
            "outcomes": o.outcomes.model_dump(), "rt": rt_stats(o.response_time_ms.from_sent),
            "achieved_rate": o.throughput_rps, "offered_rate": o.offered_rps,
            "success_share": o.rates.ok, "loss_rate_of_sent": o.loss_rate_of_sent,
            "duration_s": o.duration_s, "codes": dict(o.response_codes)}


def outcome_rows(s: Summary) -> list[dict]:
    counts, rates = s.overall.outcomes.model_dump(), s.overall.rates.model_dump()
    return [{"outcome": k, "count": int(n), "share": rates[k], "meaning": OUTCOME_MEANING[k]}
            for k, n in counts.items()]


def per_device(s: Summary) -> list[dict]:
    rows = []
    for name, d in s.per_device.items():
        req, ok = float(d.requests), float(d.outcomes.ok)
        rows.append({"device": name, "ge": d.ge, "requests": req, "ok": ok,
                     "failed": req - ok - d.outcomes.unsent, "throughput": d.throughput_rps,
                     **rt_stats(d.response_time_ms.from_sent)})
    return rows


LOSS_CAUSES = {   # cause -> (whose, what it means)
    "to_device": ("testbed", "lost between the GE and the device (the device never saw it)"),
    "from_device": ("testbed", "the device answered in time, the GE never received it"),
    "local_send": ("testbed", "the GE's own send failed"),
    "impairment": ("configured", "dropped or held past the timeout by a configured impairment"),
    "refused_503": ("system", "5.03 from the device: its request queue was full"),
    "device_late": ("system", "the device answered after the GE's timeout"),
    "sut_error": ("system", "another 4.xx/5.xx response"),
    "sut_reset": ("system", "RST from the device"),
    "no_device_log": ("system?", "timeout at a device without a log: not placed"),
    "interrupted": ("run", "in flight when the run was interrupted"),
    "component_failed": ("testbed", "sent to a device that had failed (or was waiting on it when "
                                    "it failed): see the run's failures"),
    "push_timeout": ("system", "a device's own request, sent on time, got no answer in time"),
    "push_late_send": ("testbed", "a device's own request got no answer; the device sent it late "
                                  "(its core starved it, which may also have kept it from "
                                  "reading the answer)"),
    "proxy": ("system", "the HTTP->CoAP proxy (or its CoAP leg to the device) lost it: a 502/504 "
                        "from the proxy, or no answer in time although the device never saw it "
                        "or answered in time"),
}


def loss(s: Summary) -> dict:
    """Where the requests that did not end ok were lost, and the devices where the testbed lost
    any."""
    lb = s.loss
    if lb is None:
        return {"available": False}
    counts = lb.by_cause.model_dump()
    rows = [{"cause": c, "whose": LOSS_CAUSES[c][0], "meaning": LOSS_CAUSES[c][1], "count": n}
            for c, n in counts.items() if n]
    worst = sorted(((name, d) for name, d in lb.per_device.items() if d.get("testbed")),
                   key=lambda kv: -kv[1]["testbed"])[:10]
    return {"available": True, "rows": rows, "testbed": lb.testbed, "configured": lb.configured,
            "sut": lb.sut, "testbed_share": lb.testbed_share, "not_ok": lb.requests_not_ok,
            "testbed_devices": lb.testbed_devices, "first_s": lb.first_testbed_loss_s,
            "offenders": [{"device": n, **d} for n, d in worst]}


def _ge_row(gid: str, g: GeIntegrity) -> dict:
    e, sub = g.expected_rit, g.submitted_rit
    return {"ge": gid, "kept_up": g.kept_up, "problems": list(g.problems),
            "expected": {"mean": e.mean_ms, "p5": e.p5_ms, "p50": e.p50_ms},
            "submitted": {"mean": sub.mean_ms, "p5": sub.p5_ms, "p50": sub.p50_ms},
            "ks": g.ks, "ks_tol": g.ks_tol, "ks_limit": g.ks_limit, "late_share": g.late_share,
            "early_share": g.early_share, "tolerance_ms": g.tolerance_ms,
            "late_p": g.late_p_value, "late_abs_share": g.late_abs_share, "lag_p50": g.lag_ms.p50, "lag_p99": g.lag_ms.p99,
            "lag_max": g.lag_ms.max, "sent": g.sent, "not_kept_up": list(g.devices_not_kept_up)}


def ge(s: Summary) -> dict:
    g = s.ge_integrity
    rows = [_ge_row(gid, b) for gid, b in g.per_ge.items()]
    if g.cd_ge is not None:
        rows.append(_ge_row("cd-ge", g.cd_ge) | {"is_cd": True})
    return {"available": True, "rows": rows, "ok": g.kept_up,
            "late_threshold_ms": g.rule.late_threshold_ms, "rel_tolerance": g.rule.rel_tolerance,
            "min_tolerance_ms": g.rule.min_tolerance_ms, "alpha": g.rule.alpha,
            "max_late_share": g.rule.max_late_share, "max_ks": g.rule.max_ks}


def rd(s: Summary) -> dict:
    r = s.rd
    return {"available": True, "definition": r.definition,
            "devices": r.overall.rd.model_dump(),
            "cd_calibration": r.cd.calibration.model_dump() if r.cd else {},
            "cd_test": r.cd.test.model_dump() if r.cd else {},
            "cd_device": r.cd.device if r.cd else None}


SPLIT_PARTS = (("network_out", "network, GE → device"), ("device_in", "device: wake-up, queue, hand-off"),
               ("service", "service beyond S"), ("device_out", "device: hand-back, send"),
               ("network_back", "network, device → GE"), ("r_minus_s", "R − S"),
               ("ge_side", "GE read delay (not in R)"))


def split(s: Summary) -> dict:
    """R − S by place (summary ``decomposition``): one column per population, p50 and p99 (µs)."""
    d = s.decomposition
    if d is None:
        return {"available": False}
    cols = [("devices", d.overall)]
    if d.cd is not None:
        cols += [("CD, calibration", d.cd.calibration), ("CD, test", d.cd.test)]
    cols = [(label, sp) for label, sp in cols if sp.r_minus_s.count]
    rows = [{"label": label, "cells": [(getattr(sp, key).p50_us, getattr(sp, key).p99_us)
                                        for _, sp in cols]} for key, label in SPLIT_PARTS]
    return {"available": bool(cols), "columns": [label for label, _ in cols], "rows": rows,
            "stamps": {label: sp.stamps for label, sp in cols}, "definition": d.definition}


def _applied_text(a: list[str]) -> str:
    """netem/pumba: a list of command lines (one per line); app: the wot-device arguments."""
    if a and all(" " in x for x in a):
        return "\n".join(a)
    return shlex.join(a)


def network(net: Optional[NetworkRecord]) -> dict:
    """run.json ``network``: devices with the same impairment listed together, with what was
    applied to each."""
    if net is None or not net.devices:
        return {"applied": False, "rows": [], "backend": net.backend if net else None}
    by_spec: dict[str, list[str]] = {}
    applied: dict[str, list[tuple[str, str]]] = {}
    counters: dict[str, dict[str, int]] = {}
    for dev, d in net.devices.items():
        by_spec.setdefault(d.describe, []).append(dev)
        applied.setdefault(d.describe, []).append((dev, _applied_text(d.applied)))
        if d.counters is not None:
            c = counters.setdefault(d.describe, {})
            for k in IMPAIR_COUNTERS:
                c[k] = c.get(k, 0) + getattr(d.counters, k)
    rows = [{"target": compress(devs), "spec": spec, "applied": applied.get(spec, []),
             "counters": counters.get(spec)} for spec, devs in by_spec.items()]
    return {"applied": bool(rows), "rows": rows, "backend": net.backend,
            "requested": net.requested, "reasons": list(net.reasons), "removed": net.removed}


def injected(run: RunRecord) -> list[dict[str, Any]]:
    """run.json ``contention``: the contention episodes injected on purpose."""
    return [{"name": e.name, "kind": e.kind, "cores": e.cores, "start_s": e.start_s,
             "end_s": e.end_s} for e in run.contention]


def observe(s: Summary) -> dict:
    """Observations (RFC 7641): None-safe figures of summary.observe for the template."""
    o = s.observe
    if o is None:
        return {"available": False}
    rows = [{"device": name, **d.model_dump(),
             "ratio": (d.achieved_rate / d.configured_rate
                       if d.achieved_rate is not None and d.configured_rate else None)}
            for name, d in o.per_device.items()]
    return {"available": True, "o": o, "rows": rows,
            "latency": o.latency_ms.model_dump(), "rd": o.rd.model_dump(),
            "service": o.service_ms.model_dump()}


def blockwise(s: Summary) -> dict:
    """Block-wise transfers: one row per kind (block2 reads, block1 writes) for the template."""
    b = s.blockwise
    if b is None:
        return {"available": False}
    names = {"block2": "large responses (Block2)", "block1": "large request bodies (Block1)"}
    rows = [{"kind": names.get(k, k), **v.model_dump()} for k, v in b.by_kind.items()]
    return {"available": True, "rows": rows}


def dtls(s: Summary) -> dict:
    """DTLS handshakes (coaps://): one row per session mode for the template."""
    b = s.dtls
    if b is None:
        return {"available": False}
    names = {"reuse": "reused sessions (before the start)",
             "per-request": "a new session per request (on the schedule)"}
    rows = [{"mode": names.get(k, k), **v.model_dump()} for k, v in b.by_mode.items()]
    return {"available": True, "rows": rows, "b": b,
            "cpu": s.monitor.device_cpu_us_per_request if s.monitor else {}}


def load(s: Summary) -> dict:
    """The load block: what the loop was and what the clients got; closed-loop GE rule rows."""
    b = s.load
    if b is None:
        return {"available": False}
    closed_rows = [{"ge": gid, "stall": g.closed_loop.stall_ms, "cycle_ms": g.closed_loop.cycle_mean_ms,
                    "share": g.closed_loop.stall_share, "limit": g.closed_loop.max_stall_share,
                    "kept_up": g.kept_up}
                   for gid, g in s.ge_integrity.per_ge.items() if g.closed_loop is not None]
    return {"available": True, "b": b, "closed_rows": closed_rows,
            "closed_rule": s.ge_integrity.rule.closed_text}
