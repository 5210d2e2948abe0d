"""summary.json ``connected`` (issue 30, docs/CONNECTED.md): a connected run's figures — the
devices' connections (attached, disconnects and connect failures by cause, per-device counts),
the applications' RPCs (outcomes, round trip, messages and bytes both ways), the testbed's part
of the round trip, and the kernel's run-queue wait of each component
(``wotbench.connected.analysis`` builds it; the report's "Connected devices" section shows it)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record
from wotbench.rundir.quantiles import quantiles

ConnStats = quantiles("ConnStats", ("p50", "p90", "p99"), "_ms", count="n", tail=True)
ShareStats = quantiles("ShareStats", ("p50", "p90", "p99"), count="n", mean=False, tail=True)
CountStats = quantiles("CountStats", ("p50", "p99"), mean=True, count=None, min=True)
CAUSES = ("server_closed", "reset", "testbed", "protocol")


class Causes(Record):
    """By cause (CONTRACTS §3c): server_closed, reset, protocol are the system's; testbed ours."""
    server_closed: int = 0
    reset: int = 0
    testbed: int = 0
    protocol: int = 0


class Traffic(Record):
    """Messages and bytes each way at one end, per second of that end's lifetime (the engines:
    attach to stop, heartbeats and events included; the applications: their run)."""
    messages_out: int
    messages_in: int
    bytes_out: int
    bytes_in: int
    messages_out_per_s: Optional[float] = None
    messages_in_per_s: Optional[float] = None
    kbytes_out_per_s: Optional[float] = None     # kB = 1000 bytes
    kbytes_in_per_s: Optional[float] = None


class RpcFigures(Record):
    apps: int
    rpcs: int                        # every RPC scheduled (warm-up included)
    measured: int                    # scheduled after the warm-up
    # per second of the measured window (warm-up end to stop), RPCs scheduled in it:
    offered_per_s: Optional[float] = None    # scheduled (the configured load)
    sent_per_s: Optional[float] = None       # written whole to the server
    answered_per_s: Optional[float] = None   # ok: the throughput (overall.throughput_rps)
    rpc_per_s: Optional[float] = None        # older runs only: the offered rate, ambiguous
    unsent_lost: int = 0             # lost and never sent (connection down when due, or the
                                     # request's write failed): "unsent", not "reset"
    outcomes: dict[str, int]         # ok, timeout, rejected, lost, overflow (one per RPC)
    post_202: int = 0                # published with no subscriber on the device's channel
    late_replies: int = 0
    unmatched: int = 0
    round_trip: ConnStats            # app send -> reply decoded, ok RPCs after the warm-up
    from_schedule: ConnStats         # think timer end / open-loop schedule -> reply (+ send lag)
    send_lag: ConnStats              # app send - its think timer end or schedule (testbed)
    engine_part: ConnStats           # engine's timer lateness + reply write (the testbed's)
    testbed_share: ShareStats        # engine_part / round_trip, per RPC
    # the device's reply write − the RPC's kernel arrival at the device (one host, loopback:
    # the server's write of the RPC to its read of the reply, at the kernel's boundaries,
    # minus the server's own read/write delays); None across hosts
    server_device_server: Optional[ConnStats] = None
    replied_not_received: int = 0    # timeouts whose device sent the reply (late or lost: server)
    not_delivered: int = 0           # timeouts whose device never got the RPC


class EventFigures(Record):
    """The devices' upstream events (docs/CONNECTED.md "Upstream events: schedule and stamps"):
    an open-loop schedule per device; every event whose due time came ends in one outcome."""
    scheduled: int                   # every event due (warm-up included)
    outcomes: dict[str, int]         # sent, queued, unsent_down, backlog_full, send_error
    rows: int                        # rows of events-log-*.csv
    unlogged: int = 0                # beyond the rows reserved: counted, not in send_lag
    measured: int                    # rows due after the warm-up
    send_lag: ConnStats              # sent − due of the sent rows due after the warm-up (testbed)
    send_lag_all_p99_ms: Optional[float] = None   # the engines' histogram (every sent event,
                                     # warm-up included; the upper bound of its bucket)
    bytes: int = 0                   # of the events sent or queued
    rule_ms: float = 1.0             # the verdict's bound on send_lag p99 (open loop)
    after_warmup: bool = True        # False: a merged run across hosts (several clocks):
                                     # send_lag over every row


class SchedWait(Record):
    """One component's threads over the test: CPU time and run-queue wait from
    /proc/<pid>/task/*/schedstat (the kernel's evidence of contention)."""
    component: str
    role: Literal["testbed", "system"]
    cpu_s: float
    runqueue_s: float
    wait_of_cpu: Optional[float] = None       # run-queue wait / CPU time
    wait_per_rpc_ms: Optional[float] = None   # run-queue wait / RPCs measured


class PerDeviceCounts(Record):
    """Across the devices (conn-devices.csv of every engine)."""
    devices: int
    rpcs_in: CountStats
    replies: CountStats
    attaches: CountStats
    with_disconnects: int            # devices that lost their connection at least once
    never_attached_at_exit: int      # devices not attached when the engines stopped
    worst: list[dict[str, int | str]] = Field(default_factory=list)   # most disconnects first


class RxStamps(Record):
    """Which receive stamp each message got on its TCP read (common/tcpstamp.h): the kernel's
    (the arrival of the segment that completed it) where it gave one, else the read's time."""
    device_kernel: int = 0           # messages at the engines (RPCs and the rest)
    device_user: int = 0
    reply_kernel: int = 0            # answered RPCs' replies at the applications
    reply_user: int = 0
    engine_read_lag: ConnStats       # read − kernel stamp, RPCs after the warm-up (testbed's)
    app_read_lag: ConnStats          # the same of their replies at the applications


class ConnectedBlock(Record):
    devices: int
    engines: int
    attached_all: bool
    attach_s: Optional[float] = None
    attached_at_exit: int
    attaches: int
    disconnects: Causes
    connect_failures: Causes
    testbed_loss: dict[str, int]             # what the testbed itself lost (any > 0: testbed_loss)
    host_memory_per_device_bytes: Optional[float] = None
    engine_cpu_s: float
    engine_timer_late_p99_ms: Optional[float] = None
    heartbeats: int = 0
    pongs: int = 0
    devices_side: Traffic                    # at the devices (engines): in = RPCs, out = replies
    apps_side: Optional[Traffic] = None      # at the applications: out = RPC POSTs, in = replies
    rpc: Optional[RpcFigures] = None
    events: Optional[EventFigures] = None    # None: no device has events, or older engines
    sched: list[SchedWait] = Field(default_factory=list)
    sched_missing: Optional[str] = None      # why there is no run-queue evidence
    per_device: Optional[PerDeviceCounts] = None
    load_before: list[float] = Field(default_factory=list)
    load_after: list[float] = Field(default_factory=list)
    edge_running_at_end: Optional[bool] = None
    stamps: Optional[RxStamps] = None        # None: files of a build without TCP stamps
