"""Reading what the wot-fleet engines of a run wrote (docs/CONTRACTS.md §3b), vectorised.

A fleet is one engine hosting many devices: run.json ``fleets[]`` (:class:`FleetRecord`) names
it, its devices (the trace's ids ``first_id`` ..) are listed in its directory
(``RunDir.fleet_dir``: the devices file the runner wrote, and ``fleet-devices.csv`` the engine
wrote), not in run.json ``devices``. Every loop's ``fleet-log-<loop>.csv`` is read with pandas'
C parser into one frame (``loop`` column added), never split into one frame per device: 100 000
devices and 600 000 rows are read in about a second. The analysis joins that frame to the GE's
requests as it joins the process devices' logs (``rd.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np
import pandas as pd

from wotbench.analysis.errors import AnalysisError
from wotbench.csvcheck import read_csv_checked
from wotbench.rundir import FleetRecord, RunDir
from wotbench.rundir.fleet_files import (DEVICES_HEADER, FLEET_DEVICE_COLUMNS, FLEET_LOG_COLUMNS,
                                         FLEET_NOTIFY_COLUMNS, FleetDeviceRow, FleetLogRow,
                                         FleetNotifyRow, FleetSummary, header_problem)

# the devices file the runner wrote: what maps an engine's index to a device name
DEVICES_INPUT_COLUMNS = {"index": "int", "name": "str"}


@dataclass
class FleetData:
    """One engine's files. ``log``: every loop's rows (the contract's columns + ``loop``),
    None when the engine wrote no log; ``index``/``names``: its devices' global indices (what
    the log's ``device`` column carries) and names, from fleet-devices.csv or, when the engine
    wrote none (it died), from the runner's devices file."""
    name: str
    dir: Path
    index: np.ndarray
    names: np.ndarray
    summary: Optional[FleetSummary] = None
    table: Optional[pd.DataFrame] = None        # fleet-devices.csv
    log: Optional[pd.DataFrame] = None
    notify: Optional[pd.DataFrame] = None       # every loop's fleet-notify-<loop>.csv (Observe)
    push: Optional[pd.DataFrame] = None         # fleet-push.csv (devices[].push only)

    def names_of(self, index: np.ndarray) -> np.ndarray:
        """The names of the devices with these global indices (as the logs carry them)."""
        order = np.argsort(self.index, kind="stable")
        pos = np.clip(np.searchsorted(self.index[order], index), 0, max(len(order) - 1, 0))
        return self.names[order][pos]


def _header(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return [h.strip() for h in fh.readline().strip().split(",")]


def read_strict_csv(path: Path, row: type, spec: dict, what: str) -> pd.DataFrame:
    """A CSV file whose header is exactly its row model's columns (unknown ones refused too)."""
    if path.is_file():
        problem = header_problem(_header(path), row)
        if problem:
            raise AnalysisError(f"{path}:1: {what}: {problem}")
    return read_csv_checked(path, spec, what, AnalysisError)


# the C parser's dtypes of a fleet log: the tokens (one per row, all distinct) as plain strings,
# not the categories csvcheck makes of text columns (600 000 categories take seconds)
_LOG_DTYPES = {c: (np.int64 if k == "int" else np.float64 if k == "int?" else
                   object if c == "token" else "category") for c, k in FLEET_LOG_COLUMNS.items()}


def read_fleet_log(path: Path, loop: int) -> pd.DataFrame:
    """One loop's log; a malformed file goes through csvcheck, which names every bad line."""
    if path.is_file():
        problem = header_problem(_header(path), FleetLogRow)
        if problem:
            raise AnalysisError(f"{path}:1: fleet-log.csv: {problem}")
    try:
        df = pd.read_csv(path, dtype=_LOG_DTYPES, engine="c")
    except (ValueError, TypeError, pd.errors.ParserError, UnicodeDecodeError):
        df = None
    if df is None or (df["device"] < 0).any():
        df = read_strict_csv(path, FleetLogRow, FLEET_LOG_COLUMNS, "fleet-log.csv")
        if (df["device"] < 0).any():
            line = int(np.flatnonzero(df["device"].to_numpy() < 0)[0]) + 2
            raise AnalysisError(f"{path}:{line}: column device: negative, expected an index >= 0")
    df["loop"] = np.int64(loop)
    return df


def _loop_number(path: Path) -> int:
    tail = path.stem.rpartition("-")[2]
    if not tail.isdigit():
        raise AnalysisError(f"{path}: not a loop's log (expected fleet-log-<loop>.csv)")
    return int(tail)


def load_fleet(rd: RunDir, rec: FleetRecord, read_model, warnings: list[str]) -> FleetData:
    """``read_model``: loading.read_model (the JSON file through its model, exit 2 naming the
    file and every bad key)."""
    name = rec.name
    d = rd.fleet_dir(name)
    summary = table = None
    if rd.fleet_summary(name).is_file():
        summary = read_model(rd.fleet_summary(name), FleetSummary, "fleet-summary.json")
    else:
        warnings.append(f"{rd.fleet_summary(name)}: missing; the engine {name} did not stop "
                        "cleanly (no per-loop figures of its own)")
    if rd.fleet_device_table(name).is_file():
        table = read_strict_csv(rd.fleet_device_table(name), FleetDeviceRow,
                                FLEET_DEVICE_COLUMNS, "fleet-devices.csv")
        index, names = table["device"].to_numpy(np.int64), table["name"].astype(str).to_numpy()
    elif rd.fleet_devices_file(name).is_file():
        inp = read_csv_checked(rd.fleet_devices_file(name), DEVICES_INPUT_COLUMNS,
                               "fleet devices file", AnalysisError)
        index, names = inp["index"].to_numpy(np.int64), inp["name"].astype(str).to_numpy()
    else:   # neither: the run.json record's ids, named as the analysis names unknown ids
        index = np.arange(rec.first_id, rec.first_id + rec.devices, dtype=np.int64)
        names = np.array([f"dev-{i}" for i in index], dtype=object)
        warnings.append(f"{d}: neither fleet-devices.csv nor {DEVICES_HEADER[0]},name... "
                        f"devices file; {name}'s devices are named by their ids")
    frames = [read_fleet_log(p, _loop_number(p)) for p in rd.fleet_logs(name)]
    log = None
    if frames:
        log = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        for col in ("path", "method", "code"):   # the loops' categories differ: union them
            log[col] = log[col].astype(object).where(log[col].notna(), "").astype("category")
        unknown = ~np.isin(log["device"].to_numpy(np.int64), index)
        if unknown.any():
            bad = int(log["device"].to_numpy()[unknown][0])
            raise AnalysisError(f"{d}: fleet-log rows name device {bad}, which is not in "
                                f"fleet-devices.csv (nor the engine's devices file)")
    else:
        warnings.append(f"{d}: no fleet-log-<loop>.csv; no response-time decomposition for "
                        f"the {len(index)} devices of {name}")
    notes = [read_strict_csv(p, FleetNotifyRow, FLEET_NOTIFY_COLUMNS, "fleet-notify.csv")
             for p in rd.fleet_notify_logs(name)]
    notify = pd.concat(notes, ignore_index=True) if notes else None
    if summary is not None and summary.observe is not None and summary.observe.log_dropped:
        warnings.append(f"{rd.fleet_summary(name)}: {summary.observe.log_dropped} notification "
                        f"log entries were dropped (--log-capacity); Observe figures of {name} "
                        "are partial")
    if summary is not None and summary.log_dropped:
        warnings.append(f"{rd.fleet_summary(name)}: {summary.log_dropped} log entries were "
                        f"dropped (--log-capacity); decomposition is partial for {name}")
    return FleetData(name=name, dir=d, index=index, names=names, summary=summary, table=table,
                     log=log, notify=notify)


class ResourceReader:
    """Resource files by content: the runner writes one per device (trace/resources/<name>.csv),
    100 000 for a big fleet, mostly alike. Each distinct content is parsed (and checked) once
    and its devices share the frame, which ``rd.service_times_ms`` then looks up once."""

    def __init__(self, read: Callable[[Path], pd.DataFrame]):
        self.read = read
        self.by_content: dict[bytes, pd.DataFrame] = {}

    def __call__(self, path: str) -> Optional[pd.DataFrame]:
        try:
            with open(path, "rb") as f:
                content = f.read()
        except FileNotFoundError:
            return None
        if content not in self.by_content:
            self.by_content[content] = self.read(Path(path))
        return self.by_content[content]


def members(rd: RunDir, rec: FleetRecord, fleet: FleetData, resources: ResourceReader,
            warnings: list[str]) -> Iterator[tuple[str, int, Optional[pd.DataFrame]]]:
    """(name, trace id, resource table) of every device the engine hosted."""
    missing = 0
    names = [str(n) for n in fleet.names.tolist()]
    for idx, name, path in zip(fleet.index.tolist(), names, rd.resource_files(names)):
        res = resources(path)
        missing += res is None
        yield str(name), int(idx), res
    if missing:
        warnings.append(f"{rd.resources_dir}: {missing} resource file(s) of {rec.name}'s devices "
                        "missing; R_d not computed for them")


def device_codes(fleet: FleetData, code_of_name: dict[str, int]) -> np.ndarray:
    """The device code (position in the analysis' device list) of every log row; -1 for a
    device the analysis does not list."""
    lut_code = np.array([code_of_name.get(str(n), -1) for n in fleet.names], np.int64)
    order = np.argsort(fleet.index, kind="stable")
    keys = fleet.index[order]
    dev = fleet.log["device"].to_numpy(np.int64)
    pos = np.clip(np.searchsorted(keys, dev), 0, max(len(keys) - 1, 0))
    return np.where(keys[pos] == dev, lut_code[order][pos], -1)
