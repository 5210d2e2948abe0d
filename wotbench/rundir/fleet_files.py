"""The devices file a wot-fleet engine reads (``wot-fleet --devices``, docs/CONTRACTS.md §3b),
written by the runner into ``fleets/<fleet>/devices.csv``.

One CSV row per device, header ``index,name,listen,resources,slots,queue,response,
piggyback_max_us``: ``index`` the global device index (the trace's device id; what the engine's
logs carry), ``listen`` ``IPv4:PORT`` as the engine binds it, ``resources`` the resource file
as the engine sees it (a container path on Docker), ``slots`` the device's concurrency
(``devices[].threads``), ``queue`` its bounded FIFO (full => 5.03), ``response`` and
``piggyback_max_us`` as wot-device's ``--response`` / ``--piggyback-max-us``; when a device of
the engine is impaired (app-level impairments in the engine) three more columns
``impair,impair_ge,impair_seed`` carry wot-device's ``--impair`` / ``--impair-ge`` /
``--impair-seed`` values (empty: not impaired; the items of a spec separated by ``;``, as a
field holds no comma).
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
import functools
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
IMPAIR_COLUMNS = ("impair", "impair_ge", "impair_seed")   # optional, after DEVICES_HEADER
DEFAULT_QUEUE = 1024              # wot-device --queue's default: the process form's bound
DEFAULT_PIGGYBACK_MAX_US = 1000   # wot-device --piggyback-max-us's default


@functools.lru_cache(maxsize=4096)
def _is_ipv4(host: str) -> bool:
    """Cached: an engine's 10^5 rows share a few addresses (in a container, all 0.0.0.0), and
    parsing each row's took most of a cell's devices-file time."""
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


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
    impair: str = Field("", pattern=r"^[^,\"\s]*$")      # --impair SPEC, ';' for ',' ("": none)
    impair_ge: str = Field("", pattern=r"^[^,\"\s]*$")   # --impair-ge GE, ';' for ','
    impair_seed: str = Field("", pattern=r"^[0-9]*$")      # --impair-seed N

    @classmethod
    def impair_fields(cls, args: list[str]) -> dict[str, str]:
        """wot-device's impairment arguments (``--impair SPEC --impair-ge GE --impair-seed N``,
        ``wotbench.netimpair``) as this row's three columns."""
        keys = {"--impair": "impair", "--impair-ge": "impair_ge", "--impair-seed": "impair_seed"}
        out = {}
        for flag, value in zip(args[::2], args[1::2]):
            if flag not in keys:
                raise ValueError(f"{flag}: not an impairment argument of wot-device")
            out[keys[flag]] = value.replace(",", ";")
        return out

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not _is_ipv4(host):
            raise ValueError(f"expected IPv4:PORT, got {v!r}")
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"expected IPv4:PORT with a port 1..65535, got {v!r}")
        return v

    def row(self, impair: bool = False) -> tuple:
        base = (self.index, self.name, self.listen, self.resources, self.slots, self.queue,
                self.response, self.piggyback_max_us)
        return base + (self.impair, self.impair_ge, self.impair_seed) if impair else base


def write_devices(path: Path, devices: Iterable[FleetDevice]) -> Path:
    """Write the devices file atomically (the engine never sees half of it); the impairment
    columns only when a device is impaired."""
    devices = list(devices)
    impair = any(d.impair for d in devices)
    with atomic.replacing(path, newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(DEVICES_HEADER + (IMPAIR_COLUMNS if impair else ()))
        w.writerows(d.row(impair) for d in devices)
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
        header = tuple(next(rows, None) or ())
        if header not in (DEVICES_HEADER, DEVICES_HEADER + IMPAIR_COLUMNS):
            raise DevicesFileError(f"{path}:1: header {list(header)}, expected "
                                   f"{','.join(DEVICES_HEADER)}[,{','.join(IMPAIR_COLUMNS)}]")
        for line, row in enumerate(rows, start=2):
            if len(row) != len(header):
                raise DevicesFileError(f"{path}:{line}: {len(row)} fields, expected "
                                       f"{len(header)}")
            try:
                d = FleetDevice(**dict(zip(header, row)))
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


class FleetObserve(Record):
    """``fleet-summary.json`` ``observe`` (fleet/observe.c): every loop's Observe counts."""
    observable_resources: int = Field(ge=0)
    observer_records: int = Field(ge=0)      # preallocated (--observers per observable device)
    reads: int = Field(ge=0)                 # sensor reads finished
    reads_unobserved: int = Field(ge=0)      # ... with nobody observing that resource
    reads_skipped: int = Field(ge=0)         # ticks whose read found the device's queue full
    notifications: int = Field(ge=0)
    notifications_con: int = Field(ge=0)
    retransmissions: int = Field(ge=0)       # of CON notifications
    registrations: int = Field(ge=0)
    cancels: int = Field(ge=0)
    replaced: int = Field(ge=0)              # an older observer of the same query and client
    refused: int = Field(ge=0)               # registrations answered without Observe: no record
    removed_rst: int = Field(ge=0)           # observers removed by an RST to a notification
    removed_timeout: int = Field(ge=0)       # ... by a CON notification given up
    coalesced: int = Field(ge=0)             # notifications not sent: 16 CON awaiting their ACK
    untracked: int = Field(ge=0)             # CON notifications sent without retransmission
    observers_at_exit: int = Field(ge=0)
    log_entries: int = Field(ge=0)           # rows of every fleet-notify-<loop>.csv
    log_dropped: int = Field(ge=0)


class FleetBlockwise(Record):
    """``fleet-summary.json`` ``blockwise`` (fleet/block.c): follow-ups answered at once."""
    block2_follow_ups: int = Field(ge=0)
    block1_continues: int = Field(ge=0)


class FleetImpair(Record):
    """``fleet-summary.json`` ``impair`` (fleet/impair.c): totals; per device fleet-impair.csv."""
    devices: int = Field(ge=0)
    dropped: int = Field(ge=0)
    delayed: int = Field(ge=0)
    queue_full: int = Field(ge=0)            # held datagrams lost: a device's or the pool's limit
    pool_full: int = Field(ge=0)             # ... of which the loop's pool (the engine's limit)
    held_at_exit: int = Field(ge=0)


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
    # an older engine wrote none of these three
    observe: Optional[FleetObserve] = None   # null: no observable resource
    blockwise: Optional[FleetBlockwise] = None
    impair: Optional[FleetImpair] = None     # null: no impaired device
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


class FleetNotifyRow(Record):
    """One row of ``fleet-notify-<loop>.csv``: wot-device's notify-log.csv columns (absolute
    CLOCK_MONOTONIC ns) with the device index first."""
    device: int = Field(ge=0)
    emit_ns: int                             # handed to sendto() (before egress impairments)
    tick_ns: Optional[int] = None            # the read's scheduled instant (notify only)
    read_start_ns: Optional[int] = None
    read_end_ns: Optional[int] = None
    path: str
    kind: str                                # register | notify | cancel
    seq: Optional[int] = None                # the Observe value sent (empty: none)
    type: str                                # con | non | ack
    token: Optional[str] = None


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
FLEET_NOTIFY_COLUMNS = csv_spec(FleetNotifyRow)
