"""The report's "System under test" section: what answered the requests (wot-device, a
third-party server, an external endpoint, a forward proxy in the path), what can be measured of
each, and, with a proxy and device logs behind it, R split into "proxy + network" and "device".
"""
from __future__ import annotations

from wotbench.rundir import RunRecord, Summary

WOT_DEVICE = "wot-device (WoTbench's emulated device)"


def _rows(run: RunRecord) -> list[dict]:
    groups: dict[tuple[str, str], int] = {}
    for d in run.devices:
        key = (d.group or "?", d.server or WOT_DEVICE)
        groups[key] = groups.get(key, 0) + 1
    rows = []
    for (group, what), n in groups.items():
        external = what.startswith("external endpoint")
        if what == WOT_DEVICE:
            measured = "R, R_d and the decomposition (device log)"
        else:
            measured = ("R only: a third-party server has no WoTbench resource file (service "
                        "times) and writes no device log, so R_d and the decomposition are absent")
        rows.append({"group": group, "devices": n, "what": what, "measured": measured,
                     "contention": "outside the contention check: WoTbench does not run it"
                     if external else "on this host's device cores (checked by the CD)"})
    return rows


def sut(run: RunRecord, s: Summary) -> dict:
    proxy = None
    if run.proxy is not None:
        p = run.proxy
        where = p.server or f"{p.address}:{p.port}"
        proxy = {"what": where, "address": f"{p.address}:{p.port}", "mode": run.proxy_mode,
                 "cpuset": p.cpuset, "external": p.role == "external"}
    split = None
    dec = s.rd.overall.decomposition_ms
    if proxy is not None and dec.network_stack.count:
        split = [(label, st.model_dump()) for label, st in (
            ("proxy + network (R − device time)", dec.network_stack),
            ("device: queueing", dec.queueing), ("device: service", dec.service))]
    return {"available": bool(run.devices), "rows": _rows(run), "proxy": proxy, "split": split,
            "third_party": any(d.server for d in run.devices)}
