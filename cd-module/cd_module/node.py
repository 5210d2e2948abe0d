"""Contention detector (CD) module (paper §4.5): what it deploys and how it is sized.

- CD node: a ``wot-device`` named ``cd-node`` with one deterministic resource ``cd`` whose
  service time and mode are ``contention_detector.service_time_ms`` / ``.mode`` of the resolved
  config (``auto`` = the request-weighted mean device service time and the predominant mode).
  It runs on the device cores (plan ``cd_node_cpuset``), so it competes for CPU exactly like a
  device and its response time rises when the device cores are contended.
- CD-GE: a ``gateway-emulator`` replaying a sequential deterministic workload against the CD
  node: one request every ``interval_s`` (default 0.5 s), on its own core (plan ``cd_ge_core``).
  At two requests per second and one 5 ms service time per request the probe adds 1 % of a core.
  Defaults (0.5 s probes, ``calibration_s`` 20 s = 40 baseline samples, 20 probes per 10 s
  contention window) are chosen from measurements in docs/VALIDATION.md: with 1 s probes the
  median of 10 probes in a window is noisy enough under light device load to raise false windows.

Timeline (all absolute CLOCK_MONOTONIC; T0 chosen by the runner once everything is ready):
  T0 ............ CD-GE starts; calibration: the CD node alone (no main load) -> the baseline
  T0 + cal_s .... test start: the main GE(s) start (``--start-at``); the CD-GE continues
  T0 + cal_s + duration_s ... end of the test trace; the CD-GE trace ends here as well.
The CD trace times are relative to T0 (``trace/cd-trace.csv``); the main trace times are
relative to the test start. Both files and the CD node's resource file are written by
``wotbench.workload.generate``; this module holds the sizing the runner deploys and records.
"""
from __future__ import annotations

from dataclasses import dataclass

from wotbench.deploy.addressing import CD_NODE_NAME
from wotbench.rundir import CD_GE_DIR, CdRecord

CD_NODE = CD_NODE_NAME   # the CD node, a wot-device
CD_GE = CD_GE_DIR        # its gateway emulator (output in cd-ge/)


@dataclass(frozen=True)
class CdSettings:
    enabled: bool
    service_time_us: int
    mode: str
    interval_s: float
    calibration_s: float

    def record(self, resources: str) -> CdRecord:
        """run.json ``cd``; ``resources``: the CD node's resource file, relative to the run."""
        return CdRecord(device=CD_NODE, service_time_us=self.service_time_us, mode=self.mode,
                        interval_s=self.interval_s, calibration_s=self.calibration_s,
                        resources=resources)


def settings(cfg) -> CdSettings:
    """Sizing from a *resolved* config (``wotbench.deploy.resolve``)."""
    cd = cfg.contention_detector
    st_ms = cd.service_time_ms
    if st_ms == "auto" or cd.mode == "auto":
        raise ValueError("contention_detector has auto values: resolve the config first")
    return CdSettings(enabled=bool(cd.enabled), service_time_us=max(0, round(float(st_ms) * 1000)),
                      mode=cd.mode, interval_s=float(cd.interval_s),
                      calibration_s=float(cd.calibration_s))
