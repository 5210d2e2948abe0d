"""The devices file a wot-fleet engine reads (``wot-fleet --devices``, docs/CONTRACTS.md §3b),
written by the runner into ``fleets/<fleet>/devices.csv``.

One CSV row per device, header ``index,name,listen,resources,slots,queue,response,
piggyback_max_us``: ``index`` the global device index (the trace's device id; what the engine's
logs carry), ``listen`` ``IPv4:PORT`` as the engine binds it, ``resources`` the resource file
as the engine sees it (a container path on Docker), ``slots`` the device's concurrency
(``devices[].threads``), ``queue`` its bounded FIFO (full => 5.03), ``response`` and
``piggyback_max_us`` as wot-device's ``--response`` / ``--piggyback-max-us``.
:func:`read_devices` checks a file the way the engine does (every line, ``FILE:LINE: what``),
so a writer that drifts from the contract fails a unit test, not a run.

What the engine writes at exit, in the same directory (``RunDir.fleet_dir``):
``fleet-summary.json`` (:class:`FleetSummary`, strict: a missing or unknown key or a value of
the wrong type is an error), ``fleet-devices.csv`` and one ``fleet-log-<loop>.csv`` per event
loop, described by row models (:class:`FleetDeviceRow`, :class:`FleetLogRow`) whose fields, in
order, *are* the columns: the analysis reads them vectorised (``csv_spec``: the column kinds of
``wotbench.csvcheck``) and refuses a header with a missing or an unknown column
(``header_problem``) — 100 000 devices are not validated row by row through pydantic.
"""
from __future__ import annotations

import csv
import ipaddress
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import BaseModel, Field, ValidationError, field_validator

from wotbench.rundir import atomic
from wotbench.rundir._model import Record
from wotbench.rundir.device_files import PushLag, PushOutcomes

DEVICES_HEADER = ("index", "name", "listen", "resources", "slots", "queue", "response",
                  "piggyback_max_us")
DEFAULT_QUEUE = 1024              # wot-device --queue's default: the process form's bound
DEFAULT_PIGGYBACK_MAX_US = 1000   # wot-device --piggyback-max-us's default


class FleetDevice(Record):
    """One row of the devices file."""
    index: int = Field(ge=0)
    name: str = Field(min_length=1, pattern=r"^[^,\"\s]+$")
    listen: str
    resources: str = Field(min_length=1, pattern=r"^[^,\"\n]+$")
    slots: int = Field(ge=1, le=1024)
    queue: int = Field(DEFAULT_QUEUE, ge=1)
    response: Literal["auto", "piggyback", "separate"] = "auto"
    piggyback_max_us: int = Field(DEFAULT_PIGGYBACK_MAX_US, ge=0)

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"expected IPv4:PORT, got {v!r}") from None
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"expected IPv4:PORT with a port 1..65535, got {v!r}")
        return v

    def row(self) -> tuple:
        return (self.index, self.name, self.listen, self.resources, self.slots, self.queue,
                self.response, self.piggyback_max_us)


def write_devices(path: Path, devices: Iterable[FleetDevice]) -> Path:
    """Write the devices file atomically (the engine never sees half of it)."""
    with atomic.replacing(path, newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(DEVICES_HEADER)
        w.writerows(d.row() for d in devices)
    return path


class DevicesFileError(ValueError):
    pass


def read_devices(path: Path) -> list[FleetDevice]:
    """Read a devices file strictly: the header, every field, unique indices and endpoints;
    :class:`DevicesFileError` names ``FILE:LINE``."""
    out: list[FleetDevice] = []
    seen_index: dict[int, int] = {}
    seen_listen: dict[str, int] = {}
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if tuple(header or ()) != DEVICES_HEADER:
            raise DevicesFileError(f"{path}:1: header {header}, expected {','.join(DEVICES_HEADER)}")
        for line, row in enumerate(rows, start=2):
            if len(row) != len(DEVICES_HEADER):
                raise DevicesFileError(f"{path}:{line}: {len(row)} fields, expected "
                                       f"{len(DEVICES_HEADER)}")
            try:
                d = FleetDevice(**dict(zip(DEVICES_HEADER, row)))
            except ValidationError as e:
                err = e.errors()[0]
                raise DevicesFileError(f"{path}:{line}: {err['loc'][0]}: {err['msg']}") from None
            for key, seen in ((d.index, seen_index), (d.listen, seen_listen)):
                if key in seen:
                    raise DevicesFileError(f"{path}:{line}: {key} repeats line {seen[key]}")
                seen[key] = line
            out.append(d)
    return out


# --------------------------------------------------------------------------- what it writes


class LagQuantiles(Record):
    """The engine's own nearest-rank quantiles of one lag, ns (null: no sample)."""
    p50: Optional[int]
    p99: Optional[int]
    max: Optional[int]


class FleetLoop(Record):
    """One event loop: its devices, the requests it read, how late it was and what it gave up."""
    loop: int = Field(ge=0)
    devices: int = Field(ge=0)
    requests: int = Field(ge=0)
    read_lag_ns: LagQuantiles        # arrival_ns - arrival_kernel_ns: the loop's read lag
    timer_late_ns: LagQuantiles      # end_ns - due_ns of served sleep rows with S > 0
    busy_ns: int = Field(ge=0)       # time the loop spent outside epoll_wait
    wakeups: int = Field(ge=0)       # epoll_wait returns
    pool_503: int = Field(ge=0)      # 5.03 because the loop's job pool was empty: the engine's
    duplicates: int = Field(ge=0)    # retransmitted CON requests not served again
    rtx_sent: int = Field(ge=0)      # retransmissions of separate CON responses
    rtx_gave_up: int = Field(ge=0)   # ... exchanges given up after MAX_RETRANSMIT
    rst_in: int = Field(ge=0)        # separate responses the client rejected with RST
    send_errors: int = Field(ge=0)   # sendto() failures
    log_entries: int = Field(ge=0)
    log_dropped: int = Field(ge=0)
    pending_at_exit: int = Field(ge=0)   # waiting or in service at SIGTERM: no row, no response
    unacked_at_exit: int = Field(ge=0)   # separate CON responses sent whose ACK had not come
    cpu_ns: int = Field(ge=0)            # the loop thread's CPU time
    spins: int = Field(ge=0)             # non-blocking polls spinning towards a timer (--spin-us)


class FleetPush(Record):
    """``push``: the hosted devices' own requests (``wot-fleet --push``, CONTRACTS §3b "Push"),
    every row of ``fleet-push.csv`` counted; the send lag over the test rows sent."""
    devices: int = Field(ge=0)                 # devices with schedule rows
    requests: int = Field(ge=0)
    outcomes: PushOutcomes
    setup: int = Field(ge=0)
    test: int = Field(ge=0)
    teardown: int = Field(ge=0)
    started: bool                              # the harness gave the engine the test start
    start_mono_ns: int                         # zero of fleet-push.csv (setup's begin if not started)
    timeout_ms: int = Field(ge=1)
    retransmissions: int = Field(ge=0)         # RFC 7252 retransmissions of CON requests
    late_answers_acked: int = Field(ge=0)      # CON answers after their request had ended
    send_errors: int = Field(ge=0)             # sendto() failures (requests and retransmissions)
    location_too_long: int = Field(ge=0)       # @location rows that no longer fit one datagram
    send_lag_us: PushLag


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
    push: Optional[FleetPush] = None     # only with --push (devices[].push)


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
