"""The validation table (``table.md``): one Markdown row per scenario (per point for a series)."""
from __future__ import annotations

from typing import Any, Optional

from wotbench.report.present import cell


def _fmt(x: Any, nd: int = 2) -> str:
    return cell(x, nd)


def _load_txt(load: Optional[dict]) -> str:
    if not load:
        return "–"
    return f"{_fmt(load.get('before'))}→{_fmt(load.get('after'))}"


def _windows_txt(ws: list) -> str:
    return ", ".join(f"{a:g}–{b:g}" for a, b in ws) if ws else "none"


def render_table(results: list[dict]) -> str:
    lines = ["| scenario | contention present (injected) | CD said | flagged windows (s) | "
             "devices R_d p50 | CD R_d p50 cal → test | onset: episode / devices / CD (s) | "
             "onset matched | pass | load 1-min before→after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        name = r["name"]
        if r.get("skipped"):
            why = r["skipped"].split(" (")[0]          # details stay in results.json
            lines.append(f"| {name} | – | not run: {why} | – | – | – | – | – | – | "
                         f"{_load_txt(r.get('load'))} |")
            continue
        ev = r.get("evaluation")
        if ev is None:
            why = str(r.get("error")).splitlines()[0].replace("|", "/")   # details: results.json
            lines.append(f"| {name} | – | run failed: {why} | – | – | – | – | – | no | "
                         f"{_load_txt(r.get('load'))} |")
            continue
        if ev["expect"] == "scale":
            for p in ev["points"]:
                lines.append(
                    f"| {name} n={p['value']} | {'no (rising load)'} | {p['cd_status']} "
                    f"({_fmt(p['cd_windows_flagged'])}/{_fmt(p['cd_windows_tested'])} windows) | – | "
                    f"{_fmt(p['rd_devices_p50'])} (×{_fmt(p['rt_ratio_devices'])} RT) | "
                    f"{_fmt(p['rd_cd_cal_p50'])} → {_fmt(p['rd_cd_test_p50'])} | – | – | – | "
                    f"{_load_txt(p.get('load'))} |")
            lines.append(f"| **{name}** | – | CD onset n={_fmt(ev['cd_onset'])} | – | "
                         f"devices' onset n={_fmt(ev['devices_onset'])} | – | "
                         f"steps apart: {_fmt(ev['onset_steps_apart'])} | "
                         f"{_fmt(ev['onset_matched'])} | {'PASS' if ev['passed'] else 'FAIL'} | – |")
            continue
        eps = ev["episodes"]
        present = ", ".join(f"{e['kind']} {e['start_s']:g}–{e['end_s']:g}" for e in eps) or "no"
        fl = _windows_txt(ev["cd_flagged_windows"])
        if ev["cd_false_windows"]:
            fl += f" (false: {_windows_txt(ev['cd_false_windows'])})"
        lines.append(
            f"| {name} | {present} | {ev['cd_status']} | {fl} | {_fmt(ev['rd_devices_p50'])} | "
            f"{_fmt(ev['rd_cd_cal_p50'])} → {_fmt(ev['rd_cd_test_p50'])} | "
            f"{_fmt(ev['episode_onset_s'])} / {_fmt(ev['devices_onset_s'])} / {_fmt(ev['cd_onset_s'])} | "
            f"{_fmt(ev['onset_matched'])} | {'PASS' if ev['passed'] else 'FAIL'} | "
            f"{_load_txt(r.get('load'))} |")
    return "\n".join(lines) + "\n"
