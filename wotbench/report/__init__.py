"""WoTbench HTML report: one self-contained file per run (`<run_dir>/report.html`).

    render(run_dir, out=None) -> Path   # writes the report, returns its path
    main(run_dir) -> int                # CLI entry: prints the path, 0 on success, 2 on a bad run dir

Raises :class:`ReportError` (a ``WotbenchError``, exit code 2) when the run directory or its
summary.json is missing; every other input is optional.
"""
from __future__ import annotations

import sys
from pathlib import Path

from wotbench.report.view import ReportError, build_view
from wotbench.report.present import jinja_env
from wotbench.rundir import RunDir, atomic

__all__ = ["render", "render_html", "main", "ReportError"]


def render_html(run_dir: Path | str) -> str:
    """The report as an HTML string (nothing written)."""
    from markupsafe import Markup

    from wotbench.report.figures import make_figures

    view = build_view(run_dir)
    figs = make_figures(view)
    for f in figs:
        if f["svg"]:
            f["svg"] = Markup(f["svg"])  # produced by matplotlib, not user text
    page = view.page() | {"figures": {f["id"]: f for f in figs}}
    return jinja_env("wotbench.report").get_template("report.html.j2").render(**page)


def render(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write `<run_dir>/report.html` (or `out`) and return its path."""
    html = render_html(run_dir)
    path = Path(out) if out is not None else RunDir(run_dir).report_html
    return atomic.write_text(path, html)


def main(run_dir: Path | str) -> int:
    """CLI entry point: render the report, print where it is; 2 on a bad run directory."""
    try:
        path = render(run_dir)
    except ReportError as e:
        print(f"wotbench: error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"report: {path}")
    return 0
