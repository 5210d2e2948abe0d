"""Connected devices (issue 30, docs/CONNECTED.md): device groups that hold a long-lived
connection to an edge server (``devices[].protocol: websocket | chunked | chunked-post`` with a
``devices[].connection`` block, run in wot-fleet engines: CONTRACTS §3c), the applications that
send RPCs to them through that server (``applications``, wot-rpcapp: §3d), and the server
itself (``edge_server``: a third-party program started like ``devices[].server``, its config
rendered from a template and checked before anything starts).

Schema and cross-block rules only; the devices' connections file is rendered by
:func:`connection_rows`."""
from __future__ import annotations

from typing import Any, Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wotbench.config.byo import Program
from wotbench.config.connected_wire import (DEFAULT_FRAME, DEFAULT_ID_HEADER, DEFAULT_RPC_PATH,
                                            IdPlace, check_ack_text, check_attach_body,
                                            check_attach_headers, check_header_name,
                                            check_reply_headers, check_reply_subscribe,
                                            check_rpc_frame, file_field, header_block,
                                            render)

CONNECTED_PROTOCOLS = ("websocket", "chunked", "chunked-post")
PATH_FIELDS = ("device", "shard")
REPLY_PATH_FIELDS = ("device", "shard", "id")   # {id}: filled by the engine per reply
EDGE_PORT = 8080
CHUNKED_REPLY_PATH = "/up/{device}/{shard}"
MAX_REPLY_BYTES = 65536
CONNECTIONS_HEADER = ("index,name,protocol,server,source,path,reply_path,heartbeat_ms,event_ms,"
                      "service_us,reply_bytes,reconnect_ms,attach_headers,attach_body")
MAX_DELIMITER_BYTES = 8   # wot-device/common/msg_frame.h MF_DELIM_MAX


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _path_template(v: Optional[str], fields: tuple[str, ...]) -> Optional[str]:
    if v is None:
        return v
    if not v.startswith("/") or any(c.isspace() or c == "," for c in v):
        raise ValueError(f"expected a request target starting with '/', no spaces or commas, "
                         f"got {v!r}")
    try:
        v.format(**{f: 0 for f in fields})
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"{v!r}: unknown placeholder {e} (known: "
                         + ", ".join("{" + f + "}" for f in fields) + ")") from None
    return v


class Connection(_Model):
    """``devices[].connection``: what each device of a websocket/chunked group does on its
    connection (wot-fleet's connections file, CONTRACTS §3c)."""
    path: str = Field("/dev/{device}/{shard}", description="the attach request target; "
                      "`{device}` = the device's id, `{shard}` = id mod `applications.reply_shards` "
                      "(the reply channel the server relays its messages to)")
    reply_path: Optional[str] = Field(
        None, description="chunked groups: where the device POSTs its replies, heartbeats and "
        "events on its second (keep-alive) connection; default `/up/{device}/{shard}`. Not for "
        "websocket (they travel on the WebSocket). `{id}` (only with `applications.reply_id: "
        "path`): the RPC's id in a reply's target (`none` for heartbeats and events)")
    reply_method: Literal["POST", "PUT"] = Field(
        "POST", description="chunked groups: the method of the upstream requests (PUT for a "
        "server that publishes a PUT's body, e.g. webdis `PUT /PUBLISH/reply.{shard}`); "
        "chunked-post groups: the method of the held-open attach request")
    attach_headers: dict[str, str] = Field(
        default_factory=dict, description="extra header lines of the attach request (the "
        "WebSocket Upgrade, the chunked subscription GET or the held-open POST), name: value; "
        "`{device}` and "
        "`{shard}` are filled per device (e.g. `{Origin: 'http://edge', X-Device: '{device}'}`)")
    attach_body: Optional[str] = Field(
        None, description="the device's first message once attached, `{device}` and `{shard}` "
        "filled per device (websocket: a text frame, e.g. webdis's "
        "`[\"SUBSCRIBE\",\"rpc.{device}\"]`; chunked: the first POST to reply_path; "
        "chunked-post: the first chunk of the held-open POST's body)")
    heartbeat_s: float = Field(60.0, ge=0, le=86400, description="heartbeat interval, s "
                               "(websocket: a ping frame; chunked: a POST; chunked-post: a "
                               "chunk); 0 = none")
    event_mean_s: float = Field(0.0, ge=0, le=86400, description="upstream events: mean of the "
                                "exponential gap, s (an open-loop schedule per device); 0 = none")
    service_time_ms: float = Field(1.0, ge=0, le=60000, description="the device's service time "
                                   "before it replies to a message that carries an id")
    reply_bytes: dict[int, float] = Field(
        default_factory=lambda: {32: 1.0, 256: 1.0, 1024: 1.0},
        description="reply sizes (bytes, 16..65536) and their weights; each device gets one size, "
        "the devices of the group split by the weights (the study: 32, 256 and 1 024)")
    reconnect_ms: int = Field(1000, ge=0, le=86400000, description="after a disconnect, connect "
                              "again after this plus uniform jitter up to as much again; 0 = never")
    delimiter: Optional[str] = Field(
        None, description="chunked and chunked-post groups: the bytes (1..8, e.g. `\"\\n\"`) "
        "that end every message in both directions, wherever the HTTP chunks are cut (an "
        "intermediary such as nginx may merge or split chunks); the engine appends it to every "
        "chunk it sends. None (default): one chunk is one message, for servers that send one "
        "message per chunk (nchan). Not for websocket (a frame is a message)")

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return _path_template(v, PATH_FIELDS) or v

    @field_validator("reply_path")
    @classmethod
    def _reply_path(cls, v: Optional[str]) -> Optional[str]:
        return _path_template(v, REPLY_PATH_FIELDS)

    @field_validator("attach_headers")
    @classmethod
    def _attach_headers(cls, v: dict[str, str]) -> dict[str, str]:
        return check_attach_headers(v, PATH_FIELDS)

    @field_validator("attach_body")
    @classmethod
    def _attach_body(cls, v: Optional[str]) -> Optional[str]:
        return None if v is None else check_attach_body(v, PATH_FIELDS)

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not (0 < len(v.encode()) <= MAX_DELIMITER_BYTES and "\0" not in v):
            raise ValueError(f"expected 1..{MAX_DELIMITER_BYTES} bytes without NUL "
                             f"(e.g. \"\\n\"), got {v!r}")
        return v

    @field_validator("reply_bytes", mode="before")
    @classmethod
    def _sizes(cls, v: Any) -> Any:
        if not isinstance(v, dict) or not v:
            raise ValueError(f"expected sizes and weights such as {{32: 1, 256: 1}}, got {v!r}")
        # a mapping written back as JSON/YAML by a tool may carry the sizes as digit strings
        v = {int(k) if isinstance(k, str) and k.isdigit() else k: w for k, w in v.items()}
        for k, w in v.items():
            if isinstance(k, bool) or not isinstance(k, int) or not 16 <= k <= MAX_REPLY_BYTES:
                raise ValueError(f"size {k!r}: expected an integer 16..{MAX_REPLY_BYTES}")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise ValueError(f"weight of {k} must be a number >= 0, got {w!r}")
        if sum(v.values()) <= 0:
            raise ValueError("the weights must not all be 0")
        return v


class Applications(_Model):
    """``applications``: wot-rpcapp (CONTRACTS §3d) — applications that send RPCs to uniformly
    chosen connected devices through the edge server and match each reply by id: a closed loop
    (``think_ms`` after each outcome) or an open loop (``loop: open``: ``rate`` RPC/s over all
    applications on a ``arrival`` schedule, at most ``max_outstanding`` per application)."""
    count: int = Field(2000, ge=1, le=60000, description="applications (one connection each: "
                       "an HTTP keep-alive connection, or its own WebSocket with `transport: "
                       "websocket`)")
    think_ms: tuple[int, int] = Field((1000, 3000), description="closed loop: think time "
                                      "between a reply (or timeout) and the next RPC: uniform "
                                      "[min, max] ms")
    loop: Literal["closed", "open"] = Field(
        "closed", description="`closed`: each application waits for its RPC's outcome and "
        "thinks; `open`: RPCs are sent on a schedule (`rate`, `arrival`) whatever the replies, "
        "each stamped with its scheduled time and its send")
    rate: Optional[float] = Field(None, gt=0, le=1_000_000, description="open loop: RPCs per "
                                  "second over all applications (each application gets a "
                                  "uniformly chosen share of the schedule)")
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="open loop: the inter-arrival distribution of the schedule "
        "(exponential, or a constant 1/rate)")
    max_outstanding: int = Field(4, ge=1, le=64, description="open loop: RPCs one application "
                                 "may have outstanding (unanswered, or whose request the server "
                                 "has not answered yet); one due beyond is not sent and ends as "
                                 "`overflow`")
    timeout_ms: int = Field(5000, ge=1, le=600000, description="no reply by then = timeout")
    rpc_path: str = Field(DEFAULT_RPC_PATH, description="the POST target of an RPC to a device; "
                          "`{id}` the RPC's id (with `rpc_id: path`); transport http only")
    reply_path: str = Field("/replies/{shard}", description="the WebSocket subscription for "
                            "reply channel `{shard}` (without `{shard}` every subscription asks "
                            "for the same target and says which channel by `reply_subscribe`)")
    reply_shards: int = Field(16, ge=1, le=4096, description="reply channels (the application "
                              "process subscribes to all; device d replies on d mod shards)")
    body_template: Optional[str] = Field(
        None, description="the RPC body; `{id}` is replaced by the RPC's id (`<app>-<seq>`); "
        "default `{\"id\":\"{id}\",\"method\":\"ping\"}` with `rpc_id: body`, "
        "`{\"method\":\"ping\"}` otherwise; none with `rpc_method: GET`")
    rpc_id: IdPlace = Field("body", description="where an RPC carries its id: `body` "
                            "(body_template's `{id}`), `path` (rpc_path's `{id}`, e.g. webdis "
                            "`/PUBLISH/rpc.{device}/rpc:{id}`) or `header` (`id_header`). The "
                            "device finds it after `id_marker` in the message the server relays")
    reply_id: IdPlace = Field("body", description="where a device's reply carries the id back: "
                              "`body` (`{\"id\":\"<id>\",...}`), or for chunked devices a "
                              "header (`id_header`) or the reply POST's target (reply_path's "
                              "`{id}`); the application finds it after `reply_id_marker` in the "
                              "message the server relays")
    id_header: str = Field(DEFAULT_ID_HEADER, description="the header that carries the id "
                           "(rpc_id or reply_id `header`)")
    id_marker: str = Field('"id":"', min_length=1, max_length=31, description="the id follows "
                           "this text in the message a device receives (an id is the run of "
                           "letters, digits and `-_.` after it)")
    reply_id_marker: Optional[str] = Field(
        None, min_length=1, max_length=31, description="the id follows this text in the message "
        "an application receives; default id_marker (a server that escapes what it relays "
        "needs its own, e.g. `id\\\":\\\"` for webdis's JSON)")
    warmup_s: int = Field(5, ge=0, description="RPCs scheduled before this are not measured")
    rpc_method: Literal["POST", "PUT", "GET"] = Field(
        "POST", description="the method of an RPC request; GET sends no body (everything in "
        "rpc_path, e.g. webdis `/PUBLISH/rpc.{device}/rpc:{id}`)")
    reply_headers: dict[str, str] = Field(
        default_factory=dict, description="extra header lines of the reply subscriptions' "
        "WebSocket Upgrade (webdis wants an `Origin`)")
    reply_subscribe: Optional[str] = Field(
        None, description="a message each reply subscription sends once open, `{shard}` "
        "filled (a server that subscribes by message: webdis "
        "`[\"SUBSCRIBE\",\"reply.{shard}\"]` on `reply_path: /.json`)")
    transport: Literal["http", "websocket"] = Field(
        "http", description="how an application sends its RPCs: `http` (a request each on its "
        "keep-alive connection: rpc_method, rpc_path, body_template) or `websocket` (its own "
        "WebSocket to `rpc_ws_path`, each RPC one text frame `rpc_frame`; the server's frames on "
        "it are in-order acks: docs/CONNECTED.md \"Applications on their own WebSockets\"). "
        "Replies come on the reply subscriptions either way")
    rpc_ws_path: Optional[str] = Field(
        None, description="transport websocket: each application's WebSocket target (required; "
        "webdis `/.json`)")
    rpc_ws_headers: dict[str, str] = Field(
        default_factory=dict, description="transport websocket: extra header lines of each "
        "application's Upgrade (webdis wants an `Origin`)")
    rpc_frame: Optional[str] = Field(
        None, description="transport websocket: the text frame of one RPC, `{device}` and `{id}` "
        "filled (plain substitution; other braces are text); it must hold id_marker followed by "
        "`{id}`. Default `" + DEFAULT_FRAME + "`; webdis "
        "`[\"PUBLISH\",\"rpc.{device}\",\"rpc:{id}\"]`")
    rpc_acks: bool = Field(
        True, description="transport websocket: the server answers each RPC frame with one frame "
        "on the application's WebSocket, in order (webdis `{\"PUBLISH\":1}`); an RPC whose ack "
        "has not come counts as outstanding (max_outstanding, as an HTTP request without its "
        "response). false: frames on that socket are only counted (`events_in`)")
    rpc_ack_unheard: Optional[str] = Field(
        None, description="transport websocket: an ack holding this text (in its first 256 "
        "bytes) says nobody got the "
        "RPC (webdis `{\"PUBLISH\":0}`: no subscriber on the device's channel); counted as "
        "nchan's 202 (`post_202`), the RPC then times out")
    rpc_ack_rejected: Optional[str] = Field(
        None, description="transport websocket: an ack holding this text (in its first 256 "
        "bytes) refuses the RPC: it "
        "ends `rejected` (as a non-2xx response). Checked before rpc_ack_unheard; none: no ack "
        "rejects")

    @field_validator("think_ms")
    @classmethod
    def _think(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] < 0 or v[1] < v[0]:
            raise ValueError(f"expected [min, max] with 0 <= min <= max, got {list(v)}")
        return v

    @field_validator("reply_path")
    @classmethod
    def _reply(cls, v: str) -> str:
        return _path_template(v, ("shard",)) or v

    @field_validator("rpc_path")
    @classmethod
    def _rpc(cls, v: str) -> str:
        return _path_template(v, ("device", "id")) or v

    @field_validator("reply_headers", "rpc_ws_headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        return check_reply_headers(v)

    @field_validator("reply_subscribe")
    @classmethod
    def _reply_subscribe(cls, v: Optional[str]) -> Optional[str]:
        return None if v is None else check_reply_subscribe(v)

    @field_validator("rpc_frame")
    @classmethod
    def _rpc_frame(cls, v: Optional[str]) -> Optional[str]:
        return None if v is None else check_rpc_frame(v)

    @field_validator("rpc_ack_unheard", "rpc_ack_rejected")
    @classmethod
    def _ack_text(cls, v: Optional[str]) -> Optional[str]:
        return None if v is None else check_ack_text(v)

    @field_validator("id_header")
    @classmethod
    def _id_header(cls, v: str) -> str:
        return check_header_name(v)

    @field_validator("rpc_ws_path")
    @classmethod
    def _ws_path(cls, v: Optional[str]) -> Optional[str]:
        return _path_template(v, ())

    @property
    def send_lag_scale_ms(self) -> float:
        """What a send lag is judged against (× the tolerance, at least 1 ms): a closed loop's
        shortest think time; an open loop's sends are due at their scheduled time (1 ms)."""
        return self.think_ms[0] if self.loop == "closed" else 0.0

    @model_validator(mode="after")
    def _loop(self) -> "Applications":
        if self.loop == "open" and self.rate is None:
            raise ValueError("loop: open needs rate (RPCs per second over all applications), "
                             "e.g. rate: 1000")
        if self.loop == "closed" and self.rate is not None:
            raise ValueError(f"rate ({self.rate:g}) is for loop: open; a closed loop's pace is "
                             "think_ms")
        return self

    @model_validator(mode="after")
    def _body(self) -> "Applications":
        if self.reply_id_marker is None:
            self.reply_id_marker = self.id_marker
        if self.transport == "websocket":
            return self._websocket()
        ws_keys = {"rpc_ws_path": self.rpc_ws_path is not None,
                   "rpc_frame": self.rpc_frame is not None,
                   "rpc_ack_unheard": self.rpc_ack_unheard is not None,
                   "rpc_ack_rejected": self.rpc_ack_rejected is not None,
                   "rpc_ws_headers": bool(self.rpc_ws_headers), "rpc_acks": not self.rpc_acks}
        given = [k for k, on in ws_keys.items() if on]
        if given:
            raise ValueError(f"{given[0]}: for transport: websocket (an application's own "
                             "WebSocket); transport is http")
        if self.rpc_method == "GET":
            if self.rpc_id == "body" or self.body_template is not None:
                raise ValueError("rpc_method: GET sends no body, expected rpc_id path or header "
                                 "and no body_template")
        elif self.body_template is None:
            self.body_template = ('{"id":"{id}","method":"ping"}' if self.rpc_id == "body"
                                  else '{"method":"ping"}')
        in_body, in_path = "{id}" in (self.body_template or ""), "{id}" in self.rpc_path
        if self.rpc_id == "body" and self.id_marker + "{id}" not in self.body_template:
            raise ValueError(f"body_template must hold id_marker followed by {{id}} "
                             f"({self.id_marker}{{id}}), so the device finds the id it copies "
                             f"into its reply; got {self.body_template!r}")
        if self.rpc_id == "path" and not in_path:
            raise ValueError(f"rpc_path: with rpc_id path, expected {{id}} in it, got "
                             f"{self.rpc_path!r}")
        if self.rpc_id != "body" and in_body:
            raise ValueError(f"body_template: with rpc_id {self.rpc_id} the id is not in the "
                             f"body, expected no {{id}} in it, got {self.body_template!r}")
        if self.rpc_id != "path" and in_path:
            raise ValueError(f"rpc_path: {{id}} only with rpc_id path (rpc_id is "
                             f"{self.rpc_id}), got {self.rpc_path!r}")
        return self

    def _websocket(self) -> "Applications":
        """transport: websocket: an HTTP request's keys cannot apply (checked by value, so a
        resolved config read back passes), the frame carries the device and the id."""
        if self.rpc_method != "POST":
            raise ValueError(f"rpc_method: {self.rpc_method} is an HTTP request's; with "
                             "transport: websocket each RPC is one frame (rpc_frame)")
        if self.rpc_id != "body":
            raise ValueError(f"rpc_id: {self.rpc_id} cannot apply with transport: websocket (a "
                             "frame has no path or header of its own), expected body: the id "
                             "goes in rpc_frame's {id}")
        if self.rpc_path != DEFAULT_RPC_PATH or self.body_template is not None:
            key = "rpc_path" if self.rpc_path != DEFAULT_RPC_PATH else "body_template"
            raise ValueError(f"{key}: an HTTP request's; with transport: websocket the device "
                             "and the id go in rpc_frame, expected no " + key)
        if self.rpc_ws_path is None:
            raise ValueError("rpc_ws_path: transport: websocket needs each application's "
                             "WebSocket target (e.g. /.json for webdis)")
        if self.rpc_frame is None:
            self.rpc_frame = DEFAULT_FRAME
        if self.id_marker + "{id}" not in self.rpc_frame:
            raise ValueError(f"rpc_frame must hold id_marker followed by {{id}} "
                             f"({self.id_marker}{{id}}), so the device finds the id it copies "
                             f"into its reply; got {self.rpc_frame!r}")
        if not self.rpc_acks and (self.rpc_ack_unheard or self.rpc_ack_rejected):
            key = "rpc_ack_unheard" if self.rpc_ack_unheard else "rpc_ack_rejected"
            raise ValueError(f"{key}: classifies the server's acks; rpc_acks is false (none)")
        return self


class EdgeServer(Program):
    """``edge_server``: the server under test that holds the devices' connections and relays
    the applications' RPCs (e.g. nginx + nchan, configs/attached-devices-nchan.conf)."""
    port: int = Field(EDGE_PORT, ge=1024, le=65535, description="the port it listens on "
                      "(unprivileged)")


def connected_groups(config: Any) -> list[Any]:
    return [g for g in config.devices if g.protocol in CONNECTED_PROTOCOLS]


def check(config: Any) -> list[str]:
    """Cross-block rules of connected device groups; problems as ``key: message``."""
    out: list[str] = []
    groups = connected_groups(config)
    for i, g in enumerate(config.devices):
        key = f"devices[{i}]"
        if g.protocol not in CONNECTED_PROTOCOLS:
            if g.connection is not None:
                out.append(f"{key}.connection: only for protocol websocket, chunked or "
                           "chunked-post")
            continue
        if g.connection is None:
            out.append(f"{key}.connection: protocol {g.protocol} needs a connection block "
                       "(path, heartbeat_s, reply_bytes, ...; docs/CONNECTED.md)")
        elif g.protocol != "chunked" and g.connection.reply_path is not None:
            out.append(f"{key}.connection.reply_path: a {g.protocol} device replies on its "
                       "own connection; reply_path is for chunked groups")
        if g.engine == "process":
            out.append(f"{key}.engine: connected devices run in wot-fleet engines only "
                       "(engine: fleet or auto)")
        for k in ("server", "external", "observe", "push", "network", "cpu_quota"):
            if getattr(g, k) is not None:
                out.append(f"{key}.{k}: not with protocol {g.protocol} (a connected device is "
                           "a client of edge_server)")
    es = config.edge_server
    if es is not None and es.config_template is not None:
        from pathlib import Path
        if not Path(es.config_template).is_file():
            out.append(f"edge_server.config_template: file not found: {es.config_template}")
    if es is not None and not es.command:
        out.append("edge_server.command: required (a program of this host and its arguments, "
                   "e.g. [nginx, -e, stderr, -c, '{config}', -p, '{scratch}/'])")
    if groups and config.edge_server is None:
        out.append("edge_server: connected device groups need the server they attach to "
                   "(e.g. nginx + nchan: configs/attached-devices.yaml)")
    if config.applications is not None and not groups:
        out.append("applications: needs connected device groups (protocol websocket, chunked or "
                   "chunked-post)")
    if config.edge_server is not None and not groups:
        out.append("edge_server: needs connected device groups (protocol websocket, chunked or "
                   "chunked-post)")
    out += _reply_id_rules(config, groups)
    return out


def _reply_id_rules(config: Any, groups: list[Any]) -> list[str]:
    """Where replies carry the id must suit every group: a frame has no header or path, and
    {id} in a chunked group's reply_path exactly when the id travels there."""
    out: list[str] = []
    apps = config.applications
    reply_id = apps.reply_id if apps is not None else "body"
    for i, g in enumerate(config.devices):
        if g.protocol not in CONNECTED_PROTOCOLS or g.connection is None:
            continue
        if g.protocol == "websocket" and reply_id != "body":
            out.append(f"applications.reply_id: {reply_id} needs chunked devices (a reply POST); "
                       f"devices[{i}] replies in WebSocket frames, expected body")
        if g.protocol == "chunked-post" and reply_id != "body":
            out.append(f"applications.reply_id: {reply_id} needs chunked devices (a reply POST); "
                       f"devices[{i}] replies in chunks of its held-open POST, expected body")
        if g.protocol == "websocket" and g.connection.delimiter is not None:
            out.append(f"devices[{i}].connection.delimiter: a websocket device's frame is one "
                       "message; delimiter is for chunked and chunked-post groups")
        if g.protocol == "websocket" and g.connection.reply_method != "POST":
            out.append(f"devices[{i}].connection.reply_method: a websocket device replies in "
                       "frames; reply_method is for chunked groups")
        if g.protocol == "chunked":
            rp = g.connection.reply_path or CHUNKED_REPLY_PATH
            if reply_id == "path" and "{id}" not in rp:
                out.append(f"devices[{i}].connection.reply_path: with applications.reply_id "
                           f"path, expected {{id}} in it (e.g. /up/{{device}}/{{shard}}/{{id}}), "
                           f"got {rp!r}")
            elif reply_id != "path" and "{id}" in rp:
                out.append(f"devices[{i}].connection.reply_path: {{id}} only with "
                           f"applications.reply_id path (it is {reply_id}), got {rp!r}")
    return out


def reply_size_of(sizes: dict[int, float], k: int, n: int) -> int:
    """The reply size of the k-th of n devices: contiguous blocks in proportion to the weights
    (deterministic, so a sweep's runs get the same split)."""
    total = sum(sizes.values())
    acc = 0.0
    for size, w in sorted(sizes.items()):
        acc += w / total * n
        if k < round(acc):
            return size
    return max(sizes)


def connections_header(group: Any) -> str:
    """The connections file's header for ``group``'s rows: with the delimiter column when the
    group frames its messages with one (CONTRACTS §3c)."""
    return CONNECTIONS_HEADER + (",delimiter" if group.connection.delimiter is not None else "")


def connection_rows(group: Any, first_id: int, server: str, shards: int,
                    sources: tuple[str, ...] = (), offset: int = 0,
                    count: Optional[int] = None, first_shard: int = 0) -> Iterator[str]:
    """Rows of wot-fleet's connections file (CONTRACTS §3c: attach headers and message
    rendered per device, percent-encoded) for the group's devices
    ``offset .. offset + count - 1`` (all by default); ``first_id``: the id of its device 0.
    Device d's reply shard is ``first_shard + d mod shards`` (a cell's own reply channels)."""
    c: Connection = group.connection
    header_template = header_block(c.attach_headers)
    for k in range(offset, offset + (group.count - offset if count is None else count)):
        dev = first_id + k
        fields = {"device": dev, "shard": first_shard + dev % shards}
        path = c.path.format(**fields)
        reply = ((c.reply_path or CHUNKED_REPLY_PATH).format(**fields, id="{id}")
                 if group.protocol == "chunked" else "")
        src = sources[dev % len(sources)] if sources else ""
        headers = file_field(render(header_template, fields))
        body = file_field(render(c.attach_body, fields)) if c.attach_body else ""
        delim = "" if c.delimiter is None else "," + file_field(c.delimiter)
        yield (f"{dev},{group.group}-{k},{group.protocol},{server},{src},{path},{reply},"
               f"{round(c.heartbeat_s * 1000)},{round(c.event_mean_s * 1000)},"
               f"{round(c.service_time_ms * 1000)},{reply_size_of(c.reply_bytes, k, group.count)},"
               f"{c.reconnect_ms},{headers},{body}{delim}")
