"""The detector's resolution in time (docs/VALIDATION.md "Resolution in time"): the same run
re-analysed with shorter windows (10, 5, 2 s ...) — can the verdict say when the antagonist ran
to within 2 s instead of 10?

``python -m wotbench.validation.resolution RUN_DIR [RUN_DIR ...] [--lengths 10,5,2]``: per run
and window length, the flagged span against the study's antagonist episode (its
``study-antagonist.json``): onset and end error (s), the share of the episode covered by
flagged windows and the flagged time outside it. Nothing is written into the run directories.
The run-queue wait's grid is ``sub_window_s`` = min(1 s, L / 2): the monitor reads it once a
second (``monitor.interval_s``), so shorter windows add nothing the monitor did not sample. A
window's bound is the run's own noise over its N requests (σ/√N, cd_module/hostshare.py), so a
2 s window's is wider than a 10 s one's by its fewer requests, not by having two sub-intervals.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

from wotbench.analysis import analyze
from wotbench.rundir import AnalysisParams, RunDir
from wotbench.rundir.evidence import EvidenceParams, VerdictParams
from wotbench.rundir.summary import ContentionParams, RdParams
from wotbench.validation.antagonist import read_record


def params_for(length_s: float) -> AnalysisParams:
    return AnalysisParams(rd=RdParams(window_s=length_s),
                          contention=ContentionParams(window_s=length_s),
                          evidence=EvidenceParams(verdict=VerdictParams(
                              sub_window_s=min(1.0, length_s / 2))))


def spans(flags: list[tuple[float, float, bool]]) -> list[tuple[float, float]]:
    """Consecutive flagged windows merged: [(start, end)]."""
    out: list[list[float]] = []
    for s, e, f in flags:
        if not f:
            continue
        if out and abs(out[-1][1] - s) < 1e-9:
            out[-1][1] = e
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def compare(flagged: list[tuple[float, float]], episode: Optional[tuple[float, float]]
            ) -> dict[str, Any]:
    """Onset/end error, the episode's covered share and the flagged time outside it."""
    total = sum(b - a for a, b in flagged)
    if episode is None:
        return {"onset_err_s": None, "end_err_s": None, "covered": None, "outside_s": total}
    e0, e1 = episode
    inside = sum(max(0.0, min(b, e1) - max(a, e0)) for a, b in flagged)
    return {"onset_err_s": flagged[0][0] - e0 if flagged else None,
            "end_err_s": flagged[-1][1] - e1 if flagged else None,
            "covered": inside / (e1 - e0) if e1 > e0 else None, "outside_s": total - inside}


def episode_of(run_dir: Path) -> Optional[tuple[float, float]]:
    rd = RunDir(run_dir)
    rec_path = rd.study_antagonist_json
    run = rd.read_run()
    if not rec_path.is_file() or run.test is None:
        return None
    return read_record(rec_path).episode_s(run.test.start_mono_ns)


def resolve(run_dir: Path, lengths: list[float]) -> list[dict[str, Any]]:
    ep = episode_of(run_dir)
    rows = []
    for length in lengths:
        s = analyze(run_dir, params_for(length), write=False)
        flags = [(w.start_s, w.end_s, any(pw.beyond_tolerance for pw in w.places))
                 for w in (s.evidence.windows if s.evidence else [])]
        rows.append({"run": str(run_dir), "window_s": length, "episode": ep,
                     "flagged": spans(flags), **compare(spans(flags), ep)})
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m wotbench.validation.resolution")
    ap.add_argument("run_dirs", nargs="+")
    ap.add_argument("--lengths", default="10,5,2")
    a = ap.parse_args(argv)
    lengths = [float(x) for x in a.lengths.split(",") if x.strip()]
    print("| run | window (s) | episode (s) | flagged (s) | onset error (s) | end error (s) | "
          "covered | flagged outside (s) |\n|---|---|---|---|---|---|---|---|")
    for d in a.run_dirs:
        for r in resolve(Path(d), lengths):
            f = lambda x, n=1: "—" if x is None else f"{x:.{n}f}"  # noqa: E731
            ep = "—" if r["episode"] is None else f"{r['episode'][0]:.1f}–{r['episode'][1]:.1f}"
            fl = ", ".join(f"{a:g}–{b:g}" for a, b in r["flagged"]) or "none"
            print(f"| {Path(d).name} | {r['window_s']:g} | {ep} | {fl} | {f(r['onset_err_s'])} | "
                  f"{f(r['end_err_s'])} | {f(r['covered'], 2)} | {f(r['outside_s'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
