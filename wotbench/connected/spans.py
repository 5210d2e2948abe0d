"""An answered RPC's round trip cut at its stamps (docs/CONNECTED.md "Where time goes"), from the
application's rpc-log.csv joined by id with the devices' conn-log-*.csv rows (one host, one
CLOCK_MONOTONIC): the application's send -> the RPC's kernel arrival at the device (the server
relaying it) -> due (the service time) -> the reply written (the engine: timer lateness +
write) -> the reply's kernel arrival at the application (the server relaying it back).
``connected-summary.json``'s engine part and server → device → server figure
(:mod:`wotbench.connected.totals`) and ``bench/connected_bench.py``'s breakdown come from here.

``server_device_server`` (the study's "server → device → server"): the reply written − the
RPC's kernel arrival at the device. On one host over loopback the kernel stamps a segment in
its sender's write, so the arrival is the server's write of the RPC and the reply's write is
where the server's kernel receives it: the span from the server's write to its kernel's
receipt of the reply, i.e. the device's service, the engine's part and both loopback
crossings, without the server's own read and write delays (nginx logs no per-message stamp).
Across hosts the arrival is the device host's, after the wire: not this figure."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

SPANS = ("round_trip", "server_in", "service", "engine", "server_out", "send_lag",
         "engine_read", "app_read", "server_device_server")


def spans(rpc_log: Path, conn_logs: list[Path], after_ns: int = 0) -> dict[str, np.ndarray]:
    """Per answered RPC scheduled at or after ``after_ns``, joined with its device's row by
    id: each span of SPANS in ns, and ``t_ns`` its send (one CLOCK_MONOTONIC, one host)."""
    dev = {}
    for f in conn_logs:
        with f.open() as fp:
            for r in csv.DictReader(fp):
                if r["outcome"] == "sent":
                    dev[r["id"]] = r
    rows = []
    with rpc_log.open() as fp:
        for r in csv.DictReader(fp):
            d = dev.get(r["id"])
            if r["outcome"] != "ok" or d is None or int(r["sched_ns"]) < after_ns:
                continue
            send, reply = int(r["send_ns"]), int(r["reply_ns"])
            arr, due, end, sent = (int(d[k]) for k in ("arrival_ns", "due_ns", "end_ns", "sent_ns"))
            rows.append((reply - send, arr - send, due - arr, max(end - due, 0) + sent - end,
                         reply - sent, send - int(r["sched_ns"]),
                         int(d.get("read_ns") or arr) - arr,
                         int(r.get("reply_read_ns") or reply) - reply, sent - arr, send))
    a = np.asarray(rows, float).reshape(-1, len(SPANS) + 1)
    out = {k: a[:, i] for i, k in enumerate(SPANS)}
    out["t_ns"] = a[:, -1]
    return out
