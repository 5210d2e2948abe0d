"""A cell of a connected run across hosts (docs/CONNECTED.md "Cells on a cluster"): this
node's share of the attached devices (its own wot-fleet engines) and of the applications
(wot-rpcapp, ids from ``first_app``), against the one edge server the coordinator started.

The conversation is a cell's (``cell.Cell``): the engines attach, then ``deployed`` (the
lead), the clock exchange, ``start`` (T0, mapped to this node's CLOCK_MONOTONIC), the
applications from T0 for ``duration_s``, the engines stopped, ``done``, the clocks again, the
run directory sent back. The cell measures; the coordinator analyses. The applications here
call this cell's devices only, which reply on this cell's own reply shards
(:mod:`~wotbench.distributed.connected_routes`).
What the cell writes beside the components' files: ``cell.json`` (its share, T0 on its
clock, the attach, the load: :class:`~wotbench.rundir.connected_cell.CellFile`) and
``monitor/connected-sched.csv``."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

from wotbench.configfile.yaml_loader import load_config
from wotbench.connected import sched
from wotbench.connected.layout import PORTS_PER_SOURCE, make_layout
from wotbench.connected.procs import (ATTACH_RATE, FLEET_BIN, RPCAPP_BIN, attach_budget_s,
                                      rpcapp_argv, start_engines)
from wotbench.distributed import wire
from wotbench.distributed.connected_routes import all_devices, device_ranges, first_shard
from wotbench.errors import EnvironmentProblem, WotbenchError
from wotbench.rundir import RunDir, atomic
from wotbench.rundir.connected_cell import CellFile
from wotbench.rundir.layout import CONN_ATTACHED, STDERR_LOG

LEAD_S = 3.0          # T0's arrival to T0: wot-rpcapp starts and subscribes in it


def log(msg: str) -> None:
    print(f"cell: {msg}", flush=True)


def _stop(p: Optional[subprocess.Popen], grace: float) -> None:
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_share(cell, share: wire.Share) -> None:
    """Run this node's share (``cell``: the :class:`wotbench.distributed.cell.Cell` that
    holds the connection) and answer until the coordinator says bye."""
    out = cell.work / share.run_id / cell.node
    out.mkdir(parents=True, exist_ok=True)
    config = out / share.config_name
    config.write_text(share.config_yaml)
    beats = threading.Thread(target=cell._beat, name="cell-beat", daemon=True)
    beats.start()
    why: Optional[str] = None
    code: Optional[int] = None
    try:
        _run(cell, share, load_config(config), out)
    except WotbenchError as e:
        why, code = f"{cell.node}: {e}", e.exit_code
    except Exception as e:  # noqa: BLE001 - said to the coordinator, not a lost cell
        why, code = f"{cell.node}: {type(e).__name__}: {e}", 1
    finally:
        cell._stop.set()
    if why:
        log(why)
    cell.conn.send(wire.Done(ok=why is None, why=why, exit_hint=code))
    cell.after(out)


def _run(cell, share: wire.Share, cfg, out: Path) -> None:
    cs = share.connected
    for b in (FLEET_BIN, RPCAPP_BIN):
        if not b.exists():
            raise EnvironmentProblem(f"{b} is not in the cell agent's image: run `make build`, "
                                     "then `make cluster-images` (or carry the image again)")
    lay = make_layout(cfg, share={int(k): tuple(v) for k, v in cs.groups.items()})
    conns = sum(e.count * (2 if cfg.devices[e.group_index].protocol == "chunked" else 1)
                for e in lay.engines)
    if conns > PORTS_PER_SOURCE:   # one source address (this node's) to one server port
        raise EnvironmentProblem(
            f"this cell's share needs {conns} connections to {cs.endpoint}, more than the "
            f"{PORTS_PER_SOURCE} one source address can open to one server address and port; "
            "fix: more cells (label more nodes), or fewer devices")
    lay = dataclasses.replace(lay, sources=())       # the node's own address, the kernel's pick
    log(f"run {share.run_id}: {lay.attached} connected device(s) in {len(lay.engines)} "
        f"engine(s), {cs.apps} application(s) from id {cs.first_app}, server {cs.endpoint}")
    apps = cfg.applications
    load_before, sched_missing = list(os.getloadavg()), sched.available()
    attached_all, attach_s = False, None
    start = warm_end = None                      # T0 on this node's clock, once known
    rd = RunDir(out)
    sampler = sched.SchedSampler(rd.connected_sched_csv)
    procs: list[subprocess.Popen] = []
    app_proc: Optional[subprocess.Popen] = None
    t_att = time.monotonic()
    try:
        sampler.start()
        rate = max(1, ATTACH_RATE // max(1, len(lay.engines) * cs.cells))
        dirs = []
        shard0 = first_shard(cfg, cs.index)        # this cell's own reply channels
        for name, p, d in start_engines(cfg, lay, out, cs.endpoint, rate, (), shard0):
            procs.append(p)
            dirs.append(d)
            sampler.add(name, "testbed", lambda pid=p.pid: [pid])
        deadline = t_att + attach_budget_s(lay.attached)
        while time.monotonic() < deadline and dirs:
            if all((d / CONN_ATTACHED).exists() for d in dirs):
                attached_all = True
                break
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.1)
        attached_all = attached_all or not dirs
        attach_s = time.monotonic() - t_att
        if not attached_all:
            raise EnvironmentProblem(
                f"not every device of the share attached to {cs.endpoint} within "
                f"{time.monotonic() - t_att:.0f} s (engines/*/stderr.log in the run directory)")
        log(f"attached: {lay.attached} device(s) after {attach_s:.1f} s")
        start = cell.t0(out, LEAD_S)            # deployed -> clocks -> T0 on this clock
        warm_end = start + (apps.warmup_s if apps else 0) * 1_000_000_000
        if apps and cs.apps:
            rd.apps_dir.mkdir()
            argv = rpcapp_argv(apps, cs.endpoint, lay.devices, rd.apps_dir, cfg.duration_s,
                               start, None, first_app=cs.first_app, count=cs.apps,
                               device_ranges=device_ranges(cfg, cs.groups), first_shard=shard0,
                               devices_total=all_devices(cfg))
            app_proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=open(rd.apps_dir / STDERR_LOG, "wb"))
            sampler.add("wot-rpcapp", "testbed", lambda pid=app_proc.pid: [pid])
            app_proc.wait(cfg.duration_s + LEAD_S + apps.timeout_ms / 1000 + 60)
        else:
            time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9) + cfg.duration_s
                       + (apps.timeout_ms / 1000 if apps else 0))
    finally:
        try:
            sampler.sample()
        except OSError:
            pass
        _stop(app_proc, 10)
        for p in procs:
            _stop(p, 60)
        engines_s = time.monotonic() - t_att
        sampler.stop()
        atomic.write_json(rd.cell_json, CellFile(
            node=cell.node, devices=lay.attached, groups=cs.groups, index=cs.index,
            first_shard=first_shard(cfg, cs.index), first_app=cs.first_app, apps=cs.apps,
            endpoint=cs.endpoint, engines=[e.name for e in lay.engines],
            load_before=load_before, sched_missing=sched_missing, attached_all=attached_all,
            attach_s=attach_s, t0_mono_ns=start, warmup_end_ns=warm_end, engines_s=engines_s,
            load_after=list(os.getloadavg())).model_dump(mode="json"), indent=1)
