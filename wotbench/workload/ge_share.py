"""Which main gateway emulator sends a device's requests (its ``ge-<k>.csv``).

On one host, GE ``device id mod gateways.count``. A cell of a run across hosts is given its
share's device ids (``only``) and runs its own part of the GEs
(:mod:`wotbench.distributed.cellges`); there a device goes to GE ``rank mod count``, its rank
among the share's ids in increasing order. The split hands out equal single-device units round
robin, so all ids of a cell are often congruent modulo the number of cells, and ``id mod count``
would then give one GE the whole share and leave the others an empty trace (docs/CLUSTER.md,
"Split"). Every consumer of the mapping reads the files written with it.
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np


def ge_index(device_ids: np.ndarray, count: int,
             only: Optional[Iterable[int]] = None) -> np.ndarray:
    """The GE (0..count-1) of each of ``device_ids``; ``only``: the cell's share (ranked), or
    None for the whole run (id mod count). ValueError for an id outside the share."""
    ids = np.asarray(device_ids, dtype=np.int64)
    if only is None:
        return ids % count
    share = np.unique(np.fromiter(only, np.int64))
    rank = np.searchsorted(share, ids)
    if len(ids) and (rank.max(initial=0) >= len(share) or
                     not np.array_equal(share[np.minimum(rank, len(share) - 1)], ids)):
        raise ValueError("a device id of the trace is not in the cell's share")
    return rank % count
