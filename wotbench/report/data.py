"""The data each figure draws, read from the series the analysis wrote (``series/*.csv``), with
the reason shown in the figure's place when a series is absent: :class:`FigureData`, one
attribute per figure key (None: absent, ``missing[key]`` says why)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.csvcheck import read_optional_csv
from wotbench.rundir import RunDir, RunRecord, Summary


def _read(rd: RunDir, name: str) -> Optional[pd.DataFrame]:
    return read_optional_csv(rd.series(name))


@dataclass(frozen=True)
class RdSeries:
    windows: Optional[pd.DataFrame]     # series/rd_over_time.csv
    cd: Optional[pd.DataFrame]          # series/cd_samples.csv


@dataclass(frozen=True)
class NotifySeries:
    over: pd.DataFrame                  # per second p50/p99
    cdf: pd.DataFrame
    points: Optional[pd.DataFrame]      # every notification


@dataclass(frozen=True)
class FigureData:
    rt_time: Optional[pd.DataFrame] = None
    rt_cdf: Optional[pd.DataFrame] = None
    # per GE: (cdf, expected RIT ms, submitted RIT ms)
    rit: Optional[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = None
    rd: Optional[RdSeries] = None
    host_share: Optional[pd.DataFrame] = None
    evidence: Optional[pd.DataFrame] = None
    fleet: Optional[pd.DataFrame] = None
    notify: Optional[NotifySeries] = None
    blockwise: Optional[pd.DataFrame] = None
    cpu_cores: Optional[pd.DataFrame] = None
    cpu_containers: Optional[pd.DataFrame] = None
    missing: dict[str, str] = field(default_factory=dict)   # figure key -> why it is absent

    def has(self, key: str) -> bool:
        return getattr(self, key) is not None


def figure_data(rd: RunDir, s: Summary, run: RunRecord) -> FigureData:
    """The series each figure draws, and why each absent one is absent."""
    data: dict[str, object] = {}
    missing: dict[str, str] = {}

    df = _read(rd, "response_times")
    if df is not None:
        df = df[df["device"].astype(str) == "all"].assign(t_s=lambda d: d["second"])
    if df is not None and len(df):
        oc = _read(rd, "outcomes_over_time")
        if oc is not None:
            cols = [c for c in oc.columns if c in ("ok", "error", "timeout", "reset")]
            sent = pd.DataFrame({"t_s": oc["second"], "sent": oc[cols].sum(axis=1)})
            df = df.merge(sent, on="t_s", how="outer").sort_values("t_s")
        data["rt_time"] = df
    else:
        missing["rt_time"] = ("series/response_times.csv is missing or empty (no request was "
                              "answered, or the analysis did not run)")

    df = _read(rd, "rt_cdf")
    if df is not None:
        data["rt_cdf"] = df
    else:
        missing["rt_cdf"] = "no successful response in ge/*/requests.csv"

    df = _read(rd, "rit_cdf")
    rit = {ge: (g["cdf"].to_numpy(float), g["expected_rit_ms"].to_numpy(float),
                g["submitted_rit_ms"].to_numpy(float))
           for ge, g in df.groupby(df["ge"].astype(str)) if ge != "cd-ge"} if df is not None else {}
    if rit:
        data["rit"] = rit
    else:
        missing["rit"] = ("series/rit_cdf.csv is missing (the GE sent fewer than two requests per "
                          "device, or the analysis did not run)")

    windows, cd = _read(rd, "rd_over_time"), _read(rd, "cd_samples")
    if windows is not None or cd is not None:
        data["rd"] = RdSeries(windows=windows, cd=cd)
    else:
        missing["rd"] = ("the contention detector was not enabled for this run (no CD node)"
                         if run.cd is None and s.rd.cd is None else
                         "series/rd_over_time.csv and series/cd_samples.csv are missing (no R_d "
                         "could be computed)")

    hs = _read(rd, "host_share")
    if hs is not None and len(hs) and hs["testbed_ms"].notna().any():
        data["host_share"] = hs
    else:
        missing["host_share"] = ("series/host_share.csv is missing or empty (a summary written "
                                 f"before the host's share: run `wotbench analyze {rd.path}`)")
    df = _read(rd, "evidence")
    if df is not None and len(df):
        data["evidence"] = df
    else:
        missing["evidence"] = ("series/evidence.csv is missing (a summary written before the "
                               f"kernel evidence: run `wotbench analyze {rd.path}`)")

    if s.fleet is not None:
        df = _read(rd, "fleet_lag")
        if df is not None and len(df):
            data["fleet"] = df
        else:
            missing["fleet"] = "series/fleet_lag.csv is missing or empty (no engine log)"

    if s.observe is not None:
        over, cdf = _read(rd, "notify_latency_over_time"), _read(rd, "notify_latency_cdf")
        if over is not None and cdf is not None and len(cdf):
            data["notify"] = NotifySeries(over=over, cdf=cdf, points=_read(rd, "notify_latency"))
        else:
            missing["notify"] = ("series/notify_latency_*.csv are missing or empty (no notification "
                                 "was received, or its device log is missing)")

    if s.blockwise is not None:
        df = _read(rd, "blockwise_transfers")
        if df is not None and len(df):
            data["blockwise"] = df
        else:
            missing["blockwise"] = "series/blockwise_transfers.csv is missing or empty"

    mon = s.monitor
    for key, series, why in (("cpu_cores", "cpu_cores", mon.cpu_cores_missing if mon else None),
                             ("cpu_containers", "cpu_groups",
                              mon.cpu_components_missing if mon else None)):
        df = _read(rd, series)
        if df is not None:
            data[key] = df
        else:
            missing[key] = why or (f"series/{series}.csv is missing (the analysis did not run, "
                                   f"or an older version did: run `wotbench analyze {rd.path}`)")
    return FigureData(**data, missing=missing)
