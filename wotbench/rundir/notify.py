"""summary.json ``notify`` (issue 35): per subscriber of the run's notification sink, the
updates the GE sent, how many were notified, lost (never notified), duplicated, and the
update -> notification latency (``wotbench.analysis.notify_sink``); absent without ``notify:``."""
from __future__ import annotations

from typing import Optional

from wotbench.rundir._model import Record

F = Optional[float]


class NotifyLatency(Record):
    """From the update's send to the notification's arrival (kernel stamp), ms."""
    min: F = None
    p50: F = None
    p90: F = None
    p99: F = None
    p999: F = None
    max: F = None
    mean: F = None


class NotifySubscriber(Record):
    name: str
    kind: str                          # webhook | stream | websocket | observe
    updates: int                       # updates answered 2xx
    notified: int                      # of them, notified at least once
    lost: int                          # never notified
    lost_share: F = None
    duplicates: int
    unknown_ids: int                   # ids no update carried
    notifications_per_s: float        # from the first to the last arrival
    latency_ms: NotifyLatency
    kernel_share: F = None             # notifications with the kernel's receive stamp
    not_judged: int = 0                # events emitted in the test later than the sink's stop
                                       # minus notify.timeout_ms: neither notified nor lost


class NotifyBlock(Record):
    marker: str
    subscribers: list[NotifySubscriber]
    # testbed failures that leave figures unknown (e.g. an HTTP Thing's emission file missing):
    # each makes the run's verdict invalid
    failures: list[str] = []
