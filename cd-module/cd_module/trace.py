"""The contention detector's own trace (paper §4.5): one GET of the CD node's resource every
``interval_s``, from the start of calibration to the end of the test, sent by the CD-GE; and the
CD node's resource file (its service time and mode from :mod:`cd_module.sizing`)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from wotbench.config.schema import Config
from wotbench.deploy.resolve import cd_node_address
from cd_module.sizing import resolve_cd
from wotbench.rundir import atomic
from wotbench.rundir.layout import CD_TRACE_CSV, RESOURCES_DIR
from wotbench.workload.formats import TRACE_HEADER, write_resources
from wotbench.workload.formats import uri as resource_uri

CD_RESOURCE = "cd"
CD_PAYLOAD_BYTES = 16


def cd_trace_times_us(cfg: Config) -> np.ndarray:
    """CD probe send times (µs from calibration start): k * interval_s while < calibration + test."""
    cd = cfg.contention_detector
    total_us = (cd.calibration_s + cfg.duration_s) * 1e6
    step = cd.interval_s * 1e6
    return np.rint(np.arange(0, math.ceil(total_us / step)) * step).astype(np.int64)


def write_cd_files(cfg: Config, out_dir: Path) -> int:
    """Write cd-trace.csv and resources/cd-node.csv; returns the number of CD requests."""
    r = resolve_cd(cfg)
    cd = r.contention_detector
    a = cd_node_address(cfg)
    times = cd_trace_times_us(cfg) if cd.enabled else np.zeros(0, np.int64)
    uri = resource_uri(a, CD_RESOURCE)
    atomic.write_text(
        out_dir / CD_TRACE_CSV, TRACE_HEADER + "\n" + "".join(f"{a.id},{t},GET,{uri}\n" for t in times.tolist()))
    write_resources(out_dir / RESOURCES_DIR / f"{a.name}.csv",
                     [(CD_RESOURCE, int(round(float(cd.service_time_ms) * 1000)), cd.mode, CD_PAYLOAD_BYTES)])
    return len(times)
