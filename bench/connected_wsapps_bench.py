#!/usr/bin/env python3
"""Applications on their own WebSockets benchmark (issue 30; prints figures, asserts nothing).

The study's second target: the RPC round trip through a real server, measured end to end with
per-request stamps, at --rate RPC/s (1 000) from --apps applications (2 000), each on its own
WebSocket, with the testbed's share of the latency. It is `wotbench run` of
configs/attached-devices-webdis-wsapps.yaml (Debian 13's webdis 0.1.22 + Debian's
redis-server; --devices chunked devices, 5 000: webdis holds ~3.4 descriptors per device under
its 20 000) with an open loop (Poisson arrivals, at most 4 RPCs outstanding per application),
for --duration-s; then the run's figures from its summary.json and where the RPCs' time went
(bench/connected_bench.py's span breakdown). The run directory is kept under reports/.

Holds the host lock (testkit/hostlock.py); prints the load average before and after.
usage: .venv/bin/python bench/connected_wsapps_bench.py [--devices 5000] [--apps 2000]
  [--rate 1000] [--duration-s 120] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from connected_bench import loadavg, run_spans  # noqa: E402
from testkit import hostlock  # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP  # noqa: E402
from testkit.webdis import WHY_MISSING  # noqa: E402
from wotbench.rundir import RunDir  # noqa: E402

CONFIG = ROOT / "configs" / "attached-devices-webdis-wsapps.yaml"
WOTBENCH = Path(sys.executable).parent / "wotbench"


def missing() -> str | None:
    if not shutil.which("webdis-debian13"):       # the config runs it (WOTBENCH_WEBDIS is the tests')
        return WHY_MISSING
    if not shutil.which("redis-server"):
        return "redis-server is not installed (apt-get install redis-server; make build does)"
    return None


def stats(s) -> str:
    """p50 / p90 / p99 (/ p99.9 / max when kept) of a ConnStats, in ms."""
    if s is None or not s.n:
        return "n/a"
    d = s.model_dump()
    keys = [k for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms") if d.get(k) is not None]
    return " / ".join(f"{d[k]:.3f}" for k in keys) + f" ms ({'/'.join(k[:-3] for k in keys)}; n {s.n})"


def report(run_dir: Path) -> None:
    s = RunDir(run_dir).read_summary()
    c = s.connected
    if c is None or c.rpc is None:
        print(f"{run_dir}: no connected RPC figures (verdict {s.verdict.status})")
        return
    r = c.rpc
    print(f"devices attached: {c.attached_at_exit} of {c.devices} at exit (all attached after "
          f"{c.attach_s:.1f} s); disconnects {c.disconnects.model_dump()}; connect failures "
          f"{c.connect_failures.model_dump()}; testbed loss {c.testbed_loss}")
    print(f"RPCs from {r.apps} applications: {r.rpcs} scheduled, {r.measured} after the warm-up; "
          f"offered / sent / answered per s {r.offered_per_s} / {r.sent_per_s} / "
          f"{r.answered_per_s}; outcomes {r.outcomes}; late replies {r.late_replies}, unmatched "
          f"{r.unmatched}")
    print(f"round trip from the send:      {stats(r.round_trip)}")
    print(f"round trip from the schedule:  {stats(r.from_schedule)}")
    print(f"send lag (testbed):            {stats(r.send_lag)}")
    print(f"engines' part (testbed):       {stats(r.engine_part)}")
    sh = r.testbed_share.model_dump()
    print("testbed share of the round trip: " + " / ".join(
        f"{k} {v * 100:.1f} %" for k, v in sh.items() if isinstance(v, float)))
    print(f"server -> device -> server (kernel arrival -> reply write): "
          f"{stats(r.server_device_server)}")
    if c.apps_side:
        a = c.apps_side
        print(f"applications out / in: {a.messages_out_per_s or 0:.1f} / "
              f"{a.messages_in_per_s or 0:.1f} msgs/s, {a.kbytes_out_per_s or 0:.1f} / "
              f"{a.kbytes_in_per_s or 0:.1f} kB/s")
    if s.sut_resources:
        t = s.sut_resources.total
        rss = t.rss_mean_bytes / 2**20 if t.rss_mean_bytes else float("nan")
        print(f"webdis + redis-server: {t.cpu_cores or 0:.2f} cores, RSS mean {rss:.0f} MiB")
    print(f"verdict: {s.verdict.status}")
    for why in s.verdict.reasons:
        print(f"  - {why}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=5000)
    ap.add_argument("--apps", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration-s", type=int, default=120)
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 0
    if a.smoke:
        print(SMOKE_BANNER)
        a.devices, a.apps, a.rate, a.duration_s = 100, 20, 50.0, 8
    out_root = ROOT / "reports"
    out_root.mkdir(exist_ok=True)
    before = set(out_root.iterdir())
    sets = {"applications.loop": "open", "applications.rate": a.rate,
            "applications.arrival": "poisson", "applications.max_outstanding": 4,
            "applications.count": a.apps, "devices[0].count": a.devices,
            "duration_s": a.duration_s}
    argv = [str(WOTBENCH), "run", str(CONFIG), "--out-root", str(out_root)]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    if not a.smoke:
        hostlock.hold()
    print(f"{a.devices} chunked devices, {a.apps} applications on WebSockets, open loop "
          f"{a.rate:g} RPC/s (Poisson) for {a.duration_s} s through webdis-debian13; "
          f"load average before: {loadavg()}", flush=True)
    rc = subprocess.call(argv, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(f"wotbench run exited {rc}; load average after: {loadavg()}")
    new = sorted(set(out_root.iterdir()) - before)
    if not new:
        print("no run directory was written")
        return 1
    run_dir = new[-1]
    print(f"run directory: {run_dir}")
    report(run_dir)
    run_spans(run_dir)
    return 0 if rc in (0, 3) else 1


if __name__ == "__main__":
    sys.exit(main())
