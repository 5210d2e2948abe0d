"""Starting the testbed's processes of a connected run: the wot-fleet engines of a layout
(their connections files, CONTRACTS §3c) and wot-rpcapp (§3d). One place for both the
single-host run (:mod:`wotbench.connected.run`) and a cell of a run across hosts
(:mod:`wotbench.distributed.connected_cell`), so a cell runs exactly what one host runs."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any, Optional

from wotbench.config.connected import connection_rows, connections_header
from wotbench.connected.layout import Layout
from wotbench.rundir import RunDir
from wotbench.rundir.layout import STDERR_LOG

ROOT = Path(__file__).resolve().parents[2]
FLEET_BIN = ROOT / "wot-device" / "build" / "wot-fleet-conn"   # connected devices: CONTRACTS §3c
RPCAPP_BIN = ROOT / "rpc-app" / "build" / "wot-rpcapp"
ATTACH_RATE = 5000            # first connects per second over all engines
# rows of an engine's events-log-*.csv (32 B each, reserved at start as zero pages: only the
# rows used cost memory); beyond them the events are counted and in its send-lag histogram
EVENT_ROWS_CAP = 2_000_000
EVENT_ROWS_MARGIN = 1.25      # over the expected count (a Poisson count's spread is far less)


def event_rows(event_mean_s: float, devices: int, lifetime_s: float) -> int:
    """Rows for ``devices`` with events every ``event_mean_s`` on average over the engine's
    ``lifetime_s`` (attach, test, stop), with margin, at most EVENT_ROWS_CAP."""
    if event_mean_s <= 0 or devices <= 0:
        return 0
    want = math.ceil(devices * lifetime_s / event_mean_s * EVENT_ROWS_MARGIN) + 64
    return min(EVENT_ROWS_CAP, want)


def attach_budget_s(devices: int) -> float:
    """How long a run (or a cell) waits for ``devices`` to attach: a minute plus twice their
    staggered connects at ATTACH_RATE."""
    return 60 + 2 * devices / ATTACH_RATE


def engine_lifetime_s(cfg: Any, devices: int) -> float:
    """How long an engine may run: the attach budget, the test, the applications' timeout and
    the stop."""
    apps = cfg.applications
    return (attach_budget_s(devices) + float(cfg.duration_s)
            + (apps.timeout_ms / 1000 + 1 + apps.warmup_s if apps else 0) + 30)


def first_ids(cfg: Any) -> dict[str, int]:
    """The device id of each connected group's device 0 (ids count across the groups)."""
    out, nid = {}, 0
    for g in cfg.devices:
        if g.connection is not None:
            out[g.group] = nid
            nid += g.count
    return out


def start_engines(cfg: Any, lay: Layout, run_dir: Path, endpoint: str, rate: int,
                  sources: tuple[str, ...], first_shard: int = 0
                  ) -> list[tuple[str, subprocess.Popen, Path]]:
    """Every engine of ``lay`` started (``engines/<name>/``): (name, process, its out dir).
    Device d replies on shard ``first_shard + d mod reply_shards`` (a cell: its own shards)."""
    apps = cfg.applications
    shards = apps.reply_shards if apps else 1
    first_of = first_ids(cfg)
    out, rd = [], RunDir(run_dir)
    for e in lay.engines:
        g = cfg.devices[e.group_index]
        d, conns = rd.engine_out(e.name), rd.engine_connections(e.name)
        d.mkdir(parents=True)
        rows = connection_rows(g, first_of[g.group], endpoint, shards, sources,
                               offset=e.offset, count=e.count, first_shard=first_shard)
        conns.write_text(connections_header(g) + "\n" + "\n".join(rows) + "\n")
        argv = [str(FLEET_BIN), "--connections", str(conns), "--log-dir",
                str(d), "--name", e.name, "--attach-rate", str(rate), "--event-rows",
                str(event_rows(g.connection.event_mean_s, e.count,
                               engine_lifetime_s(cfg, lay.devices)))]
        if apps:
            argv += ["--id-marker", apps.id_marker, "--reply-id", apps.reply_id,
                     "--id-header", apps.id_header]
        if g.protocol in ("chunked", "chunked-post"):
            argv += ["--reply-method", g.connection.reply_method]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                             stderr=open(rd.engine_dir(e.name) / STDERR_LOG, "wb"))
        out.append((e.name, p, d))
    return out


def rpcapp_argv(apps: Any, endpoint: str, devices: int, log_dir: Path, duration_s: float,
                start_ns: int, source: Optional[str], first_app: int = 0,
                count: Optional[int] = None, device_ranges: Optional[list[tuple[int, int]]] = None,
                first_shard: int = 0, devices_total: Optional[int] = None) -> list[str]:
    """wot-rpcapp's command line: ``count`` applications (all by default) whose ids start at
    ``first_app``, calling devices ``0..devices-1`` or the (first id, count) ``device_ranges``
    and subscribing to reply shards ``first_shard..`` (a cell's share: its own devices and
    shards). In an open loop the process's rate is the share of ``rate`` of the devices it
    calls among ``devices_total`` (the run's; given with ``device_ranges``): every device is sent ``rate /
    devices_total`` RPCs/s whichever cell holds it (the cells' application counts and device
    counts are split separately, their remainders differ)."""
    mine = apps.count if count is None else count
    if device_ranges and devices_total is None:   # a cell's rate is its devices' share
        raise ValueError("rpcapp_argv: device_ranges (a cell's devices) need devices_total")
    called = sum(n for _, n in device_ranges) if device_ranges else devices
    total = devices if devices_total is None else devices_total
    ranges = ",".join(f"{f}:{n}" for f, n in device_ranges) if device_ranges else f"0:{devices}"
    argv = [str(RPCAPP_BIN), "--server", endpoint, "--devices", ranges,
            "--log-dir", str(log_dir), "--apps", str(mine),
            "--first-app", str(first_app), "--apps-total", str(apps.count),
            "--shards", str(apps.reply_shards), "--first-shard", str(first_shard),
            "--reply-path", apps.reply_path.replace("{shard}", "%u"),
            "--id-marker", apps.reply_id_marker,
            "--think-ms", f"{apps.think_ms[0]}:{apps.think_ms[1]}",
            "--timeout-ms", str(apps.timeout_ms),
            "--duration-s", str(max(1, round(duration_s))),
            "--warmup-s", str(apps.warmup_s), "--start-at", str(start_ns)]
    if source:
        argv += ["--source", source]
    if apps.loop == "open":
        argv += ["--rate", f"{apps.rate * called / total:.6g}", "--arrival", apps.arrival,
                 "--window", str(apps.max_outstanding)]
    argv += _transport_argv(apps)
    for name, value in apps.reply_headers.items():
        argv += ["--reply-header", f"{name}: {value}"]
    if apps.reply_subscribe:
        argv += ["--reply-subscribe", apps.reply_subscribe.replace("{shard}", "%u")]
    return argv


def _transport_argv(apps: Any) -> list[str]:
    """How the applications send (CONTRACTS §3d): an HTTP request on a keep-alive connection,
    or a frame on each application's own WebSocket (``applications.transport``)."""
    if apps.transport == "websocket":
        argv = ["--transport", "websocket", "--ws-path", apps.rpc_ws_path,
                "--frame", apps.rpc_frame]
        for name, value in apps.rpc_ws_headers.items():
            argv += ["--ws-header", f"{name}: {value}"]
        if not apps.rpc_acks:
            argv += ["--no-acks"]
        if apps.rpc_ack_unheard:
            argv += ["--ack-unheard", apps.rpc_ack_unheard]
        if apps.rpc_ack_rejected:
            argv += ["--ack-rejected", apps.rpc_ack_rejected]
        return argv
    argv = ["--rpc-path", apps.rpc_path.replace("{device}", "%u"),
            "--body", apps.body_template or ""]      # no body with rpc_method GET
    if apps.rpc_id == "header":
        argv += ["--id-header", apps.id_header]
    return argv + ["--method", apps.rpc_method]
