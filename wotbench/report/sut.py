"""The report's "System under test" section: what answered the requests (wot-device, a
third-party server, an external endpoint, a forward proxy in the path), what can be measured of
each, and, with a proxy and device logs behind it, R split into "proxy + network" and "device".
"""
from __future__ import annotations

from typing import Optional

from wotbench.rundir import RunRecord, Summary
from wotbench.rundir.sut import MIB, SutResourcesBlock, SutWindow

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
            if not external:
                measured += "; its own CPU and memory: below"
        rows.append({"group": group, "devices": n, "what": what, "measured": measured,
                     "contention": "outside the contention check: WoTbench does not run it"
                     if external else "on this host's device cores (checked by the CD)"})
    return rows


SOURCE_TEXT = {"cgroup": "the container's cgroup (cpuacct.usage)",
               "proc": "the process tree's /proc/<pid>/stat"}
# more components than this: the table shows one row per group (sums) instead
MAX_COMPONENT_ROWS = 12


def _mib(v: Optional[float]) -> Optional[float]:
    return None if v is None else v / MIB


def _row(name: str, role: str, w: SutWindow, n: int = 1) -> dict:
    return {"name": name, "role": role, "components": n, "cores": w.cpu_cores,
            "rss_mean_mib": _mib(w.rss_mean_bytes), "rss_peak_mib": _mib(w.rss_peak_bytes),
            "peak_exact": w.peak_exact, "usage_peak_mib": _mib(w.mem_usage_peak_bytes)}


def resources(b: Optional[SutResourcesBlock]) -> Optional[dict]:
    """The SUT's own CPU and memory: the whole test per component (per group when there are
    many) and the total per analysis window."""
    if b is None:
        return None
    comps = b.components
    if len(comps) <= MAX_COMPONENT_ROWS:
        rows = [_row(n, c.role, c.test) for n, c in comps.items()]
    else:
        groups: dict[tuple[str, str], list[SutWindow]] = {}
        for c in comps.values():
            groups.setdefault((c.group, c.role), []).append(c.test)
        rows = [_row(f"{g} (sum of {len(ws)})", role, SutWindow.summed(ws, ws[0].start_s, ws[0].end_s), len(ws))
                for (g, role), ws in groups.items()]
    return {"rows": rows, "total": _row("total", "", b.total, len(comps)),
            "windows": [_row(f"{w.start_s:g}–{w.end_s:g} s", "", w) for w in b.total_windows],
            "window_s": b.window_s, "definition": b.definition, "sampling": b.sampling,
            "source": " and ".join(SOURCE_TEXT[x] for x in sorted({c.source for c in comps.values()}))}


def sut(run: RunRecord, s: Summary) -> dict:
    proxy = None
    if run.proxy is not None:
        p = run.proxy
        where = p.server or f"{p.address}:{p.port}"
        http = run.proxy_mode == "http"   # an HTTP->CoAP proxy (the paper's Figure 1)
        proxy = {"what": where, "address": f"{p.address}:{p.port}",
                 "kind": "HTTP→CoAP proxy" if http else "forward proxy",
                 "mode": "HTTP/1.1 from the GE, CoAP to the devices" if http else run.proxy_mode,
                 "cpuset": p.cpuset, "external": p.role == "external"}
    split = None
    dec = s.rd.overall.decomposition_ms
    if proxy is not None and dec.network_stack.count:
        split = [(label, st.model_dump()) for label, st in (
            ("proxy + network (R − device time)", dec.network_stack),
            ("device: queueing", dec.queueing), ("device: service", dec.service))]
    return {"available": bool(run.devices), "rows": _rows(run), "proxy": proxy, "split": split,
            "third_party": any(d.server for d in run.devices),
            "resources": resources(s.sut_resources)}
