"""The sweep report's curves against the varied key with their 95 % confidence intervals
(mean of the repeats, Student-t error bars and band), from :class:`~wotbench.sweep.results.SweepResults`.

One curve per combination of the other varied keys; a setting with a flagged repeat gets a
red ring and "k/n flagged" beside it. No numeric varied key: the settings side by side.
"""
from __future__ import annotations

from typing import Any

from wotbench.report.plotting import RED, plt, svg
from wotbench.sweep.aggregate import SettingRow
from wotbench.sweep.figures import _fig, _from_zero
from wotbench.sweep.results import SweepResults


def _label(ov: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k}={ov.get(k)}" for k in keys)


def _curves(res: SweepResults, metric: str) -> dict[str, list[tuple[Any, SettingRow]]]:
    others = [k for k in res.varied if k != res.x_key]
    out: dict[str, list[tuple[Any, SettingRow]]] = {}
    for i, s in enumerate(res.settings):
        if s.metrics[metric].mean is None:
            continue
        x = s.overrides.get(res.x_key) if res.x_key else i
        out.setdefault(_label(s.overrides, others), []).append((x, s))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in out.items()}


def metric_vs_x(res: SweepResults, metric: str, fid: str, title: str, ylabel: str,
                scale: float = 1.0) -> dict:
    n = res.repeats
    cap = (f"Mean of the repeats ({n} per setting, {res.order} order) with its 95 % confidence "
           "interval (Student t over the repeats: error bars and band; none below 2 repeats). "
           "Red ring: a repeat of that setting was flagged by the verdict (k/n beside it).")
    curves = _curves(res, metric)
    if not curves:
        why = ("no setting has finished" if not any(s.done for s in res.settings)
               else f"{ylabel} is missing from every finished run")
        return _fig(fid, title, cap, missing=f"not available because {why}")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, pts in curves.items():
        xs = [x for x, _ in pts]
        iv = [s.metrics[metric] for _, s in pts]
        ys = [i.mean * scale for i in iv]
        hw = [(i.half_width or 0.0) * scale for i in iv]
        line = ax.errorbar(xs, ys, yerr=hw, marker="o", capsize=3, label=label or None)
        color = line[0].get_color()
        if any(i.half_width is not None for i in iv):
            ax.fill_between(xs, [y - h for y, h in zip(ys, hw)], [y + h for y, h in zip(ys, hw)],
                            color=color, alpha=0.15, lw=0)
        for x, y, (_, s) in zip(xs, ys, pts):
            if s.flagged:
                ax.scatter([x], [y], s=110, facecolors="none", edgecolors=RED, zorder=5)
                ax.annotate(f"{len(s.flagged)}/{s.done} flagged", (x, y), textcoords="offset points",
                            xytext=(6, 6), fontsize=7, color=RED)
    if res.x_key:
        xs_all = [x for pts in curves.values() for x, _ in pts]
        if min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100:
            ax.set_xscale("log")   # e.g. 10 .. 10000 clients
        ax.set_xlabel(res.x_key)
    else:
        ticks = sorted({x for pts in curves.values() for x, _ in pts})
        ax.set_xticks(ticks, [_label(res.settings[i].overrides, res.varied) for i in ticks],
                      rotation=20, ha="right", fontsize=7)
        ax.set_xlabel("setting")
    ax.set_ylabel(ylabel)
    _from_zero(ax)
    if any(curves):
        ax.legend(ncol=2)
    return _fig(fid, title, cap, svg(fig))


def make_ci_figures(res: SweepResults) -> list[dict]:
    x = res.x_key or "setting"
    figs = [metric_vs_x(res, "throughput_rps", "ci-throughput", f"Throughput vs {x}",
                        "throughput (req/s)"),
            metric_vs_x(res, "rt_p95_ms", "ci-p95", f"Response time p95 vs {x}",
                        "response time p95 (ms)")]
    if any(s.metrics["sut_cpu_cores"].mean is not None for s in res.settings):
        figs += [metric_vs_x(res, "sut_cpu_cores", "ci-sut-cpu", f"System under test: CPU vs {x}",
                             "SUT CPU (cores)"),
                 metric_vs_x(res, "sut_rss_peak_mib", "ci-sut-rss",
                             f"System under test: peak RSS vs {x}", "SUT peak RSS (MiB)")]
    return figs
