"""What wot-device writes as JSON (docs/CONTRACTS.md §3): ``devices/<name>/device-summary.json``.

The fields are those ``wot-device/src/devlog.c`` (``devlog_write``) prints, then the members
of ``impair_chan.c`` (``impair_json``), ``observe.c`` (``observe_json``), ``block.c``
(``block_json``) and ``dtls.c`` (``dtls_json``). Unknown keys are an error, and so is a missing
one, except those a device really leaves out: the keys added after the first wot-device
(``response``, ``piggybacked``, ``impair``, ``observe``, ``blockwise``, ``dtls``: an older
device, or the e2e stand-in, does not write them). A feature that is off is ``null``.
The analysis reads the file through :class:`DeviceSummary` once, when it loads the run.
"""
from __future__ import annotations

from typing import Literal, Optional

from wotbench.rundir._model import Record


class DeviceImpair(Record):
    """``impair``: the app-level impairment's datagram counts (``--impair``). run.json
    ``network.devices.<name>.counters`` (:class:`wotbench.rundir.ImpairCounters`) copies it."""
    dir: Literal["egress", "ingress", "both"]
    seed: int
    dropped_in: int
    dropped_out: int
    duplicated: int                    # in + out
    corrupted: int                     # in + out
    delayed_in: int
    delayed_out: int
    duplicated_in: int
    duplicated_out: int
    corrupted_in: int
    corrupted_out: int
    queue_full_in: int
    queue_full_out: int
    held_at_exit_in: int
    held_at_exit_out: int
    send_errors: int
    pings_exempt: int
    oversize_exempt: int


class DeviceObserve(Record):
    """``observe``: the notification processes (observable resources only)."""
    observable_resources: int
    reads: int
    reads_unobserved: int
    reads_skipped: int
    notifications: int
    notifications_con: int
    registrations: int
    cancels: int
    log_entries: int                   # notify-log.csv rows
    log_dropped: int


class DeviceBlockwise(Record):
    """``blockwise``: follow-ups answered at once, without a device-log row (RFC 7959)."""
    block2_follow_ups: int
    block1_continues: int


class DeviceDtls(Record):
    """``dtls``: the DTLS sessions (``--dtls-psk-*`` only)."""
    handshakes_ok: int
    handshakes_failed: int
    unknown_identity: int


class PushOutcomes(Record):
    ok: int
    error: int
    timeout: int
    reset: int
    unsent: int


class PushLag(Record):
    """Send lag of the test-phase requests (sent − due), µs, nearest rank."""
    sent: int
    p50: float
    p90: float
    p99: float
    p999: float
    max: float


class DevicePush(Record):
    """``push``: the device's own requests (``--push``, push.c; docs/CONTRACTS.md §3 "Push")."""
    id: int
    requests: int
    outcomes: PushOutcomes
    setup: int
    test: int
    teardown: int
    started: bool                  # the harness gave it the test start
    start_mono_ns: int             # zero of push-requests.csv (the setup's begin when not started)
    timeout_ms: int
    rx_stamps: Literal["kernel", "user"]
    late_answers_acked: int        # CON answers after their request had ended, still ACKed
    location: Optional[str]        # the Location of the setup answer, if any
    send_lag_us: PushLag


class DeviceSummary(Record):
    """A device's ``device-summary.json``, written when it stops."""
    name: str
    requests: int
    responses: int
    overload_503: int
    not_found: int
    malformed: int
    log_entries: int                   # device-log.csv rows
    log_dropped: int                   # entries lost: the log was full (--log-capacity)
    threads: int
    response: Optional[Literal["auto", "piggyback", "separate"]] = None   # absent: older device
    piggybacked: Optional[int] = None                                    # absent: older device
    impair: Optional[DeviceImpair] = None      # null without --impair; absent: older device
    observe: Optional[DeviceObserve] = None    # null without observable resources
    blockwise: Optional[DeviceBlockwise] = None   # absent: older device
    dtls: Optional[DeviceDtls] = None          # null without DTLS; absent: older device
    push: Optional[DevicePush] = None          # null without --push; absent: older device
