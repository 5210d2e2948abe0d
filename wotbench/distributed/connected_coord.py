"""``wotbench run CONFIG --backend swarm`` for a connected config (docs/CONNECTED.md "Cells on
a cluster"): the cells' machinery of :class:`~wotbench.distributed.coordinator.Coordinator`
(agents, clocks, T0, beats, fetch, cleanup) with a connected share per cell.

- The **edge server** runs once, here (the manager), on its Swarm address, as a single-host
  run starts it (rendered, checked, unprivileged); every cell's devices attach to it. Its
  process tree is sampled here too (:mod:`wotbench.connected.sut`: ``monitor/sut.csv`` of the
  merged run directory, on this host's clock), so the merged ``summary.json`` has its
  ``sut_resources`` as a single-host run's has.
- Each labelled node's cell runs a contiguous part of every connected group (its own
  wot-fleet engines) and a part of the applications (ids ``first_app..``), which call only
  that cell's devices, whose replies go to the cell's own reply shards
  (:mod:`~wotbench.distributed.connected_routes`): the server relays each reply once.
- After the run: each cell is analysed here (``cells/<node>/summary.json``, its report), its
  RPCs joined with every cell's device logs; the merged run directory holds every cell's RPCs
  with their stamps moved onto this host's clock by each cell's T0 (``apps/rpc-log.csv``),
  every component's run-queue samples (``monitor/connected-sched.csv``, named ``node/…``),
  the merged ``summary.json`` (RPC round trip, msgs/s, disconnects, the SLO from every RPC)
  whose verdict is the worst cell's, and ``cluster.json`` (per-cell figures and verdicts, the
  clocks) which sweeps and capacity searches read to name the unfaithful host.
"""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any, Optional

import yaml

from wotbench.analysis.errors import AnalysisError
from wotbench.analysis.loading import read_model
from wotbench.connected import sched
from wotbench.connected.edge import Edge
from wotbench.connected.layout import make_layout
from wotbench.connected.sut import EdgeSutSampler, privileges
from wotbench.distributed import service, wire
from wotbench.distributed import agents as ag
from wotbench.distributed.coordinator import Coordinator, log, report
from wotbench.distributed.merge import CellRecord, MergedRun
from wotbench.distributed.verdict import aggregate, failed_cell, from_summary
from wotbench.errors import ConfigError
from wotbench.rundir import MergedRunDir, RunDir, atomic
from wotbench.run_result import RunResult
from wotbench.rundir.connected_cell import CellFile



def ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """``total`` split into ``parts`` contiguous (offset, count), the first ones one larger."""
    base, extra = divmod(total, parts)
    out, at = [], 0
    for k in range(parts):
        n = base + (1 if k < extra else 0)
        out.append((at, n))
        at += n
    return out


def split_shares(cfg: Any, nodes: list[str], endpoint: str) -> dict[str, wire.ConnectedShare]:
    """Every connected group and the applications split evenly over ``nodes`` (device ids and
    application ids stay global); a cell's applications call its own devices only."""
    from wotbench.config.connected import CONNECTED_PROTOCOLS
    apps = cfg.applications.count if cfg.applications else 0
    if 0 < apps < len(nodes):
        raise ConfigError([f"applications.count: {apps} applications for {len(nodes)} cells; "
                           "each cell runs a share of them (its verdict judges its own "
                           f"applications' RPCs): expected at least {len(nodes)}"])
    per_group = {gi: ranges(g.count, len(nodes)) for gi, g in enumerate(cfg.devices)
                 if g.protocol in CONNECTED_PROTOCOLS}
    devices = sum(g.count for g in cfg.devices if g.protocol in CONNECTED_PROTOCOLS)
    if apps and devices < len(nodes):
        raise ConfigError([f"devices: {devices} connected device(s) for {len(nodes)} cells; "
                           "each cell's applications call the devices of their own cell: "
                           f"expected at least {len(nodes)}"])
    app_parts = ranges(apps, len(nodes))
    return {n: wire.ConnectedShare(groups={gi: r[k] for gi, r in per_group.items() if r[k][1]},
                                   first_app=app_parts[k][0], apps=app_parts[k][1],
                                   endpoint=endpoint, cells=len(nodes), index=k)
            for k, n in enumerate(nodes)}


def cell_config_text(source: dict) -> str:
    """The config a cell loads, from the mapping the coordinator read (``ConfigFile.raw``, left
    as it is): its edge_server's template is the coordinator's file (the server runs there),
    so the cell's copy does not name it."""
    raw = copy.deepcopy(source)
    (raw.get("edge_server") or {}).pop("config_template", None)
    return yaml.safe_dump(raw, sort_keys=False)


class ConnectedCoordinator(Coordinator):
    edge: Optional[Edge] = None
    sampler: Optional[sched.SchedSampler] = None
    edge_sut: Optional[EdgeSutSampler] = None
    t0_mono_ns = 0          # T0 on this host's CLOCK_MONOTONIC

    def run(self) -> int:
        try:
            return super().run()
        finally:
            self._stop_edge()

    def _stop_edge(self) -> Optional[bool]:
        running = None
        if self.edge is not None:
            running = self.edge.running()
            if self.sampler is not None:
                self.sampler.stop()
            if self.edge_sut is not None:
                self.edge_sut.stop()       # its last sample while the server still runs
                self.edge_sut = None
            self.edge.stop()
            self.edge.remove()
            self.edge = None
        return running

    def _record_privileges(self) -> None:
        """Who the server's processes ran as (uid, capabilities), read while its workers still
        serve, as a single-host run does once all are attached: least privilege checked."""
        if self.edge is not None and self.edge.running():
            try:
                atomic.write_json(RunDir(self.dir).edge_privileges_json,
                                  privileges(self.edge.proc.pid))
            except OSError as e:   # the server's /proc gone between the check and the read
                log(f"edge server: privileges not recorded: {e}")

    def _split(self, cfg):
        nodes = sorted(self.agents)
        lay = make_layout(cfg)
        addr = service.manager(self.client)
        self.edge = Edge(cfg.edge_server, RunDir(self.dir).edge_dir, addr, lay.server_workers,
                         lay.worker_connections, lay.fds_per_process)
        shares = split_shares(cfg, nodes, self.edge.endpoint)   # bad input before the server
        self.edge.prepare()
        self.edge.start()
        self.sampler = sched.SchedSampler(RunDir(self.dir).edge_sched_csv)
        self.sampler.add("edge-server", "system", self.edge.pids)
        self.sampler.start()
        # the server's own CPU and memory (its process tree, on this host): the merged run
        # directory's monitor/sut.csv, analysed into summary.json sut_resources
        self.edge_sut = EdgeSutSampler(RunDir(self.dir), log=log).start(self.edge.proc.pid)
        log(f"edge server on {self.edge.endpoint}; split: " + ", ".join(
            f"{n} {sum(c for _, c in s.groups.values())} device(s), {s.apps} application(s)"
            for n, s in shares.items()))
        MergedRunDir(self.dir).connected_split_json.write_text(json.dumps(
            wire.ConnectedSplit(shares).model_dump(), indent=1) + "\n")
        text = cell_config_text(self.source.raw)     # the YAML read once, by the dispatcher
        for n in nodes:
            s = shares[n]
            if not s.groups and not s.apps:   # more nodes than devices: nothing to run
                a = self.agents.pop(n)
                a.conn.send(wire.Abort(why="no devices in this cell's share"))
                ag.bye(a)
                continue
            self.agents[n].conn.send(wire.Share(run_id=self.run_id, config_yaml=text,
                                                config_name=self.config_path.name, devices=[],
                                                connected=s))
        return shares

    def _start(self) -> None:
        super()._start()
        self.t0_mono_ns = time.monotonic_ns() - (time.time_ns() - self.t0_wall_ns)

    def _finish(self) -> int:
        self._record_privileges()
        edge_running = self._stop_edge()
        self._clocks_after()
        md = MergedRunDir(self.dir)
        got: dict[str, CellFile] = {}
        notes = list(self.notes)
        failed: dict[str, str] = {}
        for n, a in sorted(self.agents.items()):
            why = a.lost
            if not why:
                try:
                    ag.fetch_dir(a, md.cell_dir(n))
                except (wire.Closed, OSError, TimeoutError) as e:
                    why = f"its run directory could not be fetched ({e})"
            if not why and a.done and not a.done.ok:
                why = a.done.why or "it failed"
            if not why:
                got_or_why = read_cell(RunDir(md.cell_dir(n)).cell_json)
                if isinstance(got_or_why, str):
                    why = got_or_why
                else:
                    got[n] = got_or_why
            if why:
                failed[n] = why
        from wotbench.distributed import connected_merge as cm
        resolved = yaml.safe_dump(self.cfg.model_dump(mode="json"), sort_keys=False)
        cells, summaries = [], {}
        for n in sorted(self.agents):
            if n in failed:
                cells.append(CellRecord(node=n, run_dir=f"cells/{n}", devices=0, requests=None,
                                        verdict=failed_cell(n, failed[n])))
                continue
            s = cm.analyse_cell(md.cell_dir(n), n, got[n], got, self.cfg, resolved, md)
            summaries[n] = s
            cells.append(CellRecord(node=n, run_dir=f"cells/{n}", devices=got[n].devices,
                                    requests=cm.requests_of(s), verdict=from_summary(n, s)))
        v = aggregate([c.verdict for c in cells])
        merged = None
        if got:
            merged = cm.analyse_merged(self.dir, self.cfg, resolved, got, self.t0_mono_ns,
                                       edge_running, v)
        m = MergedRun(cells=cells, devices=sum(c.devices for c in cells),
                      overall=cm.requests_of(merged) if merged else cm.no_requests(),
                      verdict=v, clock=self.check, notes=notes)
        md.cluster_json.write_text(m.model_dump_json(indent=2) + "\n")
        md.report_md.write_text(report(m, self.run_id))
        log(f"verdict: {v.status}" + (f" (worst: {v.worst_node})" if v.worst_node else ""))
        from wotbench.distributed.verdict import table
        print(table(v))
        if merged is not None:
            r = merged.overall
            log(f"merged: {r.requests} RPCs of {m.devices} attached devices, round trip p50 "
                f"{_ms(r.response_time_ms.from_sent.p50_ms)} p99 "
                f"{_ms(r.response_time_ms.from_sent.p99_ms)}; {md.report_md}")
            if merged.slo is not None:
                log(f"merged {merged.slo.text}")
        self.summary = merged
        return merged.verdict.exit_code if merged is not None else v.exit_code


def read_cell(path: Path) -> CellFile | str:
    """A finished cell's ``cell.json``, or why it cannot be analysed (naming the file and the
    key): the cell is then a failed one, the others are merged."""
    if not path.exists():
        return f"its run directory has no {path.name}"
    try:
        cell = read_model(path, CellFile, "the cell's account of its run")
    except AnalysisError as e:
        return str(e)
    if cell.t0_mono_ns is None or cell.warmup_end_ns is None:
        return f"{path}: t0_mono_ns: null, the cell said it finished but never reached T0"
    return cell


def _ms(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.2f} ms"


def run(config_path, out_root="reports", bound_ms: Optional[float] = None,
        source=None) -> RunResult:
    """One connected run across hosts: its exit code, merged run directory and summary."""
    c = ConnectedCoordinator(config_path, out_root, bound_ms, source)
    code = c.run()
    return RunResult(code, c.dir, c.summary)
