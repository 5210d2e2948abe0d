"""The look of every figure (palette, matplotlib rcParams) and how a figure becomes inline SVG;
shared by the run report and the sweep report."""
from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402

INK, GRID, MUTED = "#1f2933", "#e4e7eb", "#7b8794"
BLUE, ORANGE, RED, GREEN, GREY, PURPLE = "#2f6fde", "#e8871e", "#c92a2a", "#2b8a3e", "#9aa5b1", "#7048e8"
CYCLE = [BLUE, ORANGE, GREEN, PURPLE, RED, "#0c8599", "#a61e4d", "#5c940d", "#495057", "#f08c00"]
SHADE = "#ffa8a8"

plt.rcParams.update({
    "svg.fonttype": "none", "svg.hashsalt": "wotbench", "font.family": "DejaVu Sans", "font.size": 9,
    "axes.edgecolor": GREY, "axes.labelcolor": INK, "axes.titlesize": 10, "axes.titleweight": "bold",
    "axes.titlecolor": INK, "axes.titlelocation": "left", "axes.grid": True, "grid.color": GRID,
    "grid.linewidth": 0.8, "axes.spines.top": False, "axes.spines.right": False,
    "xtick.color": MUTED, "ytick.color": MUTED, "legend.frameon": False, "legend.fontsize": 8,
    "axes.prop_cycle": matplotlib.cycler(color=CYCLE), "figure.dpi": 100,
})


def subplots(*args, **kwargs):
    """``plt.subplots`` laid out by matplotlib's constrained layout engine, once, when the
    figure is saved: labels, titles and legends outside the axes (below them) fit in the figure
    without a ``tight_layout`` pass before and a ``bbox_inches="tight"`` pass at the save."""
    return plt.subplots(*args, layout="constrained", **kwargs)


def svg(fig) -> str:
    """The figure as an inline ``<svg class="plot">`` (text kept as text: searchable, crisp).
    A figure from :func:`subplots` is laid out already; any other is cropped to its contents."""
    buf = io.StringIO()
    laid_out = isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    fig.savefig(buf, format="svg", bbox_inches=None if laid_out else "tight",
                metadata={"Date": None, "Creator": None})
    plt.close(fig)
    s = buf.getvalue()
    s = s[s.index("<svg"):]  # drop XML prolog + DOCTYPE for inline embedding
    s = re.sub(r"<metadata>.*?</metadata>\s*", "", s, count=1, flags=re.S)
    # responsive: keep the viewBox, let CSS size it
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot"', s, count=1)


def scope_ids(svg_text: str, prefix: str) -> str:
    """Prefix every id (and its references) so several inline SVGs can share one HTML page."""
    svg_text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg_text)
    svg_text = re.sub(r'url\(#([^)]+)\)', rf'url(#{prefix}-\1)', svg_text)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', svg_text)


def close_all() -> None:
    plt.close("all")
