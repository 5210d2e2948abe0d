"""WoTbench HTML report: one self-contained file per run (`<run_dir>/report.html`).

    render(run_dir, out=None) -> Path   # writes the report, returns its path
    main(run_dir) -> int                # CLI entry: prints the path, 0 on success, 2 on a bad run dir

Raises :class:`ReportError` (a ``WotbenchError``, exit code 2) when the run directory or its
summary.json is missing; every other input is optional.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .context import ReportError, build_context

__all__ = ["render", "render_html", "main", "ReportError"]


def _fmt(v, digits: int = 1, unit: str = "") -> str:
    if v is None:
        return "–"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f:  # NaN
        return "–"
    s = f"{f:,.{digits}f}"
    return f"{s} {unit}".rstrip() if unit else s


def _ms(v, digits: int = 1) -> str:
    if v is not None and digits == 1:
        try:
            if abs(float(v)) < 1:
                digits = 3
        except (TypeError, ValueError):
            pass
    return _fmt(v, digits, "ms")


def _pct(v, digits: int = 1) -> str:
    if v is None:
        return "–"
    try:
        f = float(v) * 100
    except (TypeError, ValueError):
        return str(v)
    if 0 < f < 0.1:
        return "<0.1 %"
    return f"{f:.{digits}f} %"


def _env():
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("wotbench.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(
        ms=_ms, pct=_pct, num=_fmt,
        rate=lambda v, d=1: _fmt(v, d, "req/s"),
        count=lambda v: _fmt(v, 0),
        secs=lambda v, d=1: _fmt(v, d, "s"),
    )
    return env


def render_html(run_dir: Path | str) -> str:
    """The report as an HTML string (nothing written)."""
    from markupsafe import Markup

    from .figures import make_figures

    ctx = build_context(run_dir)
    figs = make_figures(ctx)
    for f in figs:
        if f["svg"]:
            f["svg"] = Markup(f["svg"])  # produced by matplotlib, not user text
    ctx["figures"] = {f["id"]: f for f in figs}
    return _env().get_template("report.html.j2").render(**ctx)


def render(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write `<run_dir>/report.html` (or `out`) and return its path."""
    html = render_html(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / "report.html"
    path.write_text(html, encoding="utf-8")
    return path


def main(run_dir: Path | str) -> int:
    """CLI entry point: render the report, print where it is; 2 on a bad run directory."""
    try:
        path = render(run_dir)
    except ReportError as e:
        print(f"wotbench: error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"report: {path}")
    return 0
