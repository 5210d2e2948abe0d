"""What the gateway emulator writes as JSON (docs/CONTRACTS.md §2): ``summary.json`` (with its
``dtls`` member), ``observe.json`` and ``warmup.json`` of ``ge/<id>/`` and ``cd-ge/``.

The fields are those ``gateway-emulator/src/output.c`` (summary.json), ``dtls.c``
(``dtls_summary``), ``observe.c`` (``observe_write``) and ``warmup.c`` (``warmup_write``)
print. Unknown keys are an error, and so is a missing one, except the few a GE really leaves
out: the keys added after the first GE (``warmup``, ``token_salt``, ``rx_stamps``,
``clock_map_bracket_ns``, ``memory_locked``, ``clients``: an older GE, or the e2e stand-in,
does not write them), ``dtls``, which only a GE with DTLS writes, and ``closed_loop``, which
only a closed-loop GE (``--clients``) writes. The analysis reads these files through
the models once, when it loads the run (``wotbench.analysis.loading``).
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from wotbench.rundir._model import Record
from wotbench.rundir.quantiles import quantiles

# how late each send left, µs (the GE's own nearest-rank figures; 0 without a send)
SendLagUs = quantiles("SendLagUs", ("p50", "p90", "p99", "p999"), count=None, mean=False,
                      required=True)


class GeOutcomes(Record):
    """Requests by outcome; they add up to ``requests``."""
    ok: int
    error: int
    timeout: int
    reset: int
    unsent: int


class GeWarmup(Record):
    """The readiness pings before the start (``--warmup-ms``): summary.json ``warmup``."""
    endpoints: int
    answered: int
    took_ms: float
    rounds: int


class GeWarmupFile(GeWarmup):
    """``warmup.json``, written before the start: the summary's ``warmup`` plus the endpoints
    (``ip:port``) that never answered."""
    unanswered: list[str]


class GeDtls(Record):
    """summary.json ``dtls`` (a GE with ``--dtls-psk-*`` only); handshake times of the ok
    handshakes, nearest rank, µs (0 without one)."""
    mode: Literal["reuse", "per-request"]
    sessions: int                      # handshakes attempted
    handshakes_ok: int
    handshakes_failed: int             # every one not ok, timeouts included
    handshakes_timeout: int
    handshake_p50_us: float
    handshake_p99_us: float
    handshake_max_us: float
    cipher: str
    slots: int                         # per-request session slots (0 with reuse)
    slots_exhausted: int
    closed_by_server: int
    openssl_allocs_in_loop: int
    openssl_allocs_per_request: float
    failure: Optional[str]             # why the first handshake/session failed; null: none did


class GeClosedLoop(Record):
    """summary.json ``closed_loop`` (``--clients N`` only, ``gateway-emulator/src/clients.c``):
    N virtual clients, each its own source endpoint with one request in flight, issuing the
    next request a think time after the previous outcome, over the trace's lines (targets)."""
    clients: int
    select: Literal["round-robin", "one", "random"]
    targets: int                       # the trace's lines: the request templates
    think: Literal["0", "const", "exp", "uniform"]
    think_a_us: float                  # const/exp: the mean; uniform: the low end
    think_b_us: float                  # uniform: the high end (else 0)
    duration_ms: float                 # clients issue until start + this
    warmup_ms: float                   # requests sent before it are phase warmup
    cooldown_ms: float                 # requests sent in the last cooldown_ms are phase cooldown
    stopped_ms: float                  # when the clients stopped issuing (relative to the start)
    capacity: int                      # request records preallocated (--max-requests)
    capacity_reached: bool             # the table filled: the clients stopped early
    # request budgets (issue 35; an older GE does not write them)
    requests_per_client: int = 0       # --requests-per-client M: a client stops after M; 0 none
    ramp_ms: float = 0.0               # --ramp-ms: client k's first request at k/N of it
    clients_done: int = 0              # clients that used their whole budget


class GeHttpClasses(Record):
    model_config = {"populate_by_name": True}
    c1xx: int = Field(alias="1xx")
    c2xx: int = Field(alias="2xx")
    c3xx: int = Field(alias="3xx")
    c4xx: int = Field(alias="4xx")
    c5xx: int = Field(alias="5xx")


class GeHttp(Record):
    """summary.json ``http`` (http:// traces only, ``gateway-emulator/src/http_*.c``): the
    per-target connection pools and what happened to them."""
    connections_per_target: int
    connection: Literal["keep-alive", "per-request"]
    connections: int                   # connection slots in all (targets x per target)
    connects: int                      # TCP connects started (pool opening included)
    connect_failures: int
    refused: int                       # of those, refused (a request's outcome: reset)
    resets: int                        # connections reset or closed under a request
    closed_by_server: int              # "Connection: close", close-delimited bodies, idle closes
    protocol_errors: int               # malformed responses (outcome error, no code)
    queued: int                        # requests that waited for a free connection (http.csv)
    new_connection_requests: int       # requests that opened their own connection
    bytes_received: int
    status_classes: GeHttpClasses
    headers: int                       # --http-header templates
    body_template: bool


class GeSummary(Record):
    """A GE's ``summary.json``. Request times in requests.csv are relative to
    ``start_mono_ns``."""
    label: str
    trace: str
    requests: int
    outcomes: GeOutcomes
    start_mono_ns: int
    end_mono_ns: int
    duration_s: float
    offered_rate: float
    achieved_rate: float
    send_lag_us: SendLagUs
    warmup: Optional[GeWarmup] = None  # null without --warmup-ms; absent from older GEs
    dtls: Optional[GeDtls] = None      # absent without DTLS
    http: Optional[GeHttp] = None      # absent unless the trace is http://
    token_salt: Optional[str] = Field(None, pattern=r"^[0-9a-f]{16}$")  # absent: older GE
    rx_stamps: Optional[Literal["kernel", "user"]] = None               # absent: older GE
    clock_map_bracket_ns: Optional[int] = None                          # absent: older GE
    memory_locked: Optional[bool] = None                                # absent: older GE
    # distinct client source endpoints (closed loop, or a trace's client column); null: the
    # per-device port pool; absent: older GE
    clients: Optional[int] = None
    closed_loop: Optional[GeClosedLoop] = None   # absent/null: open loop
    wait: Literal["busy", "hybrid"]
    type: Literal["con", "non"]
    timeout_ms: int
    retransmit: bool
    ports_per_device: int
    interrupted: bool
    salvaged: bool = False    # written by the harness from the journal of a GE that died

    @property
    def salt(self) -> Optional[int]:
        """``token_salt`` as an integer (None: an older GE, whose tokens name no request)."""
        return int(self.token_salt, 16) if self.token_salt is not None else None


class GeObserve(Record):
    """``observe.json`` (a trace with OBSERVE lines only)."""
    observations: int
    established: int
    notifications: int                 # received after the registration responses
    recorded: int                      # of those, in notifications.csv
    dropped: int                       # not recorded: --max-notifications full
    capacity: int
    gaps: int                          # sequence numbers skipped (RFC 7641 §3.4 ordering)
    reordered: int
    duplicates: int
    after_cancel: int
    acks_sent: int
    rsts_sent: int
