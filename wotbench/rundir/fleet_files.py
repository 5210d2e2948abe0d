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
"""
from __future__ import annotations

import csv
import ipaddress
from pathlib import Path
from typing import Iterable, Literal

from pydantic import Field, ValidationError, field_validator

from wotbench.rundir import atomic
from wotbench.rundir._model import Record

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
