"""The merged report's figures, from the raw requests of every cell (requests.csv): the
response-time distribution per cell and overall, and the throughput over time stacked by
cell. Same look as the run report (``wotbench.report.plotting``)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from wotbench.report.plotting import CYCLE, INK, close_all, plt, scope_ids, svg

NS_PER_S = 1e9


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[(rows["outcome"] == "ok") & rows["rt_sent_ms"].notna()]


def fig_rt_cdf(rows: pd.DataFrame) -> str:
    ok = _ok(rows)
    if ok.empty:
        raise ValueError("no successful request")
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for i, (node, g) in enumerate(sorted(ok.groupby("cell"))):
        x = np.sort(g["rt_sent_ms"].to_numpy(float))
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", lw=1.1,
                color=CYCLE[i % len(CYCLE)], label=f"{node} ({len(x)})")
    x = np.sort(ok["rt_sent_ms"].to_numpy(float))
    ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", lw=2.0, color=INK,
            label=f"all cells ({len(x)})")
    if x[0] > 0 and x[-1] > 20 * x[0]:
        ax.set_xscale("log")
    ax.set_xlabel("response time (ms)")
    ax.set_ylabel("share of requests")
    ax.set_ylim(0, 1.01)
    ax.set_title("Response time distribution, per cell and merged")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return svg(fig)


def fig_throughput(rows: pd.DataFrame) -> str:
    """Answers per second of the test, each cell's on its own test clock (they start together
    at T0, within the start skew), stacked."""
    ok = _ok(rows)
    ok = ok[ok["recv_ns"].notna() & (ok["recv_ns"] >= 0)]
    if ok.empty:
        raise ValueError("no answer inside the test")
    second = (ok["recv_ns"].to_numpy(float) // NS_PER_S).astype(int)
    per = pd.crosstab(second, ok["cell"].to_numpy())
    per = per.reindex(range(int(second.max()) + 1), fill_value=0)
    fig, ax = plt.subplots(figsize=(10, 3.0))
    ax.stackplot(per.index + 0.5, per.T.to_numpy(), labels=[str(c) for c in per.columns],
                 colors=[CYCLE[i % len(CYCLE)] for i in range(len(per.columns))], alpha=0.85)
    ax.set_xlabel("time since test start (s)")
    ax.set_ylabel("answers per second")
    ax.set_title("Throughput over time, stacked by cell")
    ax.legend(loc="upper left", ncol=min(len(per.columns), 6), bbox_to_anchor=(0, -0.2))
    fig.tight_layout()
    return svg(fig)


FIGURES: list[tuple[str, str, str, Callable[[pd.DataFrame], str]]] = [
    ("fig-cluster-rt-cdf", "Response time distribution",
     "From every successful request of every cell (the raw data, never averaged percentiles). "
     "A cell whose curve lies right of the others had slower answers: compare its verdict.",
     fig_rt_cdf),
    ("fig-cluster-throughput", "Throughput over time",
     "Successful answers per second, each cell's band on its own test clock. A band that "
     "thins or stops marks a cell that fell behind or was lost.", fig_throughput),
]


def _draw(fn: Callable[[pd.DataFrame], str], rows: pd.DataFrame) -> tuple[Optional[str], Optional[str]]:
    """(svg, None), or (None, why not): a broken input must not take the whole report down."""
    try:
        return fn(rows), None
    except Exception as e:  # noqa: BLE001 - any drawing failure becomes the figure's note
        close_all()
        return None, f"the figure could not be drawn ({type(e).__name__}: {e})"


def make_figures(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """{id, title, caption, svg, missing} per figure, in report order."""
    figs = []
    for fid, title, caption, fn in FIGURES:
        drawn, why = _draw(fn, rows)
        figs.append({"id": fid, "title": title, "caption": caption, "missing": why,
                     "svg": scope_ids(drawn, fid) if drawn else None})
    return figs
