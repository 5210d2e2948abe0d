"""What the notification sink writes as JSON (docs/CONTRACTS.md §2 notify-sink): ``sink.json``
in ``RUN/sink/``, the fields ``gateway-emulator/src/sink_main.c`` (``write_outputs``) prints.
Unknown keys are an error, and so is a missing one; ``polls`` is there for a long-poll
subscriber only. The analysis reads it once, through :class:`SinkSummary`
(``wotbench.analysis.notify_sink``)."""
from __future__ import annotations

from typing import Literal, Optional

from wotbench.rundir._model import Record


class SinkSubscriber(Record):
    """One subscription the sink held: what it listened to and what arrived on it."""
    name: str
    kind: Literal["webhook", "stream", "observe", "websocket", "longpoll"]
    target: str                        # the subscription as given (URL, port, ...)
    ready: bool                        # it held before the updates began
    status: int                        # the subscription's answer (HTTP status; 0: none)
    connections: int
    bytes: int
    messages: int                      # a long-poll's: whole answers
    ids: int                           # ids found after the marker
    errors: int
    polls: Optional[int] = None        # long-poll only: the GETs sent


class SinkSummary(Record):
    """``sink.json``: the sink's run on CLOCK_MONOTONIC and its subscribers."""
    marker: str
    start_mono_ns: int
    end_mono_ns: int
    notifications: int                 # rows of notifications.csv
    over_capacity: int                 # notifications not recorded: the table was full
    capacity: int
    subscribers: list[SinkSubscriber]
