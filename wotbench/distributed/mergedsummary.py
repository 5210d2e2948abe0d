"""The merged run's own ``summary.json``, so that sweeps and capacity searches (which read a
point's typed summary) take a run across hosts as one point.

What is merged, and from what:

- ``overall`` and ``per_device``: from every request of every finished cell (each cell's GE
  logs, times relative to the cell's own test start), by the same code as a single run
  (``analysis.responses``): percentiles of the union, never averaged;
- ``slo``: the config's objectives judged on those merged requests;
- ``verdict``: the run's (``verdict.aggregate``: the worst cell's status, reasons naming the
  nodes), its exit code from it and the merged SLO result;
- everything a host measures about itself (GE integrity, R_d, contention, monitor, loss,
  evidence, SUT resources, load) is the **deciding cell's**: the worst cell when it finished,
  else the first finished one. ``run.warnings`` says which; each cell's own summary stays in
  ``cells/<node>/summary.json``.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

from wotbench.analysis import resolved
from wotbench.analysis import slo_judge as sloa
from wotbench.analysis.loading import load_run
from wotbench.analysis.responses import combine_ge, compute_responses
from wotbench.distributed.merge import MergedRun
from wotbench.rundir import MergedRunDir, RunDir
from wotbench.rundir.summary import Summary, Verdict


def deciding_cell(m: MergedRun) -> Optional[str]:
    """The node whose own blocks the merged summary carries (None: no cell finished)."""
    finished = [c.node for c in m.cells if c.requests is not None]
    if not finished:
        return None
    worst = m.verdict.worst_node
    return worst if worst in finished else finished[0]


def merged_summary(merged: Path, m: MergedRun, run_id: str) -> Optional[Summary]:
    """The summary of the merged run in ``merged`` (see the module docstring); None when no
    cell returned data (the run then has cluster.json only)."""
    node = deciding_cell(m)
    if node is None:
        return None
    finished = [c.node for c in m.cells if c.requests is not None]
    runs = {n: load_run(MergedRunDir(merged).cell_dir(n)) for n in finished}
    template = RunDir(MergedRunDir(merged).cell_dir(node)).read_summary()
    # every cell's GE log, its times made relative to that cell's own test start
    ges = [replace(g, ge_id=f"{n}/{g.ge_id}", summary=g.summary.model_copy(
               update={"start_mono_ns": g.start_mono_ns - r.test_start_ns}))
           for n, r in runs.items() for g in r.ges]
    req = combine_ge(ges, 0)
    by_id = {int(d.id): (name, d.group or name.rpartition("-")[0])
             for r in runs.values() for name, d in r.devices.items() if d.id is not None}
    ids = sorted(by_id)
    names = [by_id[i][0] for i in ids]
    code_of = {i: k for k, i in enumerate(ids)}
    codes = np.array([code_of[int(i)] for i in req["device"].to_numpy(np.int64)], np.int64)
    duration = max(r.duration_s for r in runs.values())
    overall, per_device = compute_responses(req, codes, names, duration)

    v = m.verdict
    slo_block, exit_code = None, v.exit_code
    warnings = list(template.run.warnings)
    spec = resolved.read(RunDir(MergedRunDir(merged).cell_dir(node)).config_resolved, warnings,
                         ("slo",)).slo
    if spec is not None:
        frame = sloa.RequestFrame(device=codes, t_s=req["sched"].to_numpy(np.float64) / 1e9,
                                  outcome=req["outcome"].astype(str).to_numpy(),
                                  rt_sent_ms=req["rt_sent_ms"].to_numpy(np.float64),
                                  rt_sched_ms=req["rt_sched_ms"].to_numpy(np.float64),
                                  names=names, group_of={n: g for n, g in by_id.values()})
        slo_block = sloa.with_verdict(sloa.evaluate(spec, frame, duration), v.status)
        exit_code = sloa.exit_code(v.status, slo_block)
    warnings.append(f"a run across {len(m.cells)} hosts ({', '.join(c.node for c in m.cells)}): "
                    f"overall, per_device and slo come from every finished cell's requests; the "
                    f"host's own blocks (GE integrity, R_d, contention, monitor, loss, load ...) "
                    f"are those of {node}'s cell (cells/{node}/summary.json), each cell's own are "
                    f"under cells/")
    run = template.run.model_copy(update={
        "run_id": run_id, "run_dir": str(merged), "backend": "swarm", "duration_s": duration,
        "interrupted": any(r.run.interrupted for r in runs.values()),
        "failures": [f for r in runs.values() for f in r.run.failures],
        "ges": [g.ge_id for g in ges], "devices": names, "warnings": warnings})
    verdict = Verdict(status=v.status, reasons=list(v.reasons), exit_code=exit_code,
                      checks=template.verdict.checks)
    return template.model_copy(update={"run": run, "overall": overall, "per_device": per_device,
                                       "verdict": verdict, "slo": slo_block})


def write(merged: Path, m: MergedRun, run_id: str) -> Optional[Summary]:
    """Write ``merged/summary.json`` (when a cell finished) and return it."""
    s = merged_summary(merged, m, run_id)
    if s is not None:
        RunDir(merged).write_summary(s)
    return s
