"""What a wot-fleet engine writes at exit (docs/CONTRACTS.md §3b), in ``devices/<fleet>/``
(``RunDir.fleet_dir``): ``fleet-summary.json``, ``fleet-devices.csv`` and one
``fleet-log-<loop>.csv`` per event loop.

The JSON file is a strict model (:class:`FleetSummary`): a missing or unknown key, or a value of
the wrong type, is an error. The two CSV files are described by row models
(:class:`FleetDeviceRow`, :class:`FleetLogRow`) whose fields, in order, *are* the columns: the
analysis reads them vectorised (``csv_spec``: the column kinds of ``wotbench.csvcheck``) and
refuses a header with a missing or an unknown column (``header_problem``) — 100 000 devices
are not validated row by row through pydantic.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Optional

from pydantic import BaseModel, Field

from wotbench.rundir._model import Record


class LagQuantiles(Record):
    """The engine's own nearest-rank quantiles of one lag, ns."""
    p50: int
    p99: int
    max: int


class FleetLoop(Record):
    """One event loop: its devices, the requests it read and how late it was."""
    loop: int = Field(ge=0)
    devices: int = Field(ge=0)
    requests: int = Field(ge=0)
    read_lag_ns: LagQuantiles        # arrival_ns - arrival_kernel_ns: the loop's read lag
    timer_late_ns: LagQuantiles      # end_ns - due_ns of sleep service: timer lateness
    busy_ns: int = Field(ge=0)       # time the loop spent handling events (not in epoll_wait)
    wakeups: int = Field(ge=0)       # epoll_wait returns


class FleetSummary(Record):
    """``fleet-summary.json``: the engine's totals over every hosted device."""
    name: str
    devices: int = Field(ge=0)
    loops: int = Field(ge=1)
    workers: int = Field(ge=0)
    requests: int = Field(ge=0)
    responses: int = Field(ge=0)
    overload_503: int = Field(ge=0)
    not_found: int = Field(ge=0)
    malformed: int = Field(ge=0)
    log_entries: int = Field(ge=0)   # rows over every fleet-log-<loop>.csv
    log_dropped: int = Field(ge=0)   # entries lost: a loop's log was full (--log-capacity)
    loop: list[FleetLoop]
    rss_bytes: int = Field(ge=0)


class FleetDeviceRow(Record):
    """One row of ``fleet-devices.csv``: a hosted device's counters."""
    device: int = Field(ge=0)        # the global index the logs carry
    name: str
    requests: int
    responses: int
    overload_503: int
    not_found: int
    malformed: int
    piggybacked: int
    log_dropped: int


class FleetLogRow(Record):
    """One row of ``fleet-log-<loop>.csv``: wot-device's device-log.csv columns (absolute
    CLOCK_MONOTONIC ns, token hex) with the device index first and ``due_ns`` last."""
    device: int = Field(ge=0)
    arrival_ns: int                          # the loop read the request
    start_ns: Optional[int] = None           # service began (empty: not served, e.g. 5.03)
    end_ns: Optional[int] = None             # service ended
    path: Optional[str] = None
    method: Optional[str] = None
    code: Optional[str] = None
    token: Optional[str] = None
    arrival_kernel_ns: Optional[int] = None  # the kernel's receive stamp (SO_TIMESTAMPNS)
    response_sent_ns: Optional[int] = None   # the response handed to the kernel
    due_ns: Optional[int] = None             # start_ns + S: when the service was due to end


def _kind(annotation: Any) -> str:
    """The csvcheck column kind of a row-model field."""
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and \
        type(None) in typing.get_args(annotation)
    base = next(a for a in typing.get_args(annotation) if a is not type(None)) if optional \
        else annotation
    kind = {int: "int", str: "str"}[base]
    return kind + "?" if optional else kind


def csv_spec(row: type[BaseModel]) -> dict[str, str]:
    """Column -> csvcheck kind, in the model's (the file's) order."""
    return {name: _kind(f.annotation) for name, f in row.model_fields.items()}


def header_problem(header: list[str], row: type[BaseModel]) -> Optional[str]:
    """What is wrong with a CSV header against its row model (None: exactly its columns)."""
    want = list(row.model_fields)
    missing = [c for c in want if c not in header]
    unknown = [c for c in header if c not in want]
    if not missing and not unknown:
        return None
    parts = ([f"lacks {', '.join(missing)}"] if missing else []) + \
            ([f"has unknown column(s) {', '.join(unknown)}"] if unknown else [])
    return f"header {' and '.join(parts)}, expected {','.join(want)}"


FLEET_LOG_COLUMNS = csv_spec(FleetLogRow)
FLEET_DEVICE_COLUMNS = csv_spec(FleetDeviceRow)
