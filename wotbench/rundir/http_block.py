"""summary.json ``http`` (issue 22): an HTTP run's status codes, connection pool and the waits
for a free connection, from the main GEs' requests.csv, http.csv and the ``http`` member of
their summary.json (``wotbench.analysis.http_figures``); absent for a CoAP run."""
from __future__ import annotations

from typing import Literal

from wotbench.rundir._model import Record
from wotbench.rundir.quantiles import quantiles

WaitStats = quantiles("WaitStats", ("p50", "p95", "p99"), "_ms")


class HttpPool(Record):
    """The GEs' connections, summed over the main GEs (their summary.json ``http``)."""
    connections: int                   # pool slots over all targets
    connects: int                      # TCP connects started (incl. reconnects)
    connect_failures: int
    refused: int                       # ECONNREFUSED
    resets: int
    closed_by_server: int
    protocol_errors: int               # malformed responses
    new_connection_requests: int       # requests that opened their connection (R has the handshake)
    bytes_received: int


class HttpBlock(Record):
    connection: Literal["keep-alive", "per-request", "mixed"]
    connections_per_target: int        # the largest of the GEs'
    requests: int                      # the main GEs' requests
    status_codes: dict[str, int]       # HTTP status -> requests ("200", "404", ...)
    without_status: dict[str, int]     # outcome -> requests that got no status (reset, timeout, ...)
    queued: int                        # requests that waited for a free connection
    queued_share: float                # of the requests
    # sent − queued of the requests that waited (the wait is charged to their R from the schedule)
    wait_ms: WaitStats
    pool: HttpPool
