"""The trace of a config whose device groups may be Things: :func:`write_trace` is
:func:`wotbench.workload.generate.write_trace` given :data:`THING_GROUPS`, which draws the rows
of a ``devices[].thing`` group from its TD (:mod:`.workload`) and of the ``directory`` group
(:mod:`.directory`), and writes the Things' files beside the trace (:mod:`.files`). The generic
generator knows them only through its ``GroupSource`` seam: workload does not import things.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.config.schema import Config
from wotbench.deploy.resolve import DeviceAddress
from wotbench.things.directory import affordance_rows as directory_affordances
from wotbench.things.directory import rows as directory_rows
from wotbench.things.files import write_thing_files
from wotbench.things.workload import group_rows as thing_rows
from wotbench.workload import generate
from wotbench.workload.generate import GeneratedTrace, GroupPart, TraceSummary


class ThingGroups:
    """The :class:`~wotbench.workload.generate.GroupSource` of the Things' groups."""

    def rows(self, cfg: Config, gi: int, first: int,
             addrs: list[DeviceAddress]) -> Optional[GroupPart]:
        g = cfg.devices[gi]
        if g.thing is not None:   # a Thing from its TD: its own paths, rates and bodies
            return thing_rows(cfg, gi, first, addrs)
        if not g.directory:
            return None
        dr = directory_rows(cfg, first)   # the Things register with this directory
        return GroupPart(device_id=[dr.device_id], send_time_us=[dr.send_time_us],
                         method=[dr.method], resource=[dr.resource], payload=[dr.payload],
                         observer=[np.full(len(dr.device_id), -1, np.int64)],
                         paths={first: dr.paths}, body=[dr.body], bodies=dr.bodies,
                         directory_tds=dr.tds,
                         directory_ops=directory_affordances(cfg, first, dr.ops))

    def write_files(self, cfg: Config, out_dir: Path, tr: GeneratedTrace) -> None:
        if tr.thing_tds or tr.directory_ops:
            write_thing_files(cfg, out_dir, {**tr.thing_tds, **tr.directory_tds},
                              tr.directory_ops)


THING_GROUPS = ThingGroups()


def write_trace(cfg: Config, out_dir: str | Path, only: Optional[set[int]] = None,
                recorded: Optional[tuple[pd.DataFrame, dict[str, Path]]] = None
                ) -> TraceSummary:
    """:func:`wotbench.workload.generate.write_trace` of any config, its Things' groups too."""
    return generate.write_trace(cfg, out_dir, only, recorded, THING_GROUPS)
