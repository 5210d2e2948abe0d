"""The sweep report's figures (the paper's Fig 5, 7, 8, 9), as inline SVG strings.

Every figure function takes the rows of :func:`wotbench.sweep.report.collect`
(:class:`~wotbench.sweep.rows.PointRow`) and returns
``{"id", "title", "caption", "svg"}`` with ``svg=None`` and ``missing="not available because …"``
when the series lacks the data.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Optional

from wotbench.report.plotting import MUTED, RED, plt, svg
from wotbench.sweep.rows import PointRow as Row


def _from_zero(ax) -> None:
    """y from 0 with headroom: autoscaling hugs nearly equal values and clips their markers."""
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)


def _usable(rows: list[Row], *keys: str) -> list[Row]:
    return [r for r in rows if all(r.fact(k) is not None for k in keys)]


def _missing(rows: list[Row], keys: tuple[str, ...], what: str) -> Optional[str]:
    done = [r for r in rows if r.has_summary]
    if not done:
        return "not available because no point has finished (no summary.json yet)"
    lacking = [k for k in keys if all(r.fact(k) is None for r in done)]
    if lacking:
        return f"not available because {what} ({', '.join(lacking)}) is missing from every run"
    return None


def _curves(rows: list[Row], by: Callable[[Row], Any], x: str, y: str) -> dict[Any, list[tuple]]:
    out: dict[Any, list[tuple]] = defaultdict(list)
    for r in _usable(rows, x, y):
        out[by(r)].append((r.fact(x), r.fact(y), r.verdict))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in sorted(out.items(), key=lambda kv: str(kv[0]))}


def _plot_curves(ax, curves: dict, label: Callable[[Any], str], marker: str = "o", ls: str = "-") -> None:
    for key, pts in curves.items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        line, = ax.plot(xs, ys, marker=marker, ls=ls, label=label(key))
        flagged = [(a, b) for a, b, v in pts if v not in (None, "trustworthy")]
        if flagged:   # a red ring around points whose run was not trustworthy
            ax.scatter(*zip(*flagged), s=90, facecolors="none", edgecolors=RED, zorder=5)


def _fig(fid: str, title: str, caption: str, svg_text: Optional[str] = None,
         missing: Optional[str] = None) -> dict:
    return {"id": fid, "title": title, "caption": caption, "svg": svg_text, "missing": missing}


def _aff_varies(rows: list[Row]) -> bool:
    """placement.affinity differs between the finished points: curves are told apart by it."""
    return len({r.affinity for r in rows if r.has_summary}) > 1


def _vs_throughput(rows: list[Row], fid: str, title: str, cap: str, ykey: str, ylabel: str,
                   what: str) -> dict:
    miss = _missing(rows, ("tput_per_device", ykey, "devices"), what)
    if miss:
        return _fig(fid, title, cap, missing=miss)
    varies = _aff_varies(rows)

    def label(r: Row) -> str:
        return f"{r.devices} devices" + (f", {r.affinity}" if varies else "")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    _plot_curves(ax, _curves(rows, label, "tput_per_device", ykey), str)
    ax.set_xlabel("throughput per device (req/s)")
    ax.set_ylabel(ylabel)
    _from_zero(ax)
    ax.legend(ncol=2)
    return _fig(fid, title, cap, svg(fig))


def fig7_rt_vs_throughput(rows: list[Row]) -> dict:
    return _vs_throughput(
        rows, "fig7", "Response time vs per-device throughput (paper Fig 7)",
        "Median response time (from send) against achieved throughput per device, one curve per "
        "device count. Red rings: runs whose verdict was not trustworthy.",
        "rt_p50_ms", "response time p50 (ms)", "the throughput or response time")


def fig8_cd_rt_vs_throughput(rows: list[Row]) -> dict:
    return _vs_throughput(
        rows, "fig8", "Contention-detector node response time vs per-device throughput (paper Fig 8)",
        "Median response time of the CD node during the test, against the devices' per-device "
        "throughput; flat means the host did not slow the CD node down.",
        "cd_rt_ms", "CD node response time p50 (ms)", "the CD node's response time")


def fig9_rd_vs_devices(rows: list[Row]) -> dict:
    title = "R_d of the devices and of the CD node vs number of devices (paper Fig 9)"
    cap = ("Median normalised deviation R_d = (R − S)/S during the test; the CD's calibration median "
           "is the dashed reference.")
    miss = _missing(rows, ("devices", "rd_devices", "rd_cd"), "R_d")
    if miss:
        return _fig("fig9", title, cap, missing=miss)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    label = (lambda r: f"{r.affinity}") if _aff_varies(rows) else (lambda r: "")
    for key, name, ls in (("rd_devices", "devices", "-"), ("rd_cd", "CD node", "--")):
        curves = _curves(rows, label, "devices", key)
        _plot_curves(ax, curves, lambda k, name=name: f"{name} {k}".strip(), ls=ls)
    base = [r.rd_cd_baseline for r in rows if r.rd_cd_baseline is not None]
    if base:
        ax.axhline(sorted(base)[len(base) // 2], color=MUTED, ls=":", lw=1, label="CD calibration")
    ax.set_xlabel("number of devices")
    ax.set_ylabel("R_d (p50)")
    ax.legend(ncol=2)
    return _fig("fig9", title, cap, svg(fig))


def fig5_affinity(rows: list[Row]) -> dict:
    title = "Affinity vs no affinity: response time and CPU utilisation vs devices (paper Fig 5)"
    cap = ("Left: median response time; right: mean host CPU busy (average over cores), one line per "
           "placement.affinity setting.")
    affs = {r.affinity for r in rows if r.has_summary}
    if len(affs) < 2:
        return _fig("fig5", title, cap, missing="not available because placement.affinity does not vary "
                    "in this series (vary it: --vary placement.affinity=pinned,shared)")
    miss = _missing(rows, ("devices", "rt_p50_ms"), "the response time")
    if miss:
        return _fig("fig5", title, cap, missing=miss)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    _plot_curves(a1, _curves(rows, lambda r: r.affinity, "devices", "rt_p50_ms"), str)
    a1.set_xlabel("number of devices")
    a1.set_ylabel("response time p50 (ms)")
    _from_zero(a1)
    a1.legend()
    cpu = _curves(rows, lambda r: r.affinity, "devices", "cpu_total_pct")
    if cpu:
        _plot_curves(a2, cpu, str)
        a2.set_ylim(0, 100)
        a2.legend()
    else:
        a2.text(0.5, 0.5, "CPU utilisation not available\n(no series/cpu_cores.csv)", ha="center",
                va="center", transform=a2.transAxes, color=MUTED)
    a2.set_xlabel("number of devices")
    a2.set_ylabel("host CPU busy (%)")
    return _fig("fig5", title, cap, svg(fig))


def make_figures(rows: list[Row]) -> list[dict]:
    return [fig7_rt_vs_throughput(rows), fig8_cd_rt_vs_throughput(rows), fig9_rd_vs_devices(rows),
            fig5_affinity(rows)]
