"""Update -> notification latency through a real publish/subscribe server (issue 35): nginx's
nchan module on loopback, two Server-Sent-Events subscribers held by the notification sink
(build/notify-sink), the gateway emulator (build/gateway-emulator) POSTing updates that carry
urn:e:{{seq}} open loop at each rate for a few seconds. Prints per rate and subscriber: updates,
notified, lost, duplicates, notifications/s and the latency p50/p99/max, with the load average
before and after; under the host lock. `make bench-notify` (NOTIFY_ARGS="--rates 100,1000")."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit import hostlock                                   # noqa: E402
from testkit.bench import SMOKE_BANNER, SMOKE_HELP             # noqa: E402
from testkit.ge import run_ge, write_trace                     # noqa: E402
from testkit.nchan import Nchan, nchan_available               # noqa: E402
from wotbench.analysis import notify_sink                      # noqa: E402

GE = ROOT / "gateway-emulator" / "build" / "gateway-emulator"
SINK = ROOT / "gateway-emulator" / "build" / "notify-sink"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def one_rate(rate: int, seconds: float, tmp: Path) -> list:
    import subprocess
    (tmp / "body.txt").write_text("update urn:e:{{seq}} {{time_ns}}")
    with Nchan() as nc:
        out = tmp / f"sink-{rate}"
        ready = tmp / f"ready-{rate}"
        sink = subprocess.Popen([str(SINK), "--out", str(out), "--marker", "urn:e:",
                                 "--accept", "text/event-stream", "--ready-file", str(ready),
                                 "--duration-ms", str(int(seconds * 1000) + 3000),
                                 "--stream", f"sse-a={nc.uri('sub')}",
                                 "--stream", f"sse-b={nc.uri('sub')}"])
        deadline = time.monotonic() + 5
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        n = int(rate * seconds)
        step = 1e6 / rate
        trace = write_trace(tmp / f"t-{rate}.csv",
                            [(0, int(i * step), "POST", nc.uri("pub"), 0) for i in range(n)])
        p = run_ge(GE, trace, tmp / f"ge-{rate}", "--http-connections", "4",
                   "--http-body-template", str(tmp / "body.txt"), timeout=seconds + 60)
        if p.returncode != 0:
            raise SystemExit(f"GE failed: {p.stderr[-800:]}")
        sink.wait(timeout=seconds + 30)
    return notify_sink.analyse(tmp / f"ge-{rate}", out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100,1000,5000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    if not nchan_available():
        print("skipped: nginx's nchan module is not installed (apt-get install libnginx-mod-nchan)")
        return 0
    if a.smoke:     # one short rate, the same path, no host lock
        print(SMOKE_BANNER)
        a.rates, a.seconds = "50", 1.0
    else:
        hostlock.hold()
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    print("| updates/s | subscriber | updates | notified | lost | dup | notif/s | p50 ms | "
          "p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="wb-notify-") as d:
        for rate in (int(x) for x in a.rates.split(",")):
            for f in one_rate(rate, a.seconds, Path(d)):
                L = f.latency_ms
                print(f"| {rate} | {f.name} | {f.updates} | {f.notified} | {f.lost} | "
                      f"{f.duplicates} | {f.notifications_per_s:.0f} | {L.get('p50', 0):.3f} | "
                      f"{L.get('p99', 0):.3f} | {L.get('max', 0):.3f} |", flush=True)
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
