"""The timeline of a connected run (process backend, loopback): edge server (rendered, checked,
started unprivileged, ready) -> engines (connections files, staggered attach, DIR/attached) ->
applications for ``duration_s`` -> engines stopped (their files) -> server stopped -> the run
directory (:mod:`wotbench.connected.finish`: summary.json with its verdict, report.html). The
CPU time and run-queue wait of every component's threads are sampled throughout
(:mod:`wotbench.connected.sched`). Ctrl-C or a failure stops what was started and keeps what
was measured.

Run directory ``reports/<name>-<UTC>/``: ``config.resolved.yaml``, ``edge/`` (rendered config,
its stderr), ``engines/<group>-conn<j>/`` (connections.csv, the engine's files, stderr),
``apps/`` (wot-rpcapp's files), ``monitor/connected-sched.csv``, ``monitor/sut.csv`` (the edge
server's CPU and memory: :mod:`wotbench.connected.sut`), ``edge/privileges.json``, ``run.json``, ``series/``,
``summary.json``, ``report.html``, ``connected-summary.json``."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import yaml

from wotbench.config.schema import Config
from wotbench.connected.edge import Edge
from wotbench.connected.layout import EDGE_ADDRESS, make_layout
from wotbench.connected import sched
from wotbench.connected.sut import EdgeSutSampler, privileges
from wotbench.connected.procs import (ATTACH_RATE, FLEET_BIN, RPCAPP_BIN, attach_budget_s,
                                      rpcapp_argv, start_engines)
from cd_module.tolerance import parse_tolerance
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir import RunDir, atomic
from wotbench.rundir.layout import CONN_ATTACHED, STDERR_LOG
from wotbench.run_result import RunResult



def _mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _stop(p: Optional[subprocess.Popen], grace: float = 60) -> None:
    if p is not None and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_connected(cfg: Config, config_path: str, out_root: str = "reports", log=print,
                  backend: Optional[str] = None) -> RunResult:
    """One connected run of ``cfg``, read from ``config_path`` by the dispatcher (named in a
    refusal)."""
    if (backend or cfg.backend) not in ("process", "auto"):
        raise ConfigError([f"backend: {backend or cfg.backend}: connected devices run on the "
                           "process backend of one host, or across hosts with backend: swarm "
                           "(docs/CONNECTED.md \"Cells on a cluster\")"], config_path)
    for b in (FLEET_BIN, RPCAPP_BIN):
        if not b.exists():
            raise EnvironmentProblem(f"{b} is missing: run `make build`")
    lay = make_layout(cfg)
    run_dir = Path(out_root) / f"{cfg.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    run_dir.mkdir(parents=True)
    os.chmod(run_dir, 0o755)
    rd = RunDir(run_dir)
    atomic.write_text(rd.config_resolved,
                      yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    edge = Edge(cfg.edge_server, rd.edge_dir, EDGE_ADDRESS, lay.server_workers,
                lay.worker_connections, lay.fds_per_process)
    try:
        edge.prepare()                               # the server's own check, before anything
    except BaseException:
        edge.remove()
        raise
    log(f"connected run {run_dir}: {lay.describe()}")
    procs: list[subprocess.Popen] = []
    dirs: list[Path] = []
    app_proc: Optional[subprocess.Popen] = None
    apps = cfg.applications
    extra: dict = {"load_before": os.getloadavg()}
    attached_all = False
    interrupted = False
    sampler = sched.SchedSampler(rd.connected_sched_csv)
    extra["sched_missing"] = sched.available()
    edge_sut: Optional[EdgeSutSampler] = None
    start = 0
    try:
        edge.start()
        sampler.add("edge-server", "system", edge.pids)
        edge_sut = EdgeSutSampler(rd, log=log).start(edge.proc.pid)
        sampler.start()
        m0 = _mem_available()
        t0 = time.monotonic()
        rate = max(1, ATTACH_RATE // max(1, len(lay.engines)))
        for name, p, out in start_engines(cfg, lay, run_dir, edge.endpoint, rate, lay.sources):
            procs.append(p)
            sampler.add(name, "testbed", lambda pid=p.pid: [pid])
            dirs.append(out)
        deadline = t0 + attach_budget_s(lay.devices)
        while time.monotonic() < deadline:
            if all((d / CONN_ATTACHED).exists() for d in dirs):
                attached_all = True
                break
            if any(p.poll() is not None for p in procs) or not edge.running():
                break
            time.sleep(0.1)
        extra["attach_s"] = time.monotonic() - t0
        extra["host_memory_per_device_bytes"] = (m0 - _mem_available()) / max(1, lay.devices)
        log(f"attached: {'all' if attached_all else 'NOT all'} after {extra['attach_s']:.1f} s")
        # who the server's processes run as, now that its workers serve (least privilege)
        atomic.write_json(rd.edge_privileges_json, privileges(edge.proc.pid))
        warm_end = start = time.monotonic_ns()
        if attached_all and apps:
            rd.apps_dir.mkdir()
            start = time.monotonic_ns() + 1_000_000_000
            warm_end = start + apps.warmup_s * 1_000_000_000
            argv = rpcapp_argv(apps, edge.endpoint, lay.devices, rd.apps_dir,
                               cfg.duration_s, start, "127.0.0.250")
            app_proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=open(rd.apps_dir / STDERR_LOG, "wb"))
            sampler.add("wot-rpcapp", "testbed", lambda pid=app_proc.pid: [pid])
            app_proc.wait(cfg.duration_s + apps.timeout_ms / 1000 + 60)
        elif attached_all:
            time.sleep(cfg.duration_s)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            sampler.sample()              # the last counters of every component still alive
        except OSError:
            pass
        _stop(app_proc, 10)
        extra["edge_running_at_end"] = edge.running()
        for p in procs:
            _stop(p)
        extra["engines_s"] = time.monotonic() - t0 if procs else None
        sampler.stop()
        if edge_sut is not None:
            edge_sut.stop()           # its last sample while the server still runs
        edge.stop()
        edge.remove()
    extra["load_after"] = os.getloadavg()
    extra["attached_all"] = attached_all
    # the analysis (pandas, the report's matplotlib) only now: `wotbench check` imports this
    from wotbench.connected.analysis import Inputs
    from wotbench.connected.finish import write_run_dir
    inp = Inputs(engine_dirs=dirs, app_dir=rd.apps_dir if apps and attached_all else None,
                 sched_csv=sampler.path, devices=lay.devices, test_start_ns=start,
                 duration_s=float(cfg.duration_s), warmup_end_ns=warm_end, extra=extra)
    s = write_run_dir(run_dir, cfg.name, inp, cfg=cfg, interrupted=interrupted,
                      tolerance=parse_tolerance(cfg.verdict.tolerance)["tolerance_share"],
                      think_min_ms=apps.send_lag_scale_ms if apps else 0, log=log)
    v = s.verdict
    log(f"verdict: {v.status}" + (f" ({'; '.join(v.reasons)})" if v.reasons else ""))
    log(f"report: {rd.report_html}")
    return RunResult(130 if interrupted else v.exit_code, run_dir, s)
