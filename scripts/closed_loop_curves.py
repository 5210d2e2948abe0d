"""The concurrency curves of a closed-loop sweep (configs/coap-server-concurrency.yaml): throughput
and latency against the number of clients, one line per server, the open-loop points beside
them; and a Markdown table of the same figures. Reads each point's summary.json through its
model (``RunDir.read_summary``: the ``load`` block) and its resolved config (the server).

usage: closed_loop_curves.py SWEEP_DIR OUT.svg   (prints the table on stdout)
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wotbench.rundir import RunDir  # noqa: E402


def server_name(rd: RunDir) -> str:
    cfg = yaml.safe_load(rd.config_resolved.read_text())
    cmd = " ".join((cfg["devices"][0].get("server") or {}).get("command") or ["wot-device"])
    return "aiocoap" if "aiocoap" in cmd else "coap-server-notls" if "coap-server" in cmd else cmd


def points(sweep: Path) -> list[dict]:
    out = []
    for summary in sorted(sweep.glob("runs/*/*/summary.json")):
        rd = RunDir(summary.parent)
        s = rd.read_summary()
        if s.load is None:
            continue
        b = s.load
        g = next(iter(s.ge_integrity.per_ge.values()), None)
        out.append({"server": server_name(rd), "loop": b.loop, "clients": b.clients,
                    "rps": b.throughput_rps, "p50": b.latency_ms.p50_ms, "p99": b.latency_ms.p99_ms,
                    "sched_p99": b.latency_from_schedule_ms.p99_ms if b.latency_from_schedule_ms else None,
                    "timeouts": b.timeout_share, "jain": b.per_client.jain if b.per_client else None,
                    "verdict": s.verdict.status,
                    "stall": g.closed_loop.stall_share if g is not None and g.closed_loop else None})
    return out


def table(rows: list[dict]) -> str:
    head = ("| server | loop | clients | answered req/s | p50 ms | p99 ms | p99 from schedule ms "
            "| timeouts | Jain | GE stall share | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|")

    def f(v, d=2):
        return "–" if v is None else f"{v:.{d}f}"
    lines = [f"| {r['server']} | {r['loop']} | {r['clients']} | {r['rps']:.0f} | {f(r['p50'], 3)} "
             f"| {f(r['p99'], 3)} | {f(r['sched_p99'], 3)} | {f(r['timeouts'] and r['timeouts'] * 100, 2)} % "
             f"| {f(r['jain'], 3)} | {f(r['stall'] and r['stall'] * 100, 1)} % | {r['verdict']} |"
             for r in sorted(rows, key=lambda r: (r["server"], r["loop"], r["clients"] or 0, r["rps"]))]
    return "\n".join([head] + lines)


def plot(rows: list[dict], out: Path) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, server in enumerate(sorted({r["server"] for r in rows})):
        color = f"C{i}"   # one colour per server in both panels
        cl = sorted((r for r in rows if r["server"] == server and r["loop"] == "closed"),
                    key=lambda r: r["clients"])
        if not cl:
            continue
        x = [r["clients"] for r in cl]
        a.plot(x, [r["rps"] for r in cl], marker="o", color=color, label=f"{server} (closed loop)")
        b.plot(x, [r["p50"] for r in cl], marker="o", color=color, label=f"{server} p50")
        b.plot(x, [r["p99"] for r in cl], marker="^", ls="--", color=color, label=f"{server} p99")
    for r in rows:
        if r["loop"] == "open":
            b.scatter([r["clients"]], [r["sched_p99"]], marker="x", color="k", zorder=3)
            b.annotate(f"open {r['rps']:.0f}/s, p99 from schedule", (r["clients"], r["sched_p99"]),
                       fontsize=7, xytext=(4, 4), textcoords="offset points")
    a.set(xscale="log", xlabel="clients", ylabel="answered req/s", title="throughput")
    b.set(xscale="log", yscale="log", xlabel="clients", ylabel="ms", title="latency (R)")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = points(Path(sys.argv[1]))
    if not rows:
        print(f"{sys.argv[1]}: no analysed runs with a load block", file=sys.stderr)
        return 2
    plot(rows, Path(sys.argv[2]))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
