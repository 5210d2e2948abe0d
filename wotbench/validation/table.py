"""The validation table (``table.md``): one Markdown row per scenario with its rates over the
repeats (:mod:`wotbench.validation.rates`), then the matrix totals against the targets."""
from __future__ import annotations

from typing import Any, Optional

from wotbench.report.present import cell

HEADER = ("| scenario | expect | runs | truth | episode windows flagged | CD rule alone | "
          "false windows / clear | onset delay (s) | named | shown by | verdict (runs) | "
          "load 1-min before→after (max) | pass |")


def _fmt(x: Any, nd: int = 2) -> str:
    return cell(x, nd)


def _pct(x: Optional[float]) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def _counts(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], str(kv[0])))
                     if k is not None) or "–"


def _truth(r: dict) -> str:
    a = r.get("antagonist")
    if a:
        where = f" on {a['core']}" if a.get("core") is not None else ""
        return f"{a['kind']}{where} {a['start_s']:g}+{a['duration_s']:g} s"
    if r["expect"] == "clean":
        return "none"
    if r["expect"] == "scale":
        return "overload (devices' R_d)"
    return "injected hogs"


def _load_txt(loads: list[dict]) -> str:
    before = [x["before"] for x in loads if x.get("before") is not None]
    after = [x["after"] for x in loads if x.get("after") is not None]
    return f"{_fmt(max(before)) if before else '–'}→{_fmt(max(after)) if after else '–'}" \
        if loads else "–"


def _one_line(text: Any) -> str:
    return str(text).splitlines()[0].replace("|", "/") if text else "–"


def render_table(results: list[dict], total: Optional[dict] = None) -> str:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for r in results:
        name, rates = r["name"], r.get("rates")
        r = {"expect": "?", **r}
        n_bad = len(r.get("invalid") or []) + len(r.get("missing") or [])
        if r.get("skipped") and not rates:
            why = r["skipped"].split(" (")[0]          # details stay in results.json
            lines.append(f"| {name} | {r['expect']} | 0 | {_truth(r)} | not run: {why} | – | – | "
                         f"– | – | – | – | {_load_txt(r.get('loads') or [])} | – |")
            continue
        if not rates:
            why = _one_line(r.get("error") or (r.get("invalid") or [{}])[0].get("why"))
            lines.append(f"| {name} | {r['expect']} | 0 | {_truth(r)} | run failed: {why} | – | "
                         f"– | – | – | – | – | {_load_txt(r.get('loads') or [])} | no |")
            continue
        c = rates["counts"]
        runs = f"{rates['runs']}" + (f" (+{n_bad} not graded)" if n_bad else "")
        ew = c.get("episode_windows", 0)
        det = (f"{c.get('flagged_episode_windows', 0)}/{ew} ({_pct(rates['detection'])})"
               if ew else "–")
        cd = (f"{c.get('cd_flagged_episode_windows', 0)}/{ew}; status {_counts(rates['cd_status'])}"
              if ew else f"status {_counts(rates['cd_status'])}")
        fw = (f"{rates['false_windows']}/{c.get('clear_windows', 0)}"
              + (f" (CD alone {rates['cd_false_windows']})" if rates["cd_false_windows"] else ""))
        onset = ", ".join(("none" if o["within_one_window"] else "missed")
                          if o["delay_s"] is None else f"{o['delay_s']:g}"
                          for o in rates["onsets"]) or "–"
        if r["expect"] == "scale" and rates["onsets"]:
            onset += " (steps)"
        named = (f"{c.get('named_windows', 0)}/{c['namable_windows']} ({_pct(rates['naming'])})"
                 if c.get("namable_windows") else "–")
        shown = _counts(rates["shown_by"])
        if rates["false_shown_by"]:
            shown += f"; false: {_counts(rates['false_shown_by'])}"
        lines.append(f"| {name} | {r['expect']} | {runs} | {_truth(r)} | {det} | {cd} | {fw} | "
                     f"{onset} | {named} | {shown} | {_counts(rates['status'])} | "
                     f"{_load_txt(r.get('loads') or [])} | {'PASS' if r.get('passed') else 'FAIL'} |")
    out = "\n".join(lines) + "\n"
    notes = [f"- {r['name']}: {x['point']} not graded: {_one_line(x['why'])}"
             for r in results for x in (r.get("invalid") or []) + (r.get("missing") or [])]
    if notes:
        out += "\n" + "\n".join(notes) + "\n"
    if total:
        t, m = total, total["meets"]
        tg = total["targets"]
        out += ("\n| over the matrix | measured | target | met |\n|---|---|---|---|\n"
                f"| episode windows flagged | {t['flagged_episode_windows']}/{t['episode_windows']} "
                f"({_pct(t['detection'])}; CD rule alone {_pct(t['cd_detection'])}) | "
                f"≥ {_pct(tg['detection'])} | {_fmt(m['detection'])} |\n"
                f"| false windows in clean runs | {t['false_windows_clean']} in {t['clean_runs']} runs "
                f"(all scenarios: {t['false_windows_all']}/{t['clear_windows']} clear windows) | 0 | "
                f"{_fmt(m['false_windows_clean'])} |\n"
                f"| onset within one window (step) | {_pct(t['onset_pass'])} of {t['onset_episodes']} | "
                f"100 % | {_fmt(m['onset_within_windows'])} |\n"
                f"| antagonist named | {_pct(t['naming'])} of {t['namable_windows']} flagged windows | "
                f"≥ {_pct(tg['naming'])} | {_fmt(m['naming'])} |\n")
    return out
