"""The ``slo:`` of a connected run, judged on the applications' RPCs (the run's requests):
``pXX`` on the round trip app send → reply, ``pXX_sched`` from the application's think timer,
``loss`` the RPCs that timed out, ``success`` those answered, ``throughput`` answered RPCs per
second; per device = the RPC's target device. Only RPCs scheduled after the warm-up count, and
the windows start at its end (as every other figure of a connected run). The same judge as a
CoAP run's (:mod:`wotbench.analysis.slo_judge`), so ``wotbench capacity --slo`` reads it
unchanged. It reads the run's typed config (the one the run was started with and wrote to
config.resolved.yaml), not that file again."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.analysis import slo_judge as sloa
from wotbench.config.connected import CONNECTED_PROTOCOLS
from wotbench.config.schema import Config
from wotbench.connected.rpc_outcomes import judged_rows
from wotbench.rundir import SloBlock


def _names(cfg: Config) -> tuple[dict[int, str], dict[str, str]]:
    """Device id -> name (``<group>-<k>``, as the engines name them) and name -> group."""
    by_id, group_of, nid = {}, {}, 0
    for g in cfg.devices:
        if g.protocol not in CONNECTED_PROTOCOLS:
            continue
        for k in range(g.count):
            name = f"{g.group}-{k}"
            by_id[nid + k], group_of[name] = name, g.group
        nid += g.count
    return by_id, group_of


def evaluate(cfg: Config, rpc_log: Optional[Path], warmup_end_ns: int,
             duration_s: float) -> Optional[SloBlock]:
    """The run's SLO block (None without ``slo:`` in ``cfg``)."""
    spec = cfg.slo
    if spec is None:
        return None
    by_id, group_of = _names(cfg)
    if rpc_log is not None and rpc_log.exists():
        j = pd.read_csv(rpc_log, usecols=["device", "sched_ns", "send_ns", "reply_ns",
                                          "outcome"])
        j = j[j["sched_ns"] >= warmup_end_ns]
    else:
        j = pd.DataFrame(columns=["device", "sched_ns", "send_ns", "reply_ns", "outcome"])
    names = [by_id.get(int(d), str(d)) for d in sorted(set(j["device"].astype(int)))]
    code = {n: i for i, n in enumerate(names)}
    codes = np.array([code[by_id.get(int(d), str(d))] for d in j["device"]], np.int64)
    ok = (j["outcome"] == "ok").to_numpy()
    rt = np.where(ok, (j["reply_ns"] - j["send_ns"]).to_numpy(float) / 1e6, np.nan)
    rs = np.where(ok, (j["reply_ns"] - j["sched_ns"]).to_numpy(float) / 1e6, np.nan)
    frame = sloa.RequestFrame(
        device=codes, t_s=(j["sched_ns"].to_numpy(float) - warmup_end_ns) / 1e9,
        outcome=judged_rows(j["outcome"], j["send_ns"]).to_numpy(),
        rt_sent_ms=rt, rt_sched_ms=rs, names=names, group_of=group_of)
    warmup_s = float(cfg.applications.warmup_s if cfg.applications else 0)
    return sloa.evaluate(spec, frame, max(1e-9, duration_s - warmup_s))
