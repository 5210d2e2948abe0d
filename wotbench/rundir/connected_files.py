"""What a connected run's C programs write as JSON (docs/CONTRACTS.md §3c, §3d): a wot-fleet-conn
engine's ``conn-summary.json`` (``wot-device/src/fleet/conn_output.c``, ``cn_write_outputs``)
and wot-rpcapp's ``rpc-summary.json`` (``rpc-app/src/app.c``, ``write_outputs``). Unknown keys
are an error, and so is a missing one, except where noted: the merged ``apps/rpc-summary.json``
of a run across hosts (``wotbench.distributed.connected_merge``: the counts summed, no
percentiles) lacks the settings of one process, and a wot-rpcapp from before issue 30's fix
wrote ``rpc_per_s`` instead of the three rates. The analysis reads them through these models
(``wotbench.connected.analysis``, ``totals``, ``wotbench.distributed.connected_merge``)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record


class ConnCauses(Record):
    """Connections by who ended them (``connect_failures``, ``disconnects``)."""
    server_closed: int
    reset: int
    testbed: int
    protocol: int


class ConnTimerLate(Record):
    """A loop's timer lateness, ns, nearest rank; null without a timer."""
    p50: Optional[int]
    p99: Optional[int]
    max: Optional[int]


class ConnStamps(Record):
    """Which receive stamp the engine's messages got (the kernel's, or the read's time)."""
    kernel: int
    user: int
    sockets_refused: int               # sockets that refused SO_TIMESTAMPNS
    pin_on: int                        # 1: the kernel was seen stamping, held on


class ConnLoop(Record):
    """One event loop of the engine."""
    loop: int
    devices: int
    log_entries: int
    log_dropped: int
    pool_full: int                     # RPCs unanswered: the loop's reply pool was empty
    heap_full: int                     # timers lost
    wakeups: int
    busy_ns: int
    cpu_ns: int
    timer_late_ns: ConnTimerLate


class ConnUpstream(Record):
    """The engine's upstream events (every loop): each event whose due time came, by outcome
    (exactly one each), the rows of events-log-*.csv and those beyond the rows reserved, and
    the send lag (sent − due) of every sent one in buckets of 4 per octave."""
    scheduled: int
    sent: int                          # written whole (sent_ns when its write returned)
    queued: int                        # the socket took part or none: the rest in its backlog
    unsent_down: int                   # due while the device was not attached
    backlog_full: int                  # its backlog was full: not sent, the session ended
    send_error: int                    # the write failed
    rows: int
    rows_reserved: int
    unlogged: int                      # events beyond the rows: counted here only
    bytes: int                         # of the events sent or queued
    lag_max_ns: int
    lag_hist: list[tuple[int, int]]    # [lower bound ns, sent events], buckets that have any


class ConnSummary(Record):
    """An engine's ``conn-summary.json``: its totals over its devices and loops."""
    name: str
    devices: int
    loops: int
    attached_at_exit: int
    attached_once: int
    attaches: int
    msgs_in: int
    rpcs_in: int
    no_id: int
    replies: int
    replies_lost: int
    events: int
    heartbeats: int
    pongs: int
    posts_rejected: int
    bytes_in: int
    bytes_out: int
    connect_failures: ConnCauses
    disconnects: ConnCauses
    loop: list[ConnLoop]
    rss_bytes: int
    stamps: Optional[ConnStamps] = None   # absent: an engine without kernel stamps on TCP
    upstream: Optional[ConnUpstream] = None   # absent: an engine without per-event rows


class RpcPercentiles(Record):
    """ns over the RPCs scheduled after the warm-up (nearest rank)."""
    model_config = {"populate_by_name": True}
    p50: int
    p90: int
    p99: int
    p99_9: int = Field(alias="p99.9")
    max: int


class RpcSummary(Record):
    """wot-rpcapp's ``rpc-summary.json`` (or the cells' summed, merged one)."""
    apps: int
    rpcs: int                          # every RPC scheduled, warm-up included
    measured: int                      # of them, scheduled after the warm-up
    ok: int
    timeout: int
    rejected: int
    lost: int
    late_replies: int
    post_202: int
    bytes_out: int
    bytes_in: int
    latency_ns: Optional[RpcPercentiles]     # null: no ok RPC, or the merged file
    send_lag_ns: Optional[RpcPercentiles]    # null: none sent, or the merged file
    rows_full: bool                    # the log's rows ran out (the testbed's)
    duration_s: float
    # absent from an older wot-rpcapp's file
    measured_sent: Optional[int] = None
    measured_ok: Optional[int] = None
    offered_per_s: Optional[float] = None
    sent_per_s: Optional[float] = None
    answered_per_s: Optional[float] = None
    overflow: Optional[int] = None
    unsent_down: Optional[int] = None
    unsent_write: Optional[int] = None
    sent: Optional[int] = None
    post_2xx: Optional[int] = None
    unmatched: Optional[int] = None
    others: Optional[int] = None
    events_in: Optional[int] = None
    app_disconnects: Optional[int] = None
    sub_disconnects: Optional[int] = None
    rpc_per_s: Optional[float] = None  # before issue 30's fix: the offered rate
    # one process's settings: absent from the merged file (and from an older one)
    shards: Optional[int] = None
    devices: Optional[int] = None
    measured_s: Optional[float] = None
    first_app: Optional[int] = None
    loop: Optional[Literal["open", "closed"]] = None
    rate: Optional[float] = None
    arrival: Optional[Literal["poisson", "constant"]] = None
    window: Optional[int] = None
    first_shard: Optional[int] = None
    end_ns: Optional[int] = None
    # which stamp the replies got; absent: a wot-rpcapp without kernel stamps on TCP
    replies_kernel_stamped: Optional[int] = None
    replies_user_stamped: Optional[int] = None
    subs_without_kernel_stamps: Optional[int] = None
    stamp_pin_on: Optional[int] = None
    reply_read_lag_ns: Optional[RpcPercentiles] = None
