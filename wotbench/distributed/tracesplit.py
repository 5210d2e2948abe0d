"""A recorded trace (``trace:``) across cells: each cell gets the lines of its own devices.

The coordinator checks the whole trace once (``generate.check_recorded``: every line, every
resource file, bad input named as FILE:LINE before anything starts), counts each device's
requests (the split balances the trace's real load, not the config's ``rit``), and sends each
cell, with its share, the trace's lines of its devices -- the lines themselves, in file order,
global device ids kept -- and the resource files (one small file per device; every cell gets
all of them, so the config's own checks pass unchanged on the cell). The cell writes them into
its work directory and points its config's ``trace:`` at them (:func:`localise`); its runner
then imports its slice like any recorded trace. Deterministic: the same file and split give
the same slices on every host.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml

from wotbench.config.schema import Config
from wotbench.rundir.layout import RESOURCES_DIR, TRACE_CSV


def _device_id(line: str) -> int | None:
    """The device id of a data line (the first column), None for a header, comment or blank."""
    s = line.strip()
    if not s or s.startswith("#") or s.startswith("device_id"):
        return None
    return int(s.split(",", 1)[0])


def requests_per_device(cfg: Config) -> dict[int, int]:
    """Lines per device id of the (already checked) recorded trace."""
    counts: dict[int, int] = {}
    for line in Path(cfg.trace.file).read_text().splitlines():
        i = _device_id(line)
        if i is not None:
            counts[i] = counts.get(i, 0) + 1
    return counts


def slice_lines(text: str, ids: Iterable[int]) -> str:
    """The trace's header, comments and the data lines of ``ids``, in file order."""
    keep = set(ids)
    out = [line for line in text.splitlines()
           if (i := _device_id(line)) is None or i in keep]
    return "\n".join(out) + "\n"


def resource_files(cfg: Config) -> dict[str, str]:
    """Every resource file of the recorded trace: file name -> text."""
    d = cfg.trace.resources_dir
    return {f.name: f.read_text() for f in sorted(Path(d).glob("*.csv"))}


def localise(config_yaml: str, where: Path, trace_csv: str, resources: dict[str, str]) -> str:
    """Write the cell's slice and the resource files under ``where`` and return the config
    text with ``trace:`` pointing at them (absolute paths: the node's own)."""
    res = where / RESOURCES_DIR
    res.mkdir(parents=True, exist_ok=True)
    (where / TRACE_CSV).write_text(trace_csv)
    for name, text in resources.items():
        if Path(name).name != name:   # a file name, never a path out of the directory
            raise ValueError(f"resource file name {name!r} is not a plain file name")
        (res / name).write_text(text)
    raw = yaml.safe_load(config_yaml)
    raw["trace"] = {**(raw.get("trace") or {}), "file": str(where / TRACE_CSV),
                    "resources": str(res)}
    return yaml.safe_dump(raw, sort_keys=False)
