"""The run directory: its layout and the typed contracts that cross from the runner to the
analysis and from the analysis to every reader (report, sweep, validation, capacity).

- :class:`RunDir` (``layout.py``): every path of a run directory, and reading/writing the two
  JSON contracts through their models;
- :class:`RunRecord` (``record.py``): ``run.json``, written by the runner;
- :class:`Summary` (``summary.py``): ``summary.json``, written by the analysis, with the rule
  parameters (``AnalysisParams``) it records.

Models reject unknown keys: a writer and a reader cannot disagree silently.
"""
from wotbench.rundir.layout import CD_GE_DIR, RunDir
from wotbench.rundir.record import (BridgeRecord, CdRecord, DeviceRecord, EpisodeRecord, Failure, GeRecord,
                     HostRecord, ImpairCounters, ImpairedDevice, NetworkRecord, Phases, PlanNote, RunRecord, SysctlChange, TestWindow,
                     Window)
from wotbench.rundir.slo import SloBlock, SloObjectiveResult, SloOffender, SloWindow
from wotbench.rundir.summary import (AnalysisParams, ContentionParams, GeIntegrityParams, MonitorBlock, RdParams,
                      Summary)

__all__ = [
    "CD_GE_DIR", "RunDir", "BridgeRecord", "CdRecord", "DeviceRecord", "EpisodeRecord", "Failure",
    "GeRecord", "HostRecord", "ImpairCounters", "ImpairedDevice", "NetworkRecord", "Phases", "PlanNote", "RunRecord", "SysctlChange",
    "TestWindow", "Window", "AnalysisParams", "ContentionParams", "GeIntegrityParams", "MonitorBlock",
    "RdParams", "Summary", "SloBlock", "SloObjectiveResult", "SloOffender", "SloWindow",
]
