"""``wotbench run CONFIG --backend swarm``: one run across the Swarm's labelled nodes.

The coordinator (this process, on a manager or with DOCKER_HOST pointing at one) starts the
run's agent service, takes each agent's hello, splits the devices into cells
(``wotbench.distributed.split``, each node planned on its own cores), sends each cell its share,
measures every cell's clock (``wotbench.distributed.clock``) and refuses the run before T0 beyond
the bound, sends T0, waits for the cells (a silent one is lost: named, the others go on),
measures the clocks again, fetches each cell's run directory into ``cells/<node>/``, analyses
each cell (its own verdict), merges (``wotbench.distributed.merge``) and reports. On every path
the agent service is removed: each task stops its cell, whose runner removes what it created
on its node. Every refusal before T0 names the node and the fix.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Optional

from wotbench.config import backend_choice as choose
from wotbench.configfile.yaml_loader import ConfigFile, read_config_file
from wotbench.deploy.plan import cpuset_str, make_plan
from wotbench.distributed import (agentimage, clock, merge, mergedsummary, service, split,
                                  tracesplit, verdict, wire)
from wotbench.distributed import agents as ag
from wotbench.errors import ConfigError, EnvironmentProblem, WotbenchError
from wotbench.run_result import RunDirSeen, RunResult
from wotbench.rundir import MergedRunDir
from wotbench.rundir.summary import Summary
from wotbench.runner.prepare.inputs import make_run_dir

ACCEPT_S = 180.0          # agents' tasks start, the cell containers start and call
DEPLOY_S = 600.0
START_MARGIN_S = 2.0      # T0's lead beyond the slowest cell's: the Start messages' way
CLEANUP_S = 150.0         # a stopped cell's runner removes what it created


def log(msg: str) -> None:
    print(f"wotbench: {msg}", flush=True)


class Coordinator:
    def __init__(self, config_path, out_root, bound_ms: Optional[float] = None,
                 source: Optional[ConfigFile] = None, on_run_dir: Optional[RunDirSeen] = None):
        self.config_path = Path(config_path)
        # the YAML read once: its text goes to the cells, its config decides here
        self.source = source if source is not None else read_config_file(config_path)
        self.cfg = self.source.config
        self.out_root = Path(out_root)
        self.bound_ms = bound_ms              # None: the config's cluster.clock_bound_ms
        self.bound_ns = 0
        self.agents: dict[str, ag.Agent] = {}
        self.names: dict[str, str] = {}       # node id -> hostname
        self.client = None
        self.run_id: Optional[str] = None
        self.dir: Optional[Path] = None
        self.clocks: dict[str, clock.CellClock] = {}
        self.check: Optional[clock.ClockCheck] = None
        self.notes: list[str] = []
        self.started = False                  # Start (T0) sent
        self.summary: Optional[Summary] = None   # the merged summary.json, once written
        self.on_run_dir = on_run_dir          # told the merged run's directory when made

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        import docker
        cfg = self.cfg
        self.bound_ns = int(choose.clock_bound_ms(cfg, self.bound_ms) * 1e6)
        self.client = docker.from_env(timeout=120)
        addr = service.manager(self.client)
        nodes = service.cell_nodes(self.client)
        self.names = {n.id: n.hostname for n in nodes}
        image = agentimage.tag()
        rd = make_run_dir(self.out_root, cfg.name)
        self.dir, self.run_id = rd.path, rd.path.name
        if self.on_run_dir is not None:
            self.on_run_dir(rd.path)
        log(f"run {self.run_id} (swarm backend) on {len(nodes)} node(s): "
            f"{', '.join(n.hostname for n in nodes)} -> {self.dir}")
        listener = socket.create_server(("0.0.0.0", 0))
        coord = f"{addr}:{listener.getsockname()[1]}"
        try:
            service.create(self.client, self.run_id, image, coord)
            log(f"agent service {service.service_name(self.run_id)} ({image}); waiting for "
                f"the agents to call {coord}")
            self.agents = ag.accept(listener, [n.hostname for n in nodes], ACCEPT_S,
                                    self._task_problems)
            shares = self._split(cfg)
            self._deploy(shares)
            self._clocks_before()
            self._start()
            self._wait()
            return self._finish()
        finally:
            listener.close()
            self._await_cleanup()
            for a in self.agents.values():
                ag.bye(a)
            if self.run_id and self.dir is not None:
                service.save_logs(self.client, self.run_id, MergedRunDir(self.dir).agents_log)
            left = service.remove(self.client, self.run_id) if self.run_id else None
            log(f"removed the agent service {service.service_name(self.run_id)}"
                + (f"; {left}" if left else ": every cell stopped and removed what it created"))

    def _await_cleanup(self) -> None:
        """A run stopped before its end (refused, a cell that could not deploy, an error):
        the cells waiting for T0 are told, and each reachable cell's runner removes what it
        created on its node before the service goes."""
        waiting = [a for a in self.agents.values() if a.done is None and a.lost is None]
        for a in waiting:
            if a.deployed is not None and not self.started:
                try:
                    a.conn.send(wire.Abort(why="the run was stopped before T0"))
                except wire.Closed:
                    continue
        deadline = time.monotonic() + CLEANUP_S
        ag.each([a for a in waiting if a.deployed is not None],
                lambda a: ag.wait_done(a, deadline, lambda n: ""))

    def _task_problems(self) -> dict[str, str]:
        bad = {t.node: f"task {t.state}: {t.error}" for t in
               service.tasks(self.client, self.run_id, self.names)
               if t.state in service.ABANDONED_TASK and t.state != "complete"}
        if bad:
            words = service.last_words(self.client, self.run_id)
            bad = {n: why + (f"; the agents' last words: {words}" if words else "")
                   for n, why in bad.items()}
        return bad

    # ------------------------------------------------------------------ before T0
    def _split(self, cfg) -> split.Split:
        missing = {n: a.hello.missing_images for n, a in self.agents.items()
                   if a.hello.missing_images}
        if missing:
            raise EnvironmentProblem("; ".join(
                f"{n} lacks the image(s) {', '.join(t)}" for n, t in sorted(missing.items()))
                + ". Fix: docker save TAGS | docker -H NODE load on each (make cluster-up does "
                  "it on the emulated cluster)")
        cells = []
        for n, a in sorted(self.agents.items()):
            try:
                plan = make_plan(cfg, cores=a.hello.cores)
            except ConfigError as e:   # e.g. placement.cpus names cores this node lacks
                raise EnvironmentProblem(
                    f"{n} cannot plan its cell on its cores {cpuset_str(a.hello.cores)}: "
                    f"{'; '.join(e.problems)}. Fix: placement.cpus: all (each node plans on its "
                    f"own cores), or take the label off {n} (docker node update --label-rm "
                    f"wotbench.cell {n})") from None
            cells.append(split.Cell(node=n, device_cores=len(plan.device_cores),
                                    max_devices=a.hello.max_devices))
        recorded = None
        if cfg.trace is not None:   # every line checked here, once, before any cell deploys
            from wotbench.workload.generate import check_recorded
            check_recorded(cfg)
            recorded = tracesplit.requests_per_device(cfg)
        sp = split.split(split.units_from_config(cfg, recorded), cells, cfg.gateways.count)
        MergedRunDir(self.dir).split_json.write_text(sp.model_dump_json(indent=2) + "\n")
        log("split: " + ", ".join(f"{s.node} {len(s.devices)} device(s) "
                                  f"({s.load_per_core:.2f} erlang/core, {s.gateways} GE(s))"
                                  for s in sp.cells)
            + f", spread {sp.spread:.1%}; of the run's {cfg.gateways.count} GE(s), each cell "
              "runs its share's part")
        for s in sp.cells:
            if not s.devices:   # more nodes than pods: this one has nothing to run
                log(f"{s.node}: no devices in its share (fewer pods than nodes); its agent "
                    "stands down")
                a = self.agents.pop(s.node)
                a.conn.send(wire.Abort(why="no devices in this cell's share"))
                ag.bye(a)
        sp = sp.model_copy(update={"cells": [s for s in sp.cells if s.devices]})
        text = self.source.text
        trace_text = Path(cfg.trace.file).read_text() if cfg.trace is not None else None
        resources = tracesplit.resource_files(cfg) if cfg.trace is not None else {}
        for s in sp.cells:
            self.agents[s.node].conn.send(wire.Share(
                run_id=self.run_id, config_yaml=text, config_name=self.config_path.name,
                devices=s.devices, resources=resources, gateways=s.gateways,
                trace_csv=(tracesplit.slice_lines(trace_text, s.device_ids)
                           if trace_text is not None else None)))
        return sp

    def _deploy(self, sp: split.Split) -> None:
        ag.each(list(self.agents.values()), lambda a: ag.wait_deployed(a, DEPLOY_S))
        bad = [a for a in self.agents.values() if a.deployed is None]
        if bad:
            raise EnvironmentProblem("; ".join(
                f"the cell on {a.node} could not deploy: "
                + (a.done.why if a.done and a.done.why else a.lost or "it stopped")
                for a in bad) + " (the other cells were stopped before T0)")
        log("every cell's devices answer: " + ", ".join(
            f"{a.node} lead {a.deployed.lead_s:.1f} s" for a in self.agents.values()))

    def _clocks_before(self) -> None:
        est = {}
        ag.each(list(self.agents.values()), lambda a: est.__setitem__(a.node, ag.exchange(a)))
        lost = [a for a in self.agents.values() if est.get(a.node) is None]
        if lost:
            raise EnvironmentProblem("; ".join(f"{a.node}: {a.lost}" for a in lost))
        self.clocks = {n: clock.CellClock(node=n, before=e) for n, e in est.items()}
        self.check = clock.check(list(self.clocks.values()), self.bound_ns)
        log("clocks: " + ", ".join(
            f"{n} {c.before.offset_ns / 1e3:+.0f} ± {c.before.error_ns / 1e3:.0f} µs"
            for n, c in self.clocks.items())
            + f"; start skew ≤ {self.check.start_skew_ns / 1e3:.0f} µs")
        if self.check.refused:
            for a in self.agents.values():
                a.conn.send(wire.Abort(why="clock offset beyond the bound"))
            raise EnvironmentProblem("the run is refused before T0: "
                                     + "; ".join(self.check.refused))

    def _start(self) -> None:
        lead = max(a.deployed.lead_s for a in self.agents.values()) + START_MARGIN_S
        self.t0_wall_ns = time.time_ns() + int(lead * 1e9)
        for n, a in self.agents.items():
            a.conn.send(wire.Start(t0_wall_ns=self.t0_wall_ns,
                                   offset_ns=self.clocks[n].before.offset_ns))
        self.started = True
        log(f"T0 in {lead:.1f} s on every cell")

    # ------------------------------------------------------------------ after T0
    def _wait(self) -> None:
        cfg = self.cfg
        budget = (cfg.duration_s + 600 + (cfg.contention_detector.calibration_s
                                          if isinstance(cfg.contention_detector.calibration_s,
                                                        (int, float)) else 120))
        deadline = time.monotonic() + budget

        def seen(node: str) -> str:
            t = [x for x in service.tasks(self.client, self.run_id, self.names) if x.node == node]
            return f"; Swarm: task {t[0].state} {t[0].error}".rstrip() if t else ""
        ag.each(list(self.agents.values()), lambda a: ag.wait_done(a, deadline, seen))
        for a in self.agents.values():
            if a.lost:
                log(f"the cell on {a.node} is lost: {a.lost}; the other cells go on")

    def _clocks_after(self) -> None:
        """Every cell still there measured again; the clock check over before and after."""
        alive = [a for a in self.agents.values() if not a.lost]
        after = {}
        ag.each(alive, lambda a: after.__setitem__(a.node, ag.exchange(a)))
        for n, e in after.items():
            if e is not None:
                self.clocks[n] = clock.CellClock(node=n, before=self.clocks[n].before, after=e)
        self.check = clock.check(list(self.clocks.values()), self.bound_ns)

    def _finish(self) -> int:
        self._clocks_after()
        outcomes = []
        for n, a in sorted(self.agents.items()):
            why = a.lost
            if not why:
                try:
                    size = ag.fetch_dir(a, MergedRunDir(self.dir).cell_dir(n))
                    log(f"{n}: run directory received ({size / 1e6:.1f} MB)")
                except (wire.Closed, socket.timeout, OSError) as e:
                    why = f"its run directory could not be fetched ({e})"
            if not why and a.done and not a.done.ok:
                self.notes.append(f"{n}: {a.done.why}")
            if not why:
                why = _analyse(MergedRunDir(self.dir).cell_dir(n))
            outcomes.append(merge.CellOutcome(node=n, finished=why is None, why=why))
        m = merge.merge(self.dir, outcomes, self.check)
        m.notes += self.notes
        MergedRunDir(self.dir).cluster_json.write_text(m.model_dump_json(indent=2) + "\n")
        try:   # a sweep's or capacity search's point reads it
            summary = mergedsummary.write(self.dir, m, self.run_id)
        except (WotbenchError, ValueError, OSError, KeyError) as e:
            summary = None
            log(f"the merged summary.json could not be written ({e}); cluster.json holds the run")
        MergedRunDir(self.dir).report_md.write_text(report(m, self.run_id))
        if self.cfg.report.enabled:
            self._render([MergedRunDir(self.dir).cell_dir(c.node) for c in m.cells
                          if c.requests is not None])
        log(f"verdict: {m.verdict.status}" + (f" (worst: {m.verdict.worst_node})"
                                              if m.verdict.worst_node else ""))
        print(verdict.table(m.verdict))
        log(f"merged: {m.overall.requests} requests of {m.devices} devices; "
            f"{MergedRunDir(self.dir).report_md}")
        if summary is not None and summary.slo is not None:
            log(f"merged {summary.slo.text}")
        # the merged SLO result decides 0/4 (a cell's own SLO judges its share only)
        self.summary = summary
        return summary.verdict.exit_code if summary is not None else m.verdict.exit_code


    def _render(self, cells: list[Path]) -> None:
        """Each finished cell's own report (the agent image has no matplotlib, so here), then
        the merged report.html; a report that cannot be drawn is logged, the run stands."""
        from wotbench.report import render
        from wotbench.distributed.report import render_cluster
        for d in cells:
            try:
                render(d)
            except (WotbenchError, ValueError, OSError) as e:
                log(f"{d.name}: its report could not be rendered ({e})")
        try:
            log(f"report: {render_cluster(self.dir)}")
        except (WotbenchError, ValueError, OSError) as e:
            log(f"the merged report could not be rendered ({e}); report.md holds the figures")


def _analyse(cell: Path) -> Optional[str]:
    """Analyse a cell's run directory (its summary.json and verdict); None, or why not."""
    from wotbench.analysis import analyze
    try:
        analyze(cell)
        return None
    except (WotbenchError, ValueError, OSError, KeyError) as e:
        return f"its run directory could not be analysed ({e})"


def report(m: merge.MergedRun, run_id: str) -> str:
    """The merged run in Markdown: the per-cell verdicts, the merged figures, the clocks."""
    rt = m.overall.response_time_ms.from_sent
    lines = [f"# {run_id}: {len(m.cells)} cells, {m.devices} devices", "",
             f"**Verdict: {m.verdict.status}**" + (f" — the host that stopped being faithful: "
                                                   f"{m.verdict.worst_node}"
                                                   if m.verdict.worst_node else ""), "",
             verdict.table(m.verdict), "", "## Merged (from every request of every cell)", "",
             "| cell | devices | requests | ok | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|---|"]
    for c in m.cells:
        r = c.requests
        if r is None:
            lines.append(f"| {c.node} | {c.devices} | – | – | – | – | – |")
            continue
        s = r.response_time_ms.from_sent
        lines.append(f"| {c.node} | {c.devices} | {r.requests} | {r.outcomes.ok} | "
                     f"{_f(s.p50_ms)} | {_f(s.p95_ms)} | {_f(s.p99_ms)} |")
    lines.append(f"| **all** | {m.devices} | {m.overall.requests} | {m.overall.outcomes.ok} | "
                 f"{_f(rt.p50_ms)} | {_f(rt.p95_ms)} | {_f(rt.p99_ms)} |")
    if m.clock:
        lines += ["", "## Clocks", "", f"bound {m.clock.bound_ns / 1e6:g} ms, start skew ≤ "
                  f"{m.clock.start_skew_ns / 1e3:.0f} µs", ""]
        for c in m.clock.cells:
            after = (f", after {c.after.offset_ns / 1e3:+.0f} ± {c.after.error_ns / 1e3:.0f} µs"
                     if c.after else ", after: not measured (cell lost)")
            lines.append(f"- {c.node}: before {c.before.offset_ns / 1e3:+.0f} ± "
                         f"{c.before.error_ns / 1e3:.0f} µs{after}")
    if m.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in m.notes]
    return "\n".join(lines) + "\n"


def _f(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def run(config_path, out_root="reports", bound_ms: Optional[float] = None,
        source: Optional[ConfigFile] = None, on_run_dir: Optional[RunDirSeen] = None
        ) -> RunResult:
    """One run across hosts: its exit code, the merged run directory and merged summary."""
    c = Coordinator(config_path, out_root, bound_ms, source, on_run_dir)
    code = c.run()
    return RunResult(code, c.dir, c.summary)
