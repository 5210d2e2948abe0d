"""The run directory: its layout and the typed contracts that cross from the runner to the
analysis and from the analysis to every reader (report, sweep, validation, capacity).

- :class:`RunDir` (``layout.py``): every path of a run directory, and reading/writing the two
  JSON contracts through their models;
- :class:`RunRecord` (``record.py``): ``run.json``, written by the runner;
- :class:`Summary` (``summary.py``): ``summary.json``, written by the analysis, with the rule
  parameters (``AnalysisParams``) it records; its percentile families are one
  :class:`Quantiles` type (``quantiles.py``);
- what the C programs write, read by the analysis and the runner: a GE's ``summary.json``
  (:class:`GeSummary`, with ``dtls``: :class:`GeDtls`), ``observe.json`` (:class:`GeObserve`)
  and ``warmup.json`` (:class:`GeWarmupFile`) in ``ge_files.py``; a device's
  ``device-summary.json`` (:class:`DeviceSummary`) in ``device_files.py``; the notification
  sink's ``sink.json`` (``SinkSummary``) in ``sink_files.py``; a connected run's
  ``conn-summary.json`` and ``rpc-summary.json`` (``ConnSummary``, ``RpcSummary``) in
  ``connected_files.py``; a connected cell's ``cell.json`` (``CellFile``) in
  ``connected_cell.py``.

Models reject unknown keys: a writer and a reader cannot disagree silently.
"""
from wotbench.rundir.device_files import DeviceSummary
from wotbench.rundir.ge_files import GeClosedLoop, GeDtls, GeObserve, GeSummary, GeWarmupFile
from wotbench.rundir.layout import CD_GE_DIR, MergedRunDir, RunDir
from wotbench.rundir.quantiles import Quantiles
from wotbench.rundir.record import (BridgeRecord, CdRecord, DeviceRecord, EpisodeRecord, Failure, FleetRecord, GeRecord,
                     HostRecord, ImpairCounters, ImpairedDevice, NetworkRecord, Phases, PlanNote, RunRecord, SysctlChange, TestWindow,
                     Window)
from wotbench.rundir.slo_block import SloBlock, SloObjectiveResult, SloOffender, SloWindow
from wotbench.rundir.summary import (AnalysisParams, ContentionParams, GeIntegrityParams, MonitorBlock, RdParams,
                      Summary)

__all__ = [
    "CD_GE_DIR", "MergedRunDir", "RunDir", "BridgeRecord", "CdRecord", "DeviceRecord", "EpisodeRecord", "Failure",
    "FleetRecord", "GeRecord", "HostRecord", "ImpairCounters", "ImpairedDevice", "NetworkRecord", "Phases", "PlanNote", "RunRecord", "SysctlChange",
    "TestWindow", "Window", "AnalysisParams", "ContentionParams", "GeIntegrityParams", "MonitorBlock",
    "RdParams", "Summary", "SloBlock", "SloObjectiveResult", "SloOffender", "SloWindow",
    "DeviceSummary", "GeClosedLoop", "GeDtls", "GeObserve", "GeSummary", "GeWarmupFile", "Quantiles",
]
