"""Where every request that did not end ``ok`` was lost: the testbed, a configured impairment,
or the system under test.

Per request (main GEs; the device logs joined to the GE rows by :func:`rd.join_device_logs`):

==================  ========================================================================
cause               rule
==================  ========================================================================
to_device           timeout, and the device logged no arrival for it: lost between GE and device
from_device         timeout, the device answered it in time (response logged before the GE's
                    timeout), and the GE never received the answer
local_send          error without a send time: the GE's own send failed
impairment          a loss on a leg the user impaired (app backend: up to the datagrams it
                    reports dropped on that leg, the rest of the leg's losses of a device whose
                    impairment also delays that leg; netem/pumba: every loss on a lossy leg)
refused_503         a 5.03 (Service Unavailable) from the device: its queue was full (HTTP: a 503)
device_late         timeout, the device answered after the GE's timeout (queueing/service)
sut_error           any other 4.xx/5.xx response (HTTP: any status but 2xx and 503)
sut_reset           RST
no_device_log       timeout of a device without a log (a third-party server): not placed
interrupted         sent, in flight when the run was interrupted
component_failed    any of the above for a device that failed during the run (run.json
                    ``failures``), sent after it failed or still waiting for it then
push_timeout        timeout of a device's own request (devices[].push): its target is the
                    system under test, which logs nothing WoTbench reads, so the loss cannot be
                    placed on a leg; the device did send it (``sent_ns``) on time, so the server
                    (or its host's path to it) lost or delayed it: the SUT's
proxy               through an HTTP->CoAP proxy (gateways.proxy.mode: http), what the proxy
                    or its CoAP leg to the device lost: a 502/504 from the proxy, a 503 for a
                    request the device never logged, or a timeout of a request the device
                    never logged or answered in time (rules: analysis/http_proxy.py)
push_late_send      timeout of a device's own request that the device sent more than
                    ``push.LATE_US`` after it was due: its thread was behind then, so the same
                    starvation may have kept it from reading the answer before its timeout
                    (the device judges timeouts on its own clock): the testbed's
==================  ========================================================================

A device's own request is classified like a GE's otherwise (an error answer ``sut_error``,
5.03 ``refused_503``, RST ``sut_reset``, a failed send ``local_send``); a push timeout of a
device whose network impairment (every backend acts on pushes: netem/pumba on the link, app in
wot-device through the same channels as its endpoint) drops or holds datagrams on
either leg is ``impairment``, whether it was sent on time or late.

``testbed`` = to_device + from_device + local_send + push_late_send (what WoTbench itself lost);
``configured`` = impairment; ``sut`` = refused_503 + device_late + sut_error + sut_reset +
push_timeout + proxy.
Unsent requests are not losses. Any testbed loss makes the run untrustworthy (verdict
``testbed_loss``): a user would otherwise blame the system under test for it.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from wotbench.rundir import NetworkRecord
from wotbench.rundir.summary import LossBlock, LossCauses

CAUSES = ("to_device", "from_device", "local_send", "impairment", "refused_503", "device_late",
          "sut_error", "sut_reset", "no_device_log", "interrupted", "component_failed",
          "push_timeout", "push_late_send", "proxy")
FAILURE_SEEN_WITHIN_NS = 1_000_000_000   # the runner's watch checks for dead components each second
TESTBED = ("to_device", "from_device", "local_send", "push_late_send")
SUT = ("refused_503", "device_late", "sut_error", "sut_reset", "push_timeout", "proxy")
NOT_A_CAUSE = -1


def classify(req: pd.DataFrame, matched: pd.DataFrame, has_log: np.ndarray, codes: np.ndarray,
             timeout_ms: float) -> np.ndarray:
    """Cause index (into CAUSES) per request row; NOT_A_CAUSE for ok and unsent."""
    n = len(req)
    out = np.full(n, NOT_A_CAUSE, np.int64)
    outcome = req["outcome"].astype(str).to_numpy()
    code = req["code"].astype(object).where(req["code"].notna(), "").astype(str).to_numpy()
    sent = req["sent"].to_numpy()
    idx = {c: i for i, c in enumerate(CAUSES)}
    answered_at = answer_times(n, matched)
    timeout = outcome == "timeout"
    logged = has_log[codes] if len(codes) else np.zeros(n, bool)
    reached = ~np.isnan(answered_at)
    in_time = answered_at <= sent + timeout_ms * 1e6
    out[timeout & ~logged] = idx["no_device_log"]
    out[timeout & logged & ~reached] = idx["to_device"]
    out[timeout & logged & reached & in_time] = idx["from_device"]
    out[timeout & logged & reached & ~in_time] = idx["device_late"]
    error = outcome == "error"
    refused = (code == "5.03") | (code == "503")   # CoAP 5.03, HTTP 503 Service Unavailable
    out[error & refused] = idx["refused_503"]
    out[error & ~refused & (code != "")] = idx["sut_error"]
    out[error & (code == "") & np.isnan(sent)] = idx["local_send"]
    out[error & (code == "") & ~np.isnan(sent)] = idx["interrupted"]
    out[outcome == "reset"] = idx["sut_reset"]
    return out


def answer_times(n: int, matched: pd.DataFrame) -> np.ndarray:
    """Per request row: when its device answered it (ns from the test start; NaN where no log
    row matched): the end of its service, or its arrival for those it refused at once (5.03,
    4.04)."""
    answered_at = np.full(n, np.nan)
    if len(matched):
        rows = matched["row"].to_numpy(np.int64)
        answered_at[rows] = np.where(np.isnan(matched["end"].to_numpy()),
                                     matched["arrival"].to_numpy(), matched["end"].to_numpy())
    return answered_at


def classify_push(push: pd.DataFrame, late_us: float) -> np.ndarray:
    """Cause index per row of the devices' own requests (:mod:`push_merge` rows): as a GE's,
    but a timeout is ``push_timeout``, or ``push_late_send`` when sent late (module table)."""
    n = len(push)
    out = classify(push, pd.DataFrame(), np.zeros(1, bool), np.zeros(n, np.int64), 0.0)
    timeout = out == CAUSES.index("no_device_log")
    lag_us = (push["sent"].to_numpy(np.float64) - push["sched"].to_numpy(np.float64)) / 1e3
    late = lag_us > late_us
    out[timeout & late] = CAUSES.index("push_late_send")
    out[timeout & ~late] = CAUSES.index("push_timeout")
    return out


def attribute_failures(cause: np.ndarray, req: pd.DataFrame, codes: np.ndarray,
                       names: list[str], failed_at_ns: dict[str, int],
                       timeout_ms: float) -> np.ndarray:
    """Move the losses of a device that failed during the run to ``component_failed``: those
    sent after it failed or still waiting then (``failed_at_ns``: when the runner saw the
    failure, relative to the test start; the device died at most one watch interval before)."""
    out = cause.copy()
    when = req["sent"].to_numpy(np.float64)
    when = np.where(np.isnan(when), req["sched"].to_numpy(np.float64), when)
    for i, name in enumerate(names):
        at = failed_at_ns.get(name)
        if at is None:
            continue
        rows = (codes == i) & (out >= 0) & (when + timeout_ms * 1e6 >= at - FAILURE_SEEN_WITHIN_NS)
        out[rows] = CAUSES.index("component_failed")
    return out


def _impaired_legs(network: Optional[NetworkRecord], name: str) -> dict[str, dict[str, bool]]:
    """{"to_device": {...}, "from_device": {...}}: whether the device's configured impairment
    drops ("loss") or holds ("delay": delay or rate) datagrams on each leg."""
    legs = {"to_device": {"loss": False, "delay": False}, "from_device": {"loss": False, "delay": False}}
    dev = network.devices.get(name) if network else None
    if dev is None:
        return legs
    imp = dev.impairment
    direction = imp.get("direction", "egress")
    on = {"to_device": direction in ("ingress", "both"), "from_device": direction in ("egress", "both")}
    for leg, active in on.items():
        if active:
            legs[leg]["loss"] = bool(imp.get("loss"))
            legs[leg]["delay"] = bool(imp.get("delay") or imp.get("rate"))
    return legs


def attribute_impairments(cause: np.ndarray, codes: np.ndarray, names: list[str],
                          network: Optional[NetworkRecord]) -> np.ndarray:
    """Move losses the user configured from the testbed legs to ``impairment``, request by
    request (the earliest of a device's losses on a leg first), so totals, per-device counts
    and the time series agree."""
    out = cause.copy()
    imp = CAUSES.index("impairment")
    for i, name in enumerate(names):
        dev = network.devices.get(name) if network else None
        if dev is None:
            continue
        legs = _impaired_legs(network, name)
        if any(v for leg in legs.values() for v in leg.values()):   # pushes cross both legs
            # a late send too: the impairment drops or holds on the device's link, the late
            # send is only a proxy for a starved loop (so the configured cause comes first)
            push = np.isin(out, [CAUSES.index("push_timeout"), CAUSES.index("push_late_send")])
            out[(codes == i) & push] = imp
        for leg, counter in (("to_device", "dropped_in"), ("from_device", "dropped_out")):
            rows = np.flatnonzero((codes == i) & (out == CAUSES.index(leg)))
            if not len(rows):
                continue
            if legs[leg]["delay"]:       # held past the GE's timeout: the user's doing too
                moved = len(rows)
            elif dev.counters is not None:   # app backend: it counted its drops exactly
                moved = min(len(rows), getattr(dev.counters, counter))
            else:                        # netem/pumba: no counts; a lossy leg takes them all
                moved = len(rows) if legs[leg]["loss"] else 0
            out[rows[:moved]] = imp
    return out


def loss_block(req: pd.DataFrame, cause: np.ndarray, codes: np.ndarray, names: list[str],
               network: Optional[NetworkRecord], duration_s: float
               ) -> tuple[LossBlock, pd.DataFrame]:
    """The summary's ``loss`` block and series/loss_over_time.csv (per second of the scheduled
    send: count per cause)."""
    k = len(CAUSES)
    cause = attribute_impairments(cause, codes, names, network)
    m = cause >= 0
    counts = np.zeros((len(names), k), np.int64)
    np.add.at(counts, (codes[m], cause[m]), 1)
    totals = {c: int(counts[:, i].sum()) for i, c in enumerate(CAUSES)}
    sent = int((~np.isnan(req["sent"].to_numpy())).sum()) + totals["local_send"]
    testbed = sum(totals[c] for c in TESTBED)
    per_device = {}
    for i, name in enumerate(names):
        row = {c: int(counts[i, j]) for j, c in enumerate(CAUSES) if counts[i, j]}
        if row:
            row["testbed"] = sum(row.get(c, 0) for c in TESTBED)
            per_device[name] = row
    sec = np.floor(req["sched"].to_numpy()[m] / 1e9).astype(np.int64)
    series = pd.DataFrame(columns=["second", *CAUSES])
    if m.any():
        smin = int(sec.min())
        grid = np.zeros((int(sec.max()) - smin + 1, k), np.int64)
        np.add.at(grid, (sec - smin, cause[m]), 1)
        series = pd.DataFrame(grid, columns=list(CAUSES))
        series.insert(0, "second", np.arange(len(grid)) + smin)
        series = series[series[list(CAUSES)].sum(axis=1) > 0]
    first = None
    tb = np.isin(cause, [CAUSES.index(c) for c in TESTBED])
    if tb.any():
        first = float(req["sched"].to_numpy()[tb].min() / 1e9)
    block = LossBlock(
        requests_not_ok=int(m.sum()), sent=sent, by_cause=LossCauses(**totals), testbed=testbed,
        configured=totals["impairment"], sut=sum(totals[c] for c in SUT),
        testbed_share=testbed / sent if sent else None,
        testbed_devices=sum(1 for d in per_device.values() if d["testbed"]),
        first_testbed_loss_s=first, per_device=per_device)
    return block, series
