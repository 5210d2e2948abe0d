"""Read a run directory (docs/CONTRACTS.md §1-§4) into pandas DataFrames.

All readers validate the header, parse with explicit dtypes (fast C parser) and, when the fast
parse fails, rescan the file line by line to name the first bad line: ``FILE:LINE: problem``.
Missing or malformed required files raise :class:`AnalysisError` (exit code 2).

The JSON files the C programs write (a GE's summary.json, observe.json; a device's
device-summary.json) are read here, once, through their models (``wotbench.rundir.ge_files``,
``wotbench.rundir.device_files``): a missing or unknown key, or a value of the wrong type, is an
AnalysisError naming the file and the key, and the analysis reads attributes, never defaults.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from pydantic import BaseModel, ValidationError

from wotbench.csvcheck import read_csv_checked
from wotbench.rundir import CD_GE_DIR, GeRecord, RunDir, RunRecord
from wotbench.rundir.layout import (GE_BLOCKWISE, GE_HANDSHAKES, GE_HTTP, GE_NOTIFICATIONS,
                                    GE_OBSERVE, GE_REQUESTS, GE_SUMMARY, NOTIFY_LOG)
from wotbench.rundir.device_files import DeviceSummary
from wotbench.rundir.ge_files import GeObserve, GeSummary
from wotbench.schema_errors import problems as schema_problems
from wotbench.workload.trace_io import read_resources as _read_resources_checked

from wotbench.analysis import fleet_load, killed
from wotbench.analysis.errors import AnalysisError

OUTCOMES = ("ok", "error", "timeout", "reset", "unsent")
METHODS = ("GET", "PUT", "POST", "DELETE")

REQUESTS_COLUMNS = {
    "index": "int", "device": "int", "method": "str", "path": "str?",
    "scheduled_ns": "int", "sent_ns": "int?", "received_ns": "int?", "code": "str?",
    "outcome": OUTCOMES, "retransmissions": "int?",
}
OBSERVE_METHODS = ("OBSERVE", "CANCEL")
BLOCKWISE_COLUMNS = {"index": "int", "kind": ("block1", "block2"), "body_bytes": "int",
                     "block_size": "int", "blocks": "int", "retransmissions": "int"}
# http.csv (http:// GE): when a request began waiting for a connection (empty: it found one)
HTTP_COLUMNS = {"index": "int", "queued_ns": "int?", "new_connection": "int"}
HANDSHAKE_COLUMNS = {"session": "int", "device": "int", "ep": "int", "start_ns": "int",
                     "end_ns": "int?", "outcome": ("ok", "failed", "timeout"), "request": "int"}
NOTIFICATION_COLUMNS = {
    "observation": "int", "device": "int", "path": "str?", "seq": "int", "received_ns": "int",
    "type": "str", "code": "str", "flags": "str?",
}
NOTIFY_LOG_COLUMNS = {
    "emit_ns": "int", "tick_ns": "int?", "read_start_ns": "int?", "read_end_ns": "int?",
    "path": "str", "kind": ("register", "notify", "cancel"), "seq": "int?", "type": "str",
    "token": "str?",
}
DEVICE_LOG_COLUMNS = {
    "arrival_ns": "int", "start_ns": "int?", "end_ns": "int?", "path": "str?", "method": "str?",
    "code": "str?",
}
# wot-device --push: the GE's columns, every one, plus the phase and the op
PUSH_COLUMNS = {**REQUESTS_COLUMNS, "received_kernel_ns": "int?",
                "phase": ("setup", "test", "teardown"), "op": "str"}
# columns newer programs add at the end (older run directories lack them; still analysed)
REQUESTS_OPTIONAL = {"received_kernel_ns": "int?", "client": "int?", "phase": "str?"}
# closed loop (GE --clients): requests sent in these phases are recorded, not counted
MARKED_PHASES = ("warmup", "cooldown")
NOTIFICATION_OPTIONAL = {"received_kernel_ns": "int?"}
DEVICE_LOG_OPTIONAL = {"token": "str?", "arrival_kernel_ns": "int?", "response_sent_ns": "int?"}


def _with_optional(path: Path, spec: dict[str, Any], optional: dict[str, Any]) -> dict[str, Any]:
    """``spec`` plus the optional columns the file's header has."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    return {**spec, **{k: v for k, v in optional.items() if k in header}}


def read_json(path: Path, what: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"{path}: {what} is missing")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AnalysisError(f"{path}: {what} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise AnalysisError(f"{path}: {what} must be a JSON object")
    return data


M = TypeVar("M", bound=BaseModel)


def read_model(path: Path, model: type[M], what: str) -> M:
    """A JSON file through its model; AnalysisError (exit 2) naming the file and every bad key."""
    data = read_json(path, what)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise AnalysisError(f"{path}: {what}: " + "; ".join(schema_problems(e, model))) from None


def _normalise_path_col(df: pd.DataFrame) -> None:
    """Paths are compared without a leading slash (resource files have none)."""
    col = df["path"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [str(c).lstrip("/") for c in col.cat.categories]
        if len(set(cats)) == len(cats):
            df["path"] = col.cat.rename_categories(cats)
            return
    df["path"] = col.astype(object).where(col.notna(), "").astype(str).str.lstrip("/").astype("category")


def read_requests(path: Path) -> pd.DataFrame:
    spec = _with_optional(path, REQUESTS_COLUMNS, REQUESTS_OPTIONAL) if Path(path).is_file() \
        else REQUESTS_COLUMNS
    df = read_csv_checked(path, spec, "GE requests.csv", AnalysisError)
    if df["path"].isna().any():
        df["path"] = df["path"].cat.add_categories([""]).fillna("") if "" not in df["path"].cat.categories else df["path"].fillna("")
    _normalise_path_col(df)
    df["outcome"] = df["outcome"].astype(pd.CategoricalDtype(list(OUTCOMES)))
    return df


def read_device_log(path: Path) -> pd.DataFrame:
    # wot-device writes the request tokens (an exact join) and its kernel arrival / response
    # send stamps (the response-time decomposition) too
    spec = _with_optional(path, DEVICE_LOG_COLUMNS, DEVICE_LOG_OPTIONAL) if Path(path).is_file() \
        else DEVICE_LOG_COLUMNS
    df = read_csv_checked(path, spec, "device-log.csv", AnalysisError)
    if df["path"].isna().any():
        df["path"] = df["path"].astype(object).fillna("").astype("category")
    _normalise_path_col(df)
    return df


def read_resources(path: Path) -> pd.DataFrame:
    return _read_resources_checked(path, AnalysisError)


@dataclass
class GeData:
    ge_id: str
    dir: Path
    requests: pd.DataFrame          # requests only (OBSERVE/CANCEL rows are in observe_requests)
    summary: GeSummary                              # summary.json
    observe_requests: pd.DataFrame | None = None   # the OBSERVE/CANCEL rows of requests.csv
    notifications: pd.DataFrame | None = None      # notifications.csv
    observe: GeObserve | None = None                # observe.json (a trace with OBSERVE lines)
    blockwise: pd.DataFrame | None = None          # blockwise.csv (GE --block-size)
    handshakes: pd.DataFrame | None = None         # handshakes.csv (GE with DTLS, coaps://)
    # closed loop: the rows sent in the warm-up / cool-down (phase column), kept apart from
    # `requests` like the OBSERVE rows: recorded, not counted
    marked_requests: pd.DataFrame | None = None

    @property
    def closed_loop(self) -> bool:
        return self.summary.closed_loop is not None

    @property
    def start_mono_ns(self) -> int:
        """The GE's start instant: the zero of every time in its requests.csv."""
        return self.summary.start_mono_ns


@dataclass
class DeviceInfo:
    name: str
    id: int | None
    group: str | None = None
    resources: pd.DataFrame | None = None   # path, service_time_us, mode, payload_bytes
    log: pd.DataFrame | None = None
    log_summary: DeviceSummary | None = None     # device-summary.json
    notify_log: pd.DataFrame | None = None   # notify-log.csv (observable resources only)
    push: pd.DataFrame | None = None         # push-requests.csv (devices[].push only)
    fleet: str | None = None                 # the wot-fleet engine hosting it (its log is there)


@dataclass
class RunData:
    run_dir: Path
    run: RunRecord
    ges: list[GeData]
    cd_ge: GeData | None
    devices: dict[str, DeviceInfo]          # main devices by name
    cd: DeviceInfo | None
    test_start_ns: int
    duration_s: float
    warnings: list[str] = field(default_factory=list)
    # the wot-fleet engines by name (fleet_load.py): their devices' logs in one frame each
    fleets: dict[str, fleet_load.FleetData] = field(default_factory=dict)


def _load_ge(run_dir: Path, ge_id: str, rel_dir: str) -> GeData:
    d = run_dir / rel_dir
    summary = read_model(d / GE_SUMMARY, GeSummary, f"summary.json of {ge_id}")
    requests = read_requests(d / GE_REQUESTS)
    blockwise = None
    if (d / GE_BLOCKWISE).is_file():
        blockwise = read_csv_checked(d / GE_BLOCKWISE, BLOCKWISE_COLUMNS, "GE blockwise.csv",
                                     AnalysisError)
    handshakes = None
    if (d / GE_HANDSHAKES).is_file():
        handshakes = read_csv_checked(d / GE_HANDSHAKES, HANDSHAKE_COLUMNS, "GE handshakes.csv",
                                      AnalysisError)
    if (d / GE_HTTP).is_file():   # the wait for a connection is the server's, not the GE's
        http = read_csv_checked(d / GE_HTTP, HTTP_COLUMNS, "GE http.csv", AnalysisError)
        queued = pd.Series(http["queued_ns"].to_numpy("float64"), index=http["index"].to_numpy())
        requests["queued_ns"] = queued.reindex(requests["index"].to_numpy()).to_numpy()
    marked = None
    if "phase" in requests.columns:
        marked_rows = requests["phase"].isin(MARKED_PHASES).to_numpy()
        if marked_rows.any():
            marked = requests[marked_rows].reset_index(drop=True)
            requests = requests[~marked_rows].reset_index(drop=True)
    obs_rows = requests["method"].isin(OBSERVE_METHODS).to_numpy()
    observe_requests = notifications = observe = None
    if obs_rows.any():   # observations are analysed apart (analysis/observe.py)
        observe_requests = requests[obs_rows].reset_index(drop=True)
        requests = requests[~obs_rows].reset_index(drop=True)
        requests["method"] = requests["method"].cat.remove_unused_categories()
        requests["path"] = requests["path"].cat.remove_unused_categories()
        if (d / GE_NOTIFICATIONS).is_file():
            path = d / GE_NOTIFICATIONS
            notifications = read_csv_checked(
                path, _with_optional(path, NOTIFICATION_COLUMNS, NOTIFICATION_OPTIONAL),
                "GE notifications.csv", AnalysisError)
        # the GE writes it whenever its trace has OBSERVE lines: its counts are in the summary
        observe = read_model(d / GE_OBSERVE, GeObserve, f"observe.json of {ge_id}")
    return GeData(ge_id=ge_id, dir=d, requests=requests, summary=summary,
                  observe_requests=observe_requests, notifications=notifications,
                  observe=observe, blockwise=blockwise, handshakes=handshakes,
                  marked_requests=marked)


def _load_device_files(rd: RunDir, dev: DeviceInfo, res_rel: str | None,
                       warnings: list[str], fallback_service_us: int | None = None) -> None:
    res_path = rd.path / res_rel if res_rel else rd.resource_file(dev.name)
    if res_path.is_file():
        dev.resources = read_resources(res_path)
    elif fallback_service_us is not None:
        # one pseudo-resource matching every path (see rd.service_times)
        dev.resources = pd.DataFrame({"path": ["*"], "service_time_us": [int(fallback_service_us)],
                                      "mode": ["busy"], "payload_bytes": [0]})
        warnings.append(f"{res_path}: missing; using run.json cd.service_time_us="
                        f"{fallback_service_us} as S for every {dev.name} request")
    else:
        warnings.append(f"{res_path}: resource file missing; R_d not computed for {dev.name}")
    log_path = rd.device_log(dev.name)
    if log_path.is_file():
        dev.log = read_device_log(log_path)
    else:
        warnings.append(f"{log_path}: device log missing; no response-time decomposition "
                        f"for {dev.name}")
    notify_path = log_path.parent / NOTIFY_LOG
    if notify_path.is_file():
        dev.notify_log = read_csv_checked(notify_path, NOTIFY_LOG_COLUMNS, "notify-log.csv",
                                          AnalysisError)
    if rd.push_requests(dev.name).is_file():
        dev.push = read_csv_checked(rd.push_requests(dev.name), PUSH_COLUMNS,
                                    "push-requests.csv", AnalysisError)
    sum_path = rd.device_summary(dev.name)
    if sum_path.is_file():
        dev.log_summary = read_model(sum_path, DeviceSummary, "device-summary.json")
        dropped = dev.log_summary.log_dropped
        if dropped:
            warnings.append(f"{sum_path}: {dropped} device-log entries were dropped "
                            f"(log capacity); decomposition is partial for {dev.name}")


def third_party_notes(servers: dict[str, list[str]]) -> list[str]:
    """One note per third-party server: why its devices have R only."""
    out = []
    for what, names in servers.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(f"{shown} ({what}): R only -- a third-party server has no WoTbench resource "
                   "file (service times) and writes no device log, so R_d and the response-time "
                   "decomposition are not computed for it" +
                   ("" if what.startswith("external endpoint") else
                    "; the host's share is (its run-queue wait per request the GEs got "
                    "answered, docs/DETECTOR.md)"))
        if what.startswith("external endpoint"):
            out.append(f"{shown}: outside the contention check -- WoTbench does not run "
                       f"{what.removeprefix('external endpoint ')}, so the CD (which checks this "
                       "host's device cores) says nothing about the far end")
    return out


def read_run_record(rd: RunDir) -> RunRecord:
    """run.json through its model; AnalysisError (exit 2) naming the file and the keys."""
    data = read_json(rd.run_json, "run.json")
    try:
        return RunRecord.model_validate(data)
    except ValidationError as e:
        raise AnalysisError(f"{rd.run_json}: " + "; ".join(schema_problems(e, RunRecord))) from None


def load_run(run_dir: str | Path) -> RunData:
    rd = RunDir(run_dir)
    run_dir = rd.path
    if not run_dir.is_dir():
        raise AnalysisError(f"{run_dir}: run directory does not exist")
    run = read_run_record(rd)
    killed.check(rd, run)     # an unfinished run.json: a harness still running, or killed
    warnings: list[str] = []

    ges_spec = run.ges
    if ges_spec is None:   # a hand-made run.json: every ge/<id>/ directory is a main GE
        ges_spec = [GeRecord(id=p.name, dir=rd.rel(p))
                    for p in sorted(rd.ges_dir.glob("*")) if p.is_dir()]
    ges = [_load_ge(run_dir, g.id, g.dir) for g in ges_spec]

    cd_ge = None
    cd_spec = run.cd
    cd_ge_dir = run.cd_ge.dir if run.cd_ge else CD_GE_DIR
    if cd_spec is not None or (run_dir / cd_ge_dir).is_dir():
        if (run_dir / cd_ge_dir / GE_REQUESTS).is_file():
            cd_ge = _load_ge(run_dir, CD_GE_DIR, cd_ge_dir)
        else:
            warnings.append(f"{run_dir / cd_ge_dir / GE_REQUESTS}: contention-detector GE "
                            "log missing; contention cannot be assessed")

    devices: dict[str, DeviceInfo] = {}
    third_party: dict[str, list[str]] = {}
    for d in run.devices:
        dev = DeviceInfo(name=d.name, id=d.id, group=d.group)
        if d.server:   # not a wot-device: no resource file, no device log (wotbench.config.byo)
            third_party.setdefault(d.server, []).append(d.name)
        else:
            _load_device_files(rd, dev, d.resources, warnings)
        devices[d.name] = dev
    # run.json fleets[]: the devices of the wot-fleet engines, listed in each one's files
    fleets = {f.name: fleet_load.load_fleet(rd, f, read_model, warnings) for f in run.fleets}
    for f in run.fleets:     # devices[].push in an engine: every device's rows in one file
        if rd.fleet_push_requests(f.name).is_file():
            push = read_csv_checked(rd.fleet_push_requests(f.name), PUSH_COLUMNS,
                                    "fleet-push.csv", AnalysisError)
            unknown = ~np.isin(push["device"].to_numpy(np.int64), fleets[f.name].index)
            if unknown.any():
                raise AnalysisError(f"{rd.fleet_push_requests(f.name)}:"
                                    f"{int(np.flatnonzero(unknown)[0]) + 2}: column device: "
                                    f"{int(push['device'].to_numpy()[unknown][0])} is not a device "
                                    f"of {f.name}, expected the index of one of its devices")
            fleets[f.name].push = push
    resources = fleet_load.ResourceReader(read_resources)
    for f in run.fleets:
        for name, dev_id, res in fleet_load.members(rd, f, fleets[f.name], resources, warnings):
            devices[name] = DeviceInfo(name=name, id=dev_id, group=f.group, fleet=f.name,
                                       resources=res)
    warnings.extend(third_party_notes(third_party))

    cd = None
    if cd_spec is not None:
        cd = DeviceInfo(name=cd_spec.device, id=None, group="cd")
        _load_device_files(rd, cd, cd_spec.resources, warnings, cd_spec.service_time_us)

    test_start = run.test.start_mono_ns if run.test else None
    if not isinstance(test_start, int) or test_start <= 0:
        test_start = min((g.start_mono_ns for g in ges), default=0)
    duration = run.test.duration_s if run.test else None
    if not isinstance(duration, (int, float)) or duration <= 0 or math.isnan(duration):
        duration = max((g.summary.duration_s for g in ges), default=0.0)
    if not duration:
        spans = [g.requests["scheduled_ns"].max() / 1e9 for g in ges if len(g.requests)]
        duration = float(max(spans, default=0.0)) or 1.0
    return RunData(run_dir=run_dir, run=run, ges=ges, cd_ge=cd_ge, devices=devices, cd=cd,
                   test_start_ns=int(test_start), duration_s=float(duration), warnings=warnings,
                   fleets=fleets)
