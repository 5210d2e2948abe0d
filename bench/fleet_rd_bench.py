#!/usr/bin/env python3
"""Fleet + RD benchmark (issue 29): configs/fleet-rd.yaml through `wotbench run`, 100 000
engine devices registering with aiocoap's Resource Directory and pushing readings.

Prints figures, asserts nothing: the registrations offered and the rate the RD answered them
(per 5 s window of the answers' arrival: the rate it sustained), the RD's answer delay R (also
per window: does it grow?), the outcomes (ok, error by code, timeout, unsent), the engines'
send lag (actual − scheduled send, CLOCK_MONOTONIC) and loop lag, the RD's CPU, and which side
gave up first: the RD (its answers lag or never come while the engines sent on time), the
engines (their sends late), or the host. Holds the host lock (testkit/hostlock.py) and prints
the load average before and after.

    .venv/bin/python bench/fleet_rd_bench.py [--set duration_s=30 ...]
    .venv/bin/python bench/fleet_rd_bench.py --smoke   # 300 devices, 3 s, no host lock
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP, run_lines  # noqa: E402

CONFIG = REPO / "configs" / "fleet-rd.yaml"
WINDOW_S = 5.0
LATE_MS = 1.0          # a send this late is the testbed's (analysis/push.py LATE_US)


def _q(v: np.ndarray, q: float) -> float | None:
    v = v[~np.isnan(v)]
    return float(np.quantile(v, q)) if len(v) else None


def _f(v, spec: str = ".1f") -> str:
    return "–" if v is None else format(v, spec) if isinstance(v, float) else str(v)


def _push_rows(rd: Path, run: dict) -> pd.DataFrame:
    frames = [pd.read_csv(rd / f["dir"] / "fleet-push.csv") for f in run.get("fleets") or []
              if (rd / f["dir"] / "fleet-push.csv").is_file()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _windows(reg: pd.DataFrame, duration_s: float) -> list[dict]:
    """Per window of the test (and after it, while answers came): registrations due, sent,
    answered ok (by the answer's arrival) and R p50 of those answers."""
    recv = reg["received_kernel_ns"].fillna(reg["received_ns"]).to_numpy(np.float64) / 1e9
    ok = (reg["outcome"] == "ok").to_numpy()
    due = reg["scheduled_ns"].to_numpy(np.float64) / 1e9
    r_ms = (recv - reg["sent_ns"].to_numpy(np.float64) / 1e9) * 1e3
    end = max(duration_s, float(np.nanmax(recv[ok])) if ok.any() else 0.0)
    out = []
    for w0 in np.arange(0.0, end, WINDOW_S):
        inw = (recv >= w0) & (recv < w0 + WINDOW_S) & ok
        out.append({"start_s": float(w0), "due": int(((due >= w0) & (due < w0 + WINDOW_S)).sum()),
                    "answered": int(inw.sum()), "r_p50_ms": _q(r_ms[inw], 0.5),
                    "r_p99_ms": _q(r_ms[inw], 0.99)})
    return out


def measure(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="wotbench-fleet-rd-"))
    cmd = [sys.executable, "-m", "wotbench.cli", "run", str(CONFIG), "--out-root", str(out)] + \
        [x for s in args.set for x in ("--set", s)]
    load0 = os.getloadavg()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    row = {"rc": proc.returncode, "wall_s": time.monotonic() - t0, "load_before": load0,
           "load_after": os.getloadavg(), "dir": str(out)}
    if proc.returncode not in (0, 3, 4):
        row["error"] = (proc.stdout + proc.stderr)[-800:]
    return figures(out, row)


def figures(out: Path, row: dict) -> dict:
    """What the run under ``out`` measured, into ``row``."""
    runs = sorted(out.glob("*/run.json"))
    if not runs:
        row.setdefault("error", "no run directory")
        return row
    rd = runs[0].parent
    run = json.loads(runs[0].read_text())
    row["error"] = run.get("error") or row.get("error")
    fleets = run.get("fleets") or []
    row.update(devices=sum(f["devices"] for f in fleets), engines=len(fleets),
               duration_s=(run.get("test") or {}).get("duration_s"), failures=len(run.get("failures") or []))
    t = _push_rows(rd, run)
    if t.empty:
        return row
    dur = float(row["duration_s"] or 0) or 1.0
    for op in ("register", "reading"):
        m = t[t["op"] == op]
        sent = m["sent_ns"].notna()
        recv = m["received_kernel_ns"].fillna(m["received_ns"])
        r_ms = ((recv - m["sent_ns"]) / 1e6)[m["outcome"] == "ok"].to_numpy(np.float64)
        codes = m["code"].dropna().astype(str).value_counts().to_dict()
        row[op] = {"rows": len(m), "sent": int(sent.sum()),
                   "outcomes": m["outcome"].value_counts().to_dict(), "codes": codes,
                   "retransmissions": int(m["retransmissions"].sum()),
                   "offered_per_s": len(m) / dur,
                   "r_p50_ms": _q(r_ms, 0.5), "r_p99_ms": _q(r_ms, 0.99),
                   "r_max_ms": float(r_ms.max()) if len(r_ms) else None}
    reg = t[t["op"] == "register"]
    if len(reg):
        w = _windows(reg, dur)
        row["windows"] = w
        full = [x["answered"] / WINDOW_S for x in w if x["start_s"] + WINDOW_S <= dur]
        row["answered_per_s_median"] = float(np.median(full)) if full else None
        row["answered_per_s_max"] = max(full) if full else None
        ok = reg[reg["outcome"] == "ok"]
        if len(ok):
            span = (ok["received_ns"].max() - reg["scheduled_ns"].min()) / 1e9
            row["answered_per_s_overall"] = len(ok) / span if span > 0 else None
    test = t[(t["phase"] == "test") & t["sent_ns"].notna()]
    lag_ms = ((test["sent_ns"] - test["scheduled_ns"]) / 1e6).to_numpy(np.float64)
    row.update(lag_p50_us=_q(lag_ms * 1e3, 0.5), lag_p99_us=_q(lag_ms * 1e3, 0.99),
               lag_max_us=float(lag_ms.max() * 1e3) if len(lag_ms) else None,
               late_share=float((lag_ms > LATE_MS).mean()) if len(lag_ms) else None)
    summaries = [json.loads((rd / f["dir"] / "fleet-summary.json").read_text()) for f in fleets
                 if (rd / f["dir"] / "fleet-summary.json").is_file()]
    loops = [lp for s in summaries for lp in s["loop"]]
    lags = [lp["read_lag_ns"]["p99"] for lp in loops if lp["read_lag_ns"]["p99"] is not None]
    row["engine_cpu_s"] = sum(lp["cpu_ns"] for lp in loops) / 1e9
    row["engine_send_errors"] = sum((s.get("push") or {}).get("send_errors", 0) for s in summaries)
    row["engine_read_lag_p99_us"] = max(lags) / 1e3 if lags else None
    sfile = rd / "summary.json"
    if sfile.exists():
        s = json.loads(sfile.read_text())
        comps = (s.get("sut_resources") or {}).get("components") or {}
        rdc = next((c for n, c in comps.items() if c["group"] == "rd"), None)
        row["rd_cpu_cores"] = rdc["test"]["cpu_cores"] if rdc else None
        row["rd_rss_mib"] = (rdc["test"]["rss_peak_bytes"] or 0) / 2**20 if rdc else None
        store = next((c for n, c in comps.items() if c["group"] == "store"), None)
        row["store_cpu_cores"] = store["test"]["cpu_cores"] if store else None
        row["cores"] = {c["group"]: n for n, c in comps.items()}
        plan = json.loads((rd / "plan.json").read_text()) if (rd / "plan.json").is_file() else {}
        row["placement"] = {k: v for k, v in (plan.get("devices") or {}).items()
                            if not k.startswith("meter-")} | {
            f["name"]: f["cpuset"] for f in fleets}
        row["verdict"] = s["verdict"]["status"]
        row["testbed_loss"] = (s.get("loss") or {}).get("testbed")
    return row


def who_gave_up(r: dict) -> str:
    """The side that was the limit, from the figures, by the rule printed with it: the share of
    registrations the RD left unanswered (or answered after more than 1 s) against the share
    of the devices' sends that left more than LATE_MS late; the larger by ten times gave up
    first, else both are named."""
    reg = r.get("register") or {}
    oc = reg.get("outcomes") or {}
    not_ok = sum(v for k, v in oc.items() if k != "ok")
    rd_share = not_ok / reg["rows"] if reg.get("rows") else 0.0
    late = r.get("late_share") or 0.0
    slow = (reg.get("r_p99_ms") or 0) > 1000
    rd = (f"the RD: {not_ok} of {reg.get('rows')} registrations ({rd_share:.1%}) got no 2.01 "
          f"within the timeout, answered ones waited up to {_f(reg.get('r_max_ms'), '.0f')} ms")
    bed = (f"the testbed: {late:.2%} of the devices' sends left more than {LATE_MS:g} ms late "
           f"(send lag p99 {_f(r.get('lag_p99_us'))} µs)")
    if (rd_share or slow) and rd_share >= 10 * late:
        return f"{rd}; {bed} (rule: unanswered share >= 10 x late share)"
    if late > 0.01 and late >= 10 * rd_share:
        return f"{bed}; {rd} (rule: late share >= 10 x unanswered share)"
    if rd_share or slow or late > 0.01:
        return f"both, neither ten times the other: {rd}; {bed}"
    return "none: every registration was answered within 1 s and sent on time"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to wotbench run, e.g. duration_s=30")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ap.add_argument("--dir", type=Path, help="print the figures of a run this bench made "
                    "before (its temporary --out-root), without running")
    a = ap.parse_args(argv)
    if a.dir:
        report(figures(a.dir, {"rc": "?", "wall_s": 0.0, "load_before": (0, 0, 0),
                               "load_after": (0, 0, 0), "dir": str(a.dir)}))
        return 0
    if a.smoke:     # the same path through wotbench run, at a size that takes seconds
        print(SMOKE_BANNER)
        a.set = ["devices[2].count=300", "duration_s=3", "contention_detector.calibration_s=1",
                 "devices[2].push[0].interval.mean=3000",
                 "devices[2].push[1].interval.mean=3000"] + a.set
    elif not any(x.startswith("devices[2].count=") for x in a.set):
        a.set = ["devices[2].count=100000"] + a.set   # the issue's size; the example has 10 000
    if not (REPO / ".venv" / "bin" / "aiocoap-rd").exists():
        print("fleet-rd bench skipped: .venv/bin/aiocoap-rd is missing (make build installs it)")
        return 0
    if not a.smoke:
        hostlock.hold()
    print(f"fleet-rd bench: {CONFIG.name} {' '.join(a.set)} ...", flush=True)
    report(measure(a))
    return 0


def report(r: dict) -> None:
    print("\n".join(run_lines("fleet-rd bench", r, 2)))
    print(f"  devices {_f(r.get('devices'))} in {_f(r.get('engines'))} engines, test "
          f"{_f(r.get('duration_s'))} s, verdict {_f(r.get('verdict'))}, failures "
          f"{_f(r.get('failures'))}, lost in the testbed {_f(r.get('testbed_loss'))}")
    for op in ("register", "reading"):
        x = r.get(op)
        if not x:
            continue
        print(f"  {op}: {x['rows']} due ({x['offered_per_s']:.0f}/s offered), {x['sent']} sent, "
              f"outcomes {x['outcomes']}, codes {x['codes']}, retransmissions "
              f"{x['retransmissions']}; R p50 {_f(x['r_p50_ms'], '.2f')} ms, p99 "
              f"{_f(x['r_p99_ms'], '.1f')} ms, max {_f(x['r_max_ms'], '.0f')} ms")
    print(f"  RD answered registrations: median {_f(r.get('answered_per_s_median'), '.0f')}/s, "
          f"best {_f(r.get('answered_per_s_max'), '.0f')}/s per {WINDOW_S:g} s window of the "
          f"test; {_f(r.get('answered_per_s_overall'), '.0f')}/s from the first due to the last "
          f"answer; RD CPU {_f(r.get('rd_cpu_cores'), '.2f')} cores, RSS peak "
          f"{_f(r.get('rd_rss_mib'), '.0f')} MiB; the store's CPU "
          f"{_f(r.get('store_cpu_cores'), '.2f')} cores")
    if r.get("placement"):
        print(f"  cores: {r['placement']}")
    for w in r.get("windows") or []:
        print(f"    {w['start_s']:5.0f}-{w['start_s'] + WINDOW_S:.0f} s: due {w['due']:6d}, "
              f"answered {w['answered']:6d}, R p50 {_f(w['r_p50_ms'], '.1f')} ms, p99 "
              f"{_f(w['r_p99_ms'], '.1f')} ms")
    print(f"  engines' send lag (test sends): p50 {_f(r.get('lag_p50_us'))} µs, p99 "
          f"{_f(r.get('lag_p99_us'))} µs, max {_f(r.get('lag_max_us'), '.0f')} µs, "
          f"{_f(r.get('late_share'), '.3%')} > {LATE_MS:g} ms; loop read lag p99 "
          f"{_f(r.get('engine_read_lag_p99_us'), '.0f')} µs (worst loop); engine CPU "
          f"{_f(r.get('engine_cpu_s'), '.1f')} s; send errors {_f(r.get('engine_send_errors'))}")
    print(f"  gave up first: {who_gave_up(r)}")


if __name__ == "__main__":
    sys.exit(main())
