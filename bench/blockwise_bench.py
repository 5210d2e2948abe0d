#!/usr/bin/env python3
"""Block-wise transfer (RFC 7959) benchmark (issue 13), figures not pass/fail: transfer time vs
payload for Block2 reads (GET) and Block1 writes (PUT), WoTbench against libcoap's own
block-wise code measured in the same run; then how transfers stretch or fail under 1 % loss.

Paths (client on core 0, server on core 1, loopback, CON, one transfer at a time, 10 ms idle
between transfers for every client):
  GE -> wot-device         the gateway emulator (--block-size N) against wot-device resources of
                           the payload size (0 µs service time); time = requests.csv R (first
                           datagram sent -> kernel stamp of the last response), whole transfer;
  libcoap -> coap-server   bench/bw_client.c (libcoap 4.3.1's client, COAP_BLOCK_USE_LIBCOAP |
                           SINGLE_BODY) against coap-server-notls's /example_data (PUT stores the
                           body, GET returns it); time = coap_send() -> the handler sees the
                           whole body / the final response;
  libcoap -> wot-device    the same client against wot-device (our server, their client).
Floor printed beside them: a raw UDP ping-pong round trip (back to back) in the same run; a
transfer of B blocks needs B round trips, so "x floor" = median time / (B x ping-pong p50).

Loss: 1 % of the server's outgoing datagrams dropped (wot-device --impair dir=egress,loss=1%;
coap-server-notls -l 1%: the only loss libcoap's server offers), and wot-device with 1 % each
way (dir=both, as configs/blockwise.yaml); CON with RFC 7252 retransmission (GE --retransmit,
libcoap's own), at most --loss-timeout s per transfer. A lost block costs 2-3 s (ACK_TIMEOUT).

A path whose server, client or GE fails prints its rows as n/a with the reason; the bench goes on.

usage: .venv/bin/python bench/blockwise_bench.py [--n 20] [--quick] [--no-loss] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from testkit.bench import (CLIENT_CPU, DEV_BIN, GE_BIN, HOST, SERVER_CPU, SMOKE_BANNER,  # noqa: E402
                          SMOKE_HELP, PeerFailed, build, host_line, na, pingpong, q, run_peer,
                          stop)

BW_BIN = Path(__file__).resolve().parent / "build" / "bw_client"
DEV_PORT, LC_PORT, PP_PORT = 17201, 17202, 17203
SIZES_KIB = (1, 4, 16, 64)
BLOCKS = (1024, 64)
LOSS_CELLS = (("get", 16), ("put", 16), ("get", 64))     # (op, KiB) at 1024-byte blocks
# idle time between two transfers for both clients: an idle vCPU takes 60-130 µs to wake on
# this kind of host (docs/PERFORMANCE.md, the measurement floor), so both pay that once per transfer
IDLE_MS = 10


MIN_TRANSFERS = 5   # per cell (--smoke: 1)


def n_for(blocks: int, n: int) -> int:
    """Fewer transfers for the long ones (1024 blocks of 64 bytes take ~0.1 s each)."""
    return max(MIN_TRANSFERS, min(n, 3000 // blocks))


def measured(f, *args) -> object:
    """f's result, or why it could not be measured (its rows print n/a)"""
    try:
        return f(*args)
    except (PeerFailed, RuntimeError, OSError, subprocess.SubprocessError, KeyError,
            ValueError) as e:
        return getattr(e, "why", f"{e.__class__.__name__}: {str(e).strip()[:200]}")


class Server:
    """wot-device (resources gNk for N in SIZES_KIB, w for writes) or coap-server-notls."""

    def __init__(self, kind: str, d: Path, impair: str | None = None):
        self.kind, self.d = kind, d
        d.mkdir(parents=True, exist_ok=True)
        if kind == "wot-device":
            res = d / "res.csv"
            res.write_text("path,service_time_us,mode,payload_bytes\n" + "".join(
                f"g{k}k,0,sleep,{k * 1024}\n" for k in SIZES_KIB) + "w,0,sleep,4\n")
            cmd = [str(DEV_BIN), "--resources", str(res), "--log-dir", str(d), "--listen",
                   f"{HOST}:{DEV_PORT}"]
            if impair:
                cmd += ["--impair", impair, "--impair-seed", "13"]
            self.port = DEV_PORT
        else:
            cmd = ["coap-server-notls", "-A", HOST, "-p", str(LC_PORT), "-v", "0"]
            if impair:
                cmd += ["-l", impair]
            self.port = LC_PORT
        self.p = subprocess.Popen(["taskset", "-c", SERVER_CPU, *cmd], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while kind == "wot-device" and not (d / "ready").exists():
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"wot-device did not start (exit {self.p.poll()})")
            time.sleep(0.02)
        if kind != "wot-device":
            time.sleep(0.2)

    def path(self, op: str, kib: int) -> str:
        if self.kind != "wot-device":
            return "example_data"
        return f"g{kib}k" if op == "get" else "w"

    def stop(self) -> None:
        stop(self.p)


def bw_client(srv: Server, op: str, kib: int, bs: int, n: int, timeout_s: int,
              idle_ms: int = IDLE_MS) -> pd.DataFrame:
    """libcoap's client: one row per transfer (ms, ok), idle_ms between transfers."""
    out = run_peer(["taskset", "-c", CLIENT_CPU, str(BW_BIN), HOST, str(srv.port),
                    srv.path(op, kib), op, str(kib * 1024), str(bs), str(n), str(idle_ms),
                    str(timeout_s)], f"bw_client (libcoap) {op.upper()} {kib} KiB",
                   timeout=n * (timeout_s + 1 + idle_ms / 1e3) + 30)
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    want = "2.05" if op == "get" else ("2.04", "2.01")
    return pd.DataFrame({"ms": [int(r[0]) / 1e6 if r[0] != "-1" else np.nan for r in rows],
                         "ok": [r[1] in want and (op == "put" or int(r[2]) == kib * 1024)
                                for r in rows], "retx": np.nan})


def ge_cells(srv: Server, d: Path, cells: list[tuple[str, int]], bs: int, n: int, gap_ms: float,
             retransmit: bool, timeout_ms: int) -> dict[tuple[str, int], pd.DataFrame]:
    """One GE run for several (op, KiB) cells: n transfers each, one every gap_ms (or, with
    gap_ms 0, IDLE_MS apart after an estimate of their length, so they do not overlap)."""
    rows, t_us, which = ["device_id,send_time_us,method,uri,payload_bytes"], 1000.0, []
    for op, kib in cells:
        blocks = -(-kib * 1024 // bs)
        gap = gap_ms * 1000 if gap_ms else IDLE_MS * 1000 + blocks * 600
        for _ in range(n_for(blocks, n) if not gap_ms else n):
            body = kib * 1024 if op == "put" else 0
            rows.append(f"0,{int(t_us)},{op.upper()},coap://{HOST}:{srv.port}/{srv.path(op, kib)},{body}")
            which.append((op, kib))
            t_us += gap
    trace = d / f"trace-{bs}.csv"
    trace.write_text("\n".join(rows) + "\n")
    out = d / f"ge-{bs}-{int(retransmit)}"
    args = [str(GE_BIN), "--trace", str(trace), "--out", str(out), "--type", "con", "--wait",
            "hybrid", "--block-size", str(bs), "--timeout-ms", str(timeout_ms)]
    if retransmit:
        args.append("--retransmit")
    run_peer(["taskset", "-c", CLIENT_CPU, *args], "gateway-emulator",
             timeout=t_us / 1e6 + timeout_ms / 1e3 + 60)
    req = pd.read_csv(out / "requests.csv")
    bw = pd.read_csv(out / "blockwise.csv").set_index("index")
    recv = req["received_kernel_ns"].fillna(req["received_ns"])
    req["ms"] = (recv - req["sent_ns"]) / 1e6
    req["ok"] = req["outcome"] == "ok"
    req["retx"] = req["index"].map(bw["retransmissions"]).fillna(0) + req["retransmissions"].fillna(0)
    req["cell"] = which
    req.loc[~req["ok"], "ms"] = np.nan
    return {c: g[["ms", "ok", "retx"]].reset_index(drop=True) for c, g in req.groupby("cell")}


def dev_paths(tmp: Path, cells, bs: int, n: int) -> dict:
    dev = Server("wot-device", tmp / f"dev-{bs}")
    try:
        return {"GE -> wot-device": measured(ge_cells, dev, tmp / f"dev-{bs}", cells, bs, n, 0,
                                             False, 10_000),
                "libcoap -> wot-device": measured(lambda: {
                    c: bw_client(dev, c[0], c[1], bs, n_for(-(-c[1] * 1024 // bs), n), 10)
                    for c in cells})}
    finally:
        dev.stop()


def libcoap_cells(tmp: Path, sizes: tuple[int, ...], bs: int, n: int) -> dict:
    lc = Server("libcoap", tmp / f"lc-{bs}")
    try:   # a PUT of the size first: GET then returns a body of that size
        res = {}
        for op, kib in [("put", k) for k in sizes] + [("get", k) for k in sizes]:
            if op == "get":
                bw_client(lc, "put", kib, 1024, 1, 10)
            res[(op, kib)] = bw_client(lc, op, kib, bs, n_for(-(-kib * 1024 // bs), n), 10)
        return res
    finally:
        lc.stop()


def clean_runs(tmp: Path, n: int, sizes: tuple[int, ...], blocks=BLOCKS) -> list[dict]:
    cells = [(op, kib) for op in ("get", "put") for kib in sizes]
    rows = []
    for bs in blocks:
        res = measured(dev_paths, tmp, cells, bs, n)
        if isinstance(res, str):   # the device did not start: both of its paths
            res = {"GE -> wot-device": res, "libcoap -> wot-device": res}
        res["libcoap -> coap-server"] = measured(libcoap_cells, tmp, sizes, bs, n)
        load = os.getloadavg()[0]
        for op, kib in cells:
            for path, r in res.items():
                if isinstance(r, str):
                    rows.append({"op": op, "kib": kib, "bs": bs, "path": path,
                                 "blocks": -(-kib * 1024 // bs), "na": r})
                    continue
                f = r[(op, kib)]
                rows.append({"op": op, "kib": kib, "bs": bs, "path": path, "n": len(f),
                             "failed": int((~f["ok"]).sum()), "p50": q(f["ms"], 0.5),
                             "p99": q(f["ms"], 0.99), "blocks": -(-kib * 1024 // bs), "load": load})
    return rows


def loss_setup(d: Path, kind: str, imp: str, cells, n: int, timeout_s: int) -> dict:
    srv = Server(kind, d, imp)
    try:
        if kind == "wot-device":
            # open loop, one transfer every 100 ms: lost blocks overlap instead of adding up
            return ge_cells(srv, d, list(cells), 1024, n, 100, True, timeout_s * 1000)
        res = {}
        for op, kib in cells:
            if op == "get":
                for _ in range(3):       # the PUT that sets the size may itself be lost
                    if bw_client(srv, "put", kib, 1024, 1, timeout_s)["ok"].all():
                        break
            res[(op, kib)] = bw_client(srv, op, kib, 1024, max(MIN_TRANSFERS, n // 2), timeout_s)
        return res
    finally:
        srv.stop()


def loss_runs(tmp: Path, n: int, timeout_s: int, cells=LOSS_CELLS) -> list[dict]:
    rows = []
    setups = (("GE -> wot-device, 1 % server egress", "wot-device", "dir=egress,loss=1%"),
              ("GE -> wot-device, 1 % each way", "wot-device", "dir=both,loss=1%"),
              ("libcoap -> coap-server, 1 % server egress", "libcoap", "1%"))
    for k, (label, kind, imp) in enumerate(setups):
        res = measured(loss_setup, tmp / f"loss-{k}", kind, imp, cells, n, timeout_s)
        load = os.getloadavg()[0]
        for c in cells:
            if isinstance(res, str):
                rows.append({"setup": label, "op": c[0], "kib": c[1], "na": res})
                continue
            f = res[c]
            ms = f["ms"].to_numpy(float)
            rows.append({"setup": label, "op": c[0], "kib": c[1], "n": len(f),
                         "failed": int((~f["ok"]).sum()), "p50": q(ms, 0.5), "p90": q(ms, 0.9),
                         "max": float(np.nanmax(ms)) if np.isfinite(ms).any() else float("nan"),
                         "stretched": int(np.count_nonzero(ms > 1000)),
                         "retx": float(f["retx"].mean()) if f["retx"].notna().any() else float("nan"),
                         "load": load})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20, help="transfers per cell (fewer for long ones)")
    ap.add_argument("--quick", action="store_true", help="1 and 16 KiB only, no loss part")
    ap.add_argument("--no-loss", action="store_true")
    ap.add_argument("--loss-n", type=int, default=30, help="GE transfers per loss cell")
    ap.add_argument("--loss-timeout", type=int, default=30, help="s per transfer under loss")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    a = ap.parse_args()
    global MIN_TRANSFERS
    if a.smoke:
        print(SMOKE_BANNER)
        MIN_TRANSFERS, a.n, a.loss_n, a.loss_timeout = 1, 2, 2, 10
    if (os.cpu_count() or 1) < 2:
        print("blockwise bench: needs 2 cores (client and server pinned apart); skipped")
        return 0
    if not shutil.which("coap-server-notls"):
        print("blockwise bench: coap-server-notls (libcoap3-bin) missing: make build installs it")
        return 1
    build(("bw_client", "-l:libcoap-3-notls.a"))
    print(host_line("blockwise bench") + "; CON, one transfer at a time", flush=True)
    sizes = (1,) if a.smoke else (1, 16) if a.quick else SIZES_KIB
    with tempfile.TemporaryDirectory(prefix="wb-blockwise-") as td:
        tmp = Path(td)
        pp = pingpong(PP_PORT, 300, 0)
        pp50 = q(pp, 0.5)
        rows = clean_runs(tmp, a.n, sizes, BLOCKS[:1] if a.smoke else BLOCKS)
        lrows = [] if (a.quick or a.no_loss) else loss_runs(
            tmp, a.loss_n, a.loss_timeout, (("get", 1),) if a.smoke else LOSS_CELLS)
    print(f"\nfloor: raw UDP ping-pong round trip, back to back: p50 {pp50:.1f} µs, p99 "
          f"{q(pp, 0.99):.1f} µs\n")
    print(f"{'op':3s} {'KiB':>3s} {'block':>5s} {'blocks':>6s} {'path':24s} {'n':>3s} {'fail':>4s} "
          f"{'p50 ms':>8s} {'p99 ms':>8s} {'x floor':>7s} {'/ libcoap':>9s} {'load':>5s}")
    base = {(r["op"], r["kib"], r["bs"]): r["p50"] for r in rows
            if r["path"] == "libcoap -> coap-server" and "na" not in r}
    for r in rows:
        if "na" in r:
            print(f"{r['op']:3s} {r['kib']:3d} {r['bs']:5d} {r['blocks']:6d} {r['path']:24s} "
                  f"{na(r['na'])}")
            continue
        floor = r["p50"] * 1e3 / (r["blocks"] * pp50)
        rel = r["p50"] / base.get((r["op"], r["kib"], r["bs"]), float("nan"))
        print(f"{r['op']:3s} {r['kib']:3d} {r['bs']:5d} {r['blocks']:6d} {r['path']:24s} {r['n']:3d} "
              f"{r['failed']:4d} {r['p50']:8.3f} {r['p99']:8.3f} {floor:7.2f} {rel:9.2f} {r['load']:5.2f}")
    if lrows:
        print("\nunder 1 % loss (1024-byte blocks, CON, RFC 7252 retransmission; 'stretched' = over 1 s)")
        print(f"{'setup':42s} {'op':3s} {'KiB':>3s} {'n':>3s} {'fail':>4s} {'p50 ms':>8s} {'p90 ms':>8s} "
              f"{'max ms':>8s} {'>1 s':>4s} {'retx/transfer':>13s} {'load':>5s}")
        for r in lrows:
            if "na" in r:
                print(f"{r['setup']:42s} {r['op']:3s} {r['kib']:3d} {na(r['na'])}")
                continue
            print(f"{r['setup']:42s} {r['op']:3s} {r['kib']:3d} {r['n']:3d} {r['failed']:4d} "
                  f"{r['p50']:8.2f} {r['p90']:8.1f} {r['max']:8.1f} {r['stretched']:4d} "
                  f"{r['retx']:13.2f} {r['load']:5.2f}")
    l1 = os.getloadavg()
    print(f"load average after: {l1[0]:.2f} {l1[1]:.2f} {l1[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
