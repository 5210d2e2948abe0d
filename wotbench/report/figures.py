"""The report's figures: one function per figure, each drawn with matplotlib (Agg) from the typed
:class:`~wotbench.report.view.RunReport` and returned as an inline SVG string (text kept as text,
so the report stays searchable and crisp)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from wotbench.report.sections import core_roles
from wotbench.report.view import RunReport
from wotbench.report.plotting import (BLUE, CYCLE, GREEN, GREY, GRID, INK, ORANGE, PURPLE, RED, SHADE,
                       close_all, scope_ids, subplots, svg)


def _shade(ax, rep: RunReport, label: bool = True) -> None:
    for i, w in enumerate(rep.summary.contention.flagged_windows):
        ax.axvspan(w.start_s, w.end_s, color=SHADE, alpha=0.35, lw=0,
                   label="contention window" if label and i == 0 else None, zorder=0)


def _end_marker(ax, rep: RunReport) -> None:
    if rep.interrupted and rep.duration_s:
        ax.axvline(rep.duration_s, color=RED, ls=":", lw=1)


def _faults(ax, rep: RunReport, label: bool = True) -> None:
    """sut_faults (issue 35): a pause as a band from SIGSTOP to SIGCONT, a restart as a band
    from its stop until it answered again, a kill as a dashed line, a CPU-quota change as a
    dash-dotted one."""
    for f in rep.sut_faults or []:
        if f.applied_s is None:
            continue
        lab = (f"{f.action} {f.device}" + (f" → {f.cpus:g} cpus" if f.cpus is not None else "")
               if label else None)
        if f.resumed_s is not None:
            ax.axvspan(f.applied_s, f.resumed_s, color=PURPLE if f.action == "pause" else RED,
                       alpha=0.18, lw=0, label=lab)
        else:
            ax.axvline(f.applied_s, color=PURPLE, ls="-." if f.action == "cpu_quota" else "--",
                       lw=1.2, label=lab)


def _finish_time_plot(fig, ax, rep: RunReport, ylabel: str, title: str, ncol: int, ylim=(0, None)) -> str:
    """Common end of the single-axis time-series figures: contention shading, interruption
    marker, labels, legend under the plot."""
    _shade(ax, rep)
    _end_marker(ax, rep)
    ax.set_ylim(*ylim)
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", ncol=ncol, bbox_to_anchor=(0, -0.2))
    return svg(fig)


# --------------------------------------------------------------------------- figures

def fig_rit_cdf(rep: RunReport) -> str:
    """series/rit_cdf.csv holds quantiles on a probability grid, one block per GE."""
    rit: dict = rep.data.rit
    fig, (a1, a2) = subplots(1, 2, figsize=(10, 3.2))
    hi = 0.0
    for i, (ge, (p, exp, sub)) in enumerate(sorted(rit.items())):
        suffix = f" {ge}" if len(rit) > 1 else ""
        for ax in (a1, a2):
            ax.plot(exp, p, color=GREY, lw=2.6, label=f"expected (trace){suffix}" if ax is a1 else None)
            ax.plot(sub, p, color=CYCLE[i % len(CYCLE)], lw=1.2, label=f"submitted (GE){suffix}" if ax is a1 else None)
        lo_e, lo_s = exp[p <= 0.10], sub[p <= 0.10]
        hi = max([hi, *(x.max() for x in (lo_e, lo_s) if len(x) and np.isfinite(x).any())])
    for ax in (a1, a2):
        ax.set_xlabel("request inter-arrival time per device (ms)")
    a1.set_ylabel("CDF")
    a1.set_title("RIT CDF, full range")
    a1.set_ylim(0, 1.02)
    a2.set_xlim(0, max(hi * 1.05, 1e-3))
    a2.set_ylim(0, 0.105)
    a2.set_title("Zoom on the low end (p0–p10)")
    a1.legend(loc="lower right")
    return svg(fig)


def fig_rt_over_time(rep: RunReport) -> str:
    df: pd.DataFrame = rep.data.rt_time
    fig, (a1, a2) = subplots(2, 1, figsize=(10, 4.6), sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    x = df["t_s"] + 0.5  # per-second bins, drawn at their middle
    if "sent" in df:
        a1.plot(x, df["sent"], color=GREY, lw=1.2, label="sent")
    if "count" in df:
        a1.plot(x, df["count"].fillna(0), color=GREEN, lw=1.4, label="ok responses")
    a1.set_ylabel("req/s")
    a1.set_title("Throughput per second")
    a1.set_ylim(bottom=0)
    for col, color, lab in (("p50_ms", BLUE, "p50"), ("p95_ms", ORANGE, "p95"), ("p99_ms", RED, "p99")):
        if col in df:
            a2.plot(x, df[col], color=color, lw=1.4 if lab != "p99" else 1.0, label=lab)
    a2.set_ylabel("response time (ms)")
    a2.set_xlabel("time since test start (s)")
    a2.set_title("Response time percentiles per second")
    a2.set_ylim(bottom=0)
    for ax in (a1, a2):
        _shade(ax, rep, label=ax is a2)
        _end_marker(ax, rep)
        _faults(ax, rep, label=ax is a1)
    a1.legend(loc="lower right", ncol=2)
    a2.legend(loc="upper right", ncol=4)
    return svg(fig)


def fig_fleet_lag(rep: RunReport) -> str:
    """Each engine loop's p99 read lag and timer lateness per window (series/fleet_lag.csv)
    above the devices' response times per second: does R move with the engine's own lag?"""
    df: pd.DataFrame = rep.data.fleet
    fig, (a1, a2) = subplots(2, 1, figsize=(10, 4.6), sharex=True)
    for i, ((engine, loop), g) in enumerate(df.groupby(["engine", "loop"], sort=True)):
        color = CYCLE[i % len(CYCLE)]
        edges = np.append(g["start_s"].to_numpy(float), g["end_s"].to_numpy(float)[-1:])
        for col, style, what in (("read_lag_p99_us", "-", "read lag"),
                                 ("timer_late_p99_us", "--", "timer lateness")):
            y = g[col].to_numpy(float) / 1e3
            if np.isfinite(y).any():
                a1.stairs(np.nan_to_num(y), edges, color=color, ls=style, lw=1.4,
                          label=f"{engine} loop {loop} {what}")
    a1.axhline(rep.fleet["limit_ms"], color=RED, ls=":", lw=1, label="loop_lag limit")
    a1.set_ylabel("p99 per window (ms)")
    a1.set_title("Engine loops: read lag and timer lateness")
    a1.set_ylim(bottom=0)
    rt = rep.data.rt_time
    if rt is not None:
        x = rt["t_s"] + 0.5
        for col, color, lab in (("p50_ms", BLUE, "p50"), ("p99_ms", RED, "p99")):
            if col in rt:
                a2.plot(x, rt[col], color=color, lw=1.2, label=f"devices' response time {lab}")
    a2.set_ylabel("response time (ms)")
    a2.set_xlabel("time since test start (s)")
    a2.set_title("Devices' response times per second")
    a2.set_ylim(bottom=0)
    for ax in (a1, a2):
        _shade(ax, rep, label=ax is a2)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", ncol=3, bbox_to_anchor=(0, -0.25 if ax is a2 else 1.0),
                      fontsize=7)
    return svg(fig)


def _cdf_finish(fig, ax, x: np.ndarray, xlabel: str, title: str) -> str:
    """Axes of a CDF figure (log x when the values span more than 50x) and its SVG."""
    if len(x) and np.nanmin(x) > 0 and np.nanmax(x) / np.nanmin(x) > 50:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    return svg(fig)


def fig_rt_cdf(rep: RunReport) -> str:
    cdf = rep.data.rt_cdf   # series/rt_cdf.csv: the analysis's thinned ECDF
    x, y = cdf["rt_ms"].to_numpy(float), cdf["cdf"].to_numpy(float)
    fig, ax = subplots(figsize=(10, 3.2))
    ax.step(x, y, where="post", color=BLUE, lw=1.6, label="all successful requests")
    rt = rep.overall["rt"]
    for q, color in (("p50", BLUE), ("p95", ORANGE), ("p99", RED)):
        v = rt[q]  # sections.rt_stats: always a dict with p50/p95/p99 (None if absent)
        if v is not None:
            ax.axvline(v, color=color, ls="--", lw=0.9)
            ax.annotate(f"{q} {v:.1f} ms", (v, 0.04 if q == "p50" else 0.5 if q == "p95" else 0.25),
                        xytext=(4, 0), textcoords="offset points", color=color, fontsize=8)
    return _cdf_finish(fig, ax, x, "response time (ms)", "Response time CDF")


def fig_rd(rep: RunReport) -> str:
    """R_d = (R - S) / S (dimensionless): CD node per probe (calibration at t < 0), devices' median
    per analysis window, calibration median and detection threshold."""
    d = rep.data.rd
    b = rep.summary.contention.baseline
    fig, ax = subplots(figsize=(10, 3.4))
    cd = d.cd
    if cd is not None:
        cal = cd[cd["phase"] == "calibration"] if "phase" in cd else cd.iloc[:0]
        test = cd[cd["phase"] != "calibration"] if "phase" in cd else cd
        if len(cal):
            ax.axvspan(cal["t_s"].min(), 0, color=GRID, alpha=0.6, lw=0, label="calibration (CD alone)", zorder=0)
            ax.plot(cal["t_s"], cal["rd"], color=INK, lw=1.0, marker=".", ms=3)
        ax.plot(test["t_s"], test["rd"], color=INK, lw=1.4, marker=".", ms=3, label="CD node R_d (per probe)")
    w = d.windows
    if w is not None and len(w):
        dev = w[w["device"].astype(str) == "all"]
        if len(dev):
            xs = np.r_[dev["window_start_s"].to_numpy(), dev["window_end_s"].to_numpy()[-1]]
            ys = np.r_[dev["p50_rd"].to_numpy(), dev["p50_rd"].to_numpy()[-1]]
            ax.step(xs, ys, where="post", color=PURPLE, lw=1.6, label="devices R_d (median per window)")
    if b is not None and b.median_rd is not None:
        ax.axhline(b.median_rd, color=GREEN, ls="--", lw=1,
                   label=f"CD calibration median {b.median_rd:.3f}")
    if b is not None and b.threshold_rd is not None:
        ax.axhline(b.threshold_rd, color=RED, ls="--", lw=1,
                   label=f"threshold {b.threshold_rd:.3f}")
    ys = [ln.get_ydata() for ln in ax.get_lines()]
    top = max((float(np.nanmax(np.asarray(y, float))) for y in ys if len(y)), default=1.0)
    return _finish_time_plot(fig, ax, rep, "R_d = (R − S) / S", "Relative response-time deviation R_d", 3,
                             ylim=(min(0, ax.get_ylim()[0]), max(top * 1.15, 0.1)))


def fig_evidence(rep: RunReport) -> str:
    """Per window and place: run-queue wait per request as a share of the service time (solid)
    and the share of the place's core other processes used (dotted)."""
    df: pd.DataFrame = rep.data.evidence
    df = df[df["window"] >= 0]
    fig, ax = subplots(figsize=(10, 3.2))
    for i, (place, g) in enumerate(sorted(df.groupby(df["place"].astype(str)))):
        color = CYCLE[i % len(CYCLE)]
        xs = np.r_[g["start_s"].to_numpy(float), g["end_s"].to_numpy(float)[-1:]]
        wait = g["wait_of_service"].to_numpy(float)
        if np.isfinite(wait).any():
            ax.step(xs, np.r_[wait, wait[-1:]], where="post", color=color, lw=1.6,
                    label=f"{place}: CPU wait per request / service time")
        foreign = g["foreign_share"].to_numpy(float)
        # the CD node shares the device cores: their line already shows what else ran there
        if place != "cd-node" and np.isfinite(foreign).any() and np.nanmax(foreign) > 0:
            ax.step(xs, np.r_[foreign, foreign[-1:]], where="post", color=color, lw=1.2, ls=":",
                    label=f"{place}: other processes (share of the core)")
    top = np.nanmax(np.r_[df["wait_of_service"].to_numpy(float), df["foreign_share"].to_numpy(float),
                          [0.1]])
    return _finish_time_plot(fig, ax, rep, "share", "What the kernel saw, per window", 2,
                             ylim=(0, max(float(top) * 1.15, 0.1)))


def fig_host_share(rep: RunReport) -> str:
    """Per window and device place: the measured mean R split into the system's part (below)
    and the testbed's (the host's added latency beyond the run's own level, on top), with the
    tolerance drawn above the system's part."""
    df: pd.DataFrame = rep.data.host_share
    places = [p for p in sorted(df["place"].astype(str).unique())
              if p.startswith("core") or p == "devices"]
    fig, ax = subplots(figsize=(10, 3.2))
    e = rep.summary.evidence
    hs = e.host_share if e is not None else None
    v = e.params.verdict if hs is not None else None
    for i, place in enumerate(places):
        g = df[df["place"].astype(str) == place].sort_values("start_s")
        xs = np.r_[g["start_s"].to_numpy(float), g["end_s"].to_numpy(float)[-1:]]
        system = g["system_ms"].to_numpy(float)
        total = g["r_ms"].to_numpy(float)
        color = CYCLE[i % len(CYCLE)]
        ax.fill_between(xs, np.r_[system, system[-1:]], step="post", color=color, alpha=0.25,
                        label=f"{place}: the system's part of mean R")
        ax.fill_between(xs, np.r_[system, system[-1:]], np.r_[total, total[-1:]], step="post",
                        color=RED, alpha=0.55 if i == 0 else 0.35,
                        label=f"{place}: the testbed's part (host added)")
        if v is not None and (v.tolerance_ms is not None or v.tolerance_share is not None):
            lim = system + (v.tolerance_ms if v.tolerance_ms is not None
                            else v.tolerance_share * total)
            ax.step(xs, np.r_[lim, lim[-1:]], where="post", color=color, ls="--", lw=1,
                    label=f"{place}: tolerance ({hs.tolerance})")
    top = np.nanmax(np.r_[df["r_ms"].to_numpy(float), [1.0]])
    return _finish_time_plot(fig, ax, rep, "mean R per window (ms)",
                             "Response time: the system's part and the testbed's", 2,
                             ylim=(0, float(top) * 1.2))


def fig_cpu_cores(rep: RunReport) -> str:
    df: pd.DataFrame = rep.data.cpu_cores
    fig, ax = subplots(figsize=(10, 3.0))
    roles = {core: ", ".join(comps)
             for core, comps in (core_roles(rep.plan) if rep.plan else {}).items()}
    for core, g in sorted(df.groupby("core"), key=lambda kv: (len(str(kv[0])), str(kv[0]))):
        lab = f"core {core}" + (f" ({_short(roles[str(core)])})" if str(core) in roles else "")
        ax.plot(g["t_s"], g["busy_pct"], lw=1.3, label=lab)
    return _finish_time_plot(fig, ax, rep, "busy (%)", "CPU per core (collectl)", 3, ylim=(0, 105))


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def fig_cpu_containers(rep: RunReport) -> str:
    """CPU use and run-queue wait per component (series/cpu_groups.csv: a group's devices summed
    by the analysis)."""
    df: pd.DataFrame = rep.data.cpu_containers
    label = [f"{g}-* ({int(n)} devices, sum)" if pd.notna(n) else g
             for g, n in zip(df["group"].astype(str), df["devices"])]
    agg = pd.DataFrame({"series": label, "t_r": df["t_s"], "cpu_pct": df["cpu_pct"],
                        "runq_ms_per_s": df["runq_ms_per_s"]})
    has_rq = agg["runq_ms_per_s"].notna().any()
    fig, axes = subplots(2 if has_rq else 1, 1, figsize=(10, 4.8 if has_rq else 3.0), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2] if has_rq else [1]})
    a1 = axes[0][0]
    order = list(agg.groupby("series")["cpu_pct"].mean().sort_values(ascending=False).index[:10])
    colors = {name: CYCLE[i % len(CYCLE)] for i, name in enumerate(order)}
    for name in order:
        g = agg[agg.series == name]
        a1.plot(g["t_r"], g["cpu_pct"], lw=1.3, color=colors[name], label=name)
    a1.set_ylabel("CPU (% of one core)")
    a1.set_title("CPU per container (cgroups)")
    a1.set_ylim(bottom=0)
    if not has_rq:
        return _finish_time_plot(fig, a1, rep, "CPU (% of one core)", "CPU per container (cgroups)", 4)
    a2 = axes[1][0]
    for name in order:
        g = agg[agg.series == name]
        a2.plot(g["t_r"], g["runq_ms_per_s"], lw=1.2, color=colors[name])
    _shade(a1, rep, label=False)
    _end_marker(a1, rep)
    a1.legend(loc="upper left", ncol=4, fontsize=7.5)
    return _finish_time_plot(fig, a2, rep, "run-queue wait (ms/s)", "Waiting for a CPU (run queue)", 4)


# --------------------------------------------------------------------------- registry

# id, data key, title, how-to-read caption, function
def fig_notify_time(rep: RunReport) -> str:
    d = rep.data.notify
    over, pts = d.over, d.points
    fig, ax = subplots(figsize=(10, 3.2))
    if pts is not None and len(pts):
        ax.plot(pts["t_s"], pts["latency_ms"], ".", ms=2, color=GREY, alpha=0.5, label="each notification")
    ax.plot(over["t_s"] + 0.5, over["p50"], color=BLUE, lw=1.4, label="p50 per second")
    ax.plot(over["t_s"] + 0.5, over["p99"], color=RED, lw=1.2, label="p99 per second")
    return _finish_time_plot(fig, ax, rep, "latency (ms)", "Notification latency over time", 3)


def fig_notify_cdf(rep: RunReport) -> str:
    cdf = rep.data.notify.cdf
    x, y = cdf["latency_ms"].to_numpy(float), cdf["cdf"].to_numpy(float)
    fig, ax = subplots(figsize=(10, 3.2))
    ax.step(x, y, where="post", color=BLUE, lw=1.6)
    return _cdf_finish(fig, ax, x, "one-way latency device → GE (ms)", "Notification latency CDF")


def fig_blockwise_time(rep: RunReport) -> str:
    df = rep.data.blockwise
    df = df[df["blocks"] > 1]
    fig, ax = subplots(figsize=(10, 3.2))
    for kind, color in (("block2", BLUE), ("block1", ORANGE)):
        k = df[df["kind"] == kind]
        clean = k[k["retransmissions"] == 0]
        retx = k[k["retransmissions"] > 0]
        ax.plot(clean["t_s"], clean["time_ms"], ".", ms=3, color=color, label=f"{kind}, no retransmission")
        ax.plot(retx["t_s"], retx["time_ms"], "x", ms=5, color=color, label=f"{kind}, retransmitted")
        failed = k[k["outcome"] != "ok"]
        if len(failed):
            ax.plot(failed["t_s"], np.zeros(len(failed)), "v", ms=6, color=RED, label=f"{kind}, failed")
    if len(df) and np.nanmax(df["time_ms"].to_numpy(float), initial=0) > 100 * max(
            np.nanmin(df["time_ms"].to_numpy(float), initial=1), 0.01):
        ax.set_yscale("symlog", linthresh=10)
    return _finish_time_plot(fig, ax, rep, "transfer time (ms)", "Block-wise transfer times", 3)


FIGURES: list[tuple[str, str, str, str, Callable[[RunReport], str]]] = [
    ("fig-rit-cdf", "rit", "Expected vs submitted request inter-arrival times",
     "The two curves should lie on top of each other: a submitted curve shifted right or flattened at "
     "the low end means the GE sent late or bunched requests (compare with the paper's Figure 6).",
     fig_rit_cdf),
    ("fig-rt-time", "rt_time", "Throughput and response times over time",
     "Flat lines mean a steady state. Spikes inside the shaded windows come from the host. Outside "
     "them neither the CD node nor the kernel's evidence (below) saw the host distort the run, so "
     "spikes there are the system under test's, as far as the evidence listed under Host evidence "
     "can tell.", fig_rt_over_time),
    ("fig-rt-cdf", "rt_cdf", "Response time distribution",
     "Read the share of requests answered within a latency budget: find the budget on the x axis, read "
     "the fraction on the y axis. Dashed lines mark p50, p95 and p99.", fig_rt_cdf),
    ("fig-rd", "rd", "Relative response-time deviation R_d: devices and contention-detector node",
     "R_d = (R − S) / S, how much longer than its service time S a request took (0 = no overhead). The "
     "CD node was measured alone during calibration (grey, t < 0); during the test its R_d should stay "
     "near that median. Windows where it rose above the threshold are shaded: there the host was "
     "contended.", fig_rd),
    ("fig-host-share", "host_share", "How much of the response time the host added, per window",
     "Each window's mean response time of the devices split in two: the system's part (light) "
     "and the testbed's (red): the latency the host added per request beyond the run's own level "
     "(run-queue wait, busy stretch or wake-up delay, whichever is largest). The dashed line is "
     "the tolerance: a window whose added latency is beyond it with 95 % confidence is flagged "
     "(shaded).", fig_host_share),
    ("fig-evidence", "evidence", "Host evidence: CPU wait and other processes, per window",
     "Solid: how long each place's threads waited for a CPU per request, as a share of the "
     "requests' service time (devices pinned to one core share it, so some wait is the run's "
     "own: the amount above the run's own level is the host's, in the figure above). Dotted: "
     "the share of the place's core that processes outside this run used. "
     "Shaded: flagged windows.", fig_evidence),
    ("fig-fleet-lag", "fleet", "Engine lag beside the devices' response times",
     "Top: per window, how late each engine loop read its devices' requests (solid) and ended "
     "their sleep service (dashed), p99; above the dotted limit the loop_lag rule may flag the "
     "window. Bottom: the devices' response times. When R rises with the engine's lag, the "
     "testbed, not the system under test, added it.", fig_fleet_lag),
    ("fig-notify-time", "notify", "Observe: notification latency over time",
     "One-way latency of every notification, GE receive time minus the device's emission time (both "
     "on the host's CLOCK_MONOTONIC, so exact), with per-second p50 and p99.", fig_notify_time),
    ("fig-notify-cdf", "notify", "Observe: notification latency distribution",
     "Share of notifications delivered within a latency budget.", fig_notify_cdf),
    ("fig-blockwise-time", "blockwise", "Block-wise: whole-transfer times",
     "Each mark is one multi-block transfer (first block sent to final response). Crosses needed "
     "retransmissions: every lost datagram adds the RFC 7252 timeout (2-3 s, doubling), which is "
     "how loss stretches transfers; triangles at 0 failed.", fig_blockwise_time),
    ("fig-cpu-cores", "cpu_cores", "CPU utilisation per core",
     "A core near 100 % cannot give the components placed on it (legend) more time; saturation on the "
     "GE's core threatens send accuracy, on device cores it inflates R_d.", fig_cpu_cores),
    ("fig-cpu-containers", "cpu_containers", "CPU utilisation per container",
     "Which component used the CPU (100 % = one full core; a group's devices are summed) and how long its "
     "threads waited for a CPU each second: run-queue wait is the direct sign of CPU contention.",
     fig_cpu_containers),
]


def make_figures(rep: RunReport) -> list[dict[str, Any]]:
    """All figures, in report order: {id, title, caption, svg} or {id, title, missing: reason}."""
    out = []
    for fid, key, title, caption, fn in FIGURES:
        item = {"id": fid, "title": title, "caption": caption, "svg": None, "missing": None}
        if not rep.data.has(key):
            item["missing"] = rep.data.missing.get(key, "no data")
        else:
            try:
                item["svg"] = scope_ids(fn(rep), fid)
            except Exception as e:  # a broken input must not take the whole report down
                close_all()
                item["missing"] = f"the figure could not be drawn ({type(e).__name__}: {e})"
        out.append(item)
    return out
