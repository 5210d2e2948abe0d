"""HTTP systems under test (issue 22): ``devices[].protocol: http`` and the gateway emulators'
HTTP client block ``gateways.http``. Schema and checks only; the GE's options come from
:func:`ge_args`, the runner writes the body template (:func:`body_template_text`).

A device group speaks CoAP (``coap``, the default) or HTTP/1.1 (``http``). HTTP devices are
third-party servers (``devices[].server``, e.g. Debian's nginx) or ``external`` endpoints:
wot-device speaks CoAP only. A gateway emulator picks its transport once per trace from the
URI scheme (gateway-emulator README, "The transport seam"), so a run's groups all speak one
protocol; everything CoAP-only (Observe, block-wise, DTLS, NON/CON, retransmission, a CoAP
forward proxy, client endpoints) is refused for an HTTP run with the key and the fix.

Templates follow the GE's rules (``gateway-emulator/src/http_tmpl.c``): ``{{index}}``,
``{{device}}``, ``{{method}}``, ``{{path}}``, ``{{payload}}``, and the per-request values
(issue 35, ``template_vars.c``) ``{{seq}}`` ``{{client}}`` ``{{rand}}`` ``{{time_ms}}``
``{{time_ns}}`` (fixed width, filled at the send; also in ``devices[].paths``); single braces
are text, so a JSON body needs no escaping. They are checked here, before the run, with the GE's messages
(``KEY:LINE:COL``), so a template that does not render never reaches a gateway emulator.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from wotbench.config.http_phases import HttpPhase

# ``cfg`` below is a ``wotbench.config.schema.Config`` (which imports this module's models)
Config = Any

PER_REQUEST = ("seq", "client", "rand", "time_ms", "time_ns")   # filled at the send
PLACEHOLDERS = ("index", "device", "method", "path", "payload") + PER_REQUEST
PATH_PLACEHOLDERS = ("index", "device") + PER_REQUEST             # what a path may hold
# headers the GE writes itself (http_prep.c RESERVED)
RESERVED_HEADERS = ("host", "content-length", "transfer-encoding", "connection")
MAX_HEADERS = 32                 # the GE's --http-header limit
MAX_CONNECTIONS = 60000          # the GE's --http-connections limit (per target)
HTTP_PORT = 8080                 # a server's default port: non-privileged (it runs as uid 65534)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")   # RFC 9110 field name


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class HttpClient(_Model):
    """``gateways.http``: how the gateway emulators speak HTTP/1.1 (only with ``protocol: http``
    device groups; the defaults apply when the block is left out)."""
    connections: Optional[int] = Field(
        None, ge=1, le=MAX_CONNECTIONS, description="connections per target (device): with "
        "keep-alive the pool opened before the start (null: 1); with connection_per_request the "
        "most open at once (null: 64). A request that finds none free waits, and the wait is "
        "recorded (http.csv) and charged to its response time (no coordinated omission)")
    connection_per_request: bool = Field(
        False, description="a new TCP connection per request (`Connection: close`; R includes "
        "the handshake) instead of keep-alive")
    headers: list[str] = Field(
        default_factory=list, max_length=MAX_HEADERS, description="extra request headers, "
        "`Name: value` templates (e.g. `Content-Type: application/json`); placeholders "
        "{{index}} {{device}} {{method}} {{path}} {{payload}}; Host, Content-Length, "
        "Transfer-Encoding and Connection are the GE's")
    body_template: Optional[str] = Field(
        None, description="the body of PUT/POST/PATCH requests, a template (placeholders as in "
        "headers; single braces are text, so JSON needs no escaping); null: "
        "`request_payload_bytes` × 'x'")
    body_template_file: Optional[str] = Field(
        None, description="instead of body_template: a file holding it (relative to the config "
        "file)")
    setup: Optional[HttpPhase] = Field(
        None, description="requests to every device before T0 (e.g. pre-create entities), with "
        "figures of their own (wotbench.config.http_phases); a failure stops the run")
    verify: Optional[HttpPhase] = Field(
        None, description="requests to every device after the test (check what it left), with "
        "figures of their own; failures are named in the verdict's notes")


def _where_at(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def template_problems(text: str, where: str, names: tuple[str, ...] = PLACEHOLDERS) -> list[str]:
    """The GE's template rules (http_tmpl.c): every ``{{`` closes on its line with a known
    placeholder. Problems as ``WHERE:LINE:COL: what, expected ...``."""
    out, pos = [], 0
    expected = "expected one of " + " ".join("{{" + p + "}}" for p in names)
    while (start := text.find("{{", pos)) >= 0:
        end = text.find("}}", start + 2)
        line, col = _where_at(text, start)
        if end < 0 or "\n" in text[start:end]:
            out.append(f"{where}:{line}:{col}: an unclosed '{{{{', {expected}")
            break
        name = text[start + 2:end]
        if name not in names:
            out.append(f"{where}:{line}:{col}: unknown placeholder '{name}', {expected} (a "
                       "literal '{{' cannot be written)")
        pos = end + 2
    return out


def header_problems(h: str, key: str) -> list[str]:
    name, colon, _ = h.partition(":")
    if not colon or not _TOKEN.match(name) or "\r" in h or "\n" in h:
        return [f"{key}: {h!r}, expected 'Name: value' (a token name, no line breaks), e.g. "
                "'Content-Type: application/json'"]
    if name.lower() in RESERVED_HEADERS:
        return [f"{key}: {h!r}: the gateway emulator writes {name} itself, expected another "
                "header (Content-Type or a custom one)"]
    return template_problems(h, key)


def body_template_text(h: HttpClient) -> Optional[str]:
    """The body template's text (inline or read from its file); None without one."""
    if h.body_template_file is not None:
        return Path(h.body_template_file).read_text()
    return h.body_template


def probe_path(g: Any) -> str:
    """The path the readiness GET asks a server for: the group's first path without per-request
    values (a template would be sent literally, and may create what it names), else the root."""
    return next((p for p in (g.paths or []) if "{{" not in p), "")


def http_groups(cfg: Config) -> list[int]:
    return [i for i, g in enumerate(cfg.devices) if g.protocol == "http"]


def is_http(cfg: Config) -> bool:
    """Does the run's main trace speak HTTP (every group does, :func:`problems`)?"""
    return bool(http_groups(cfg))


def problems(cfg: Config) -> list[str]:
    """Every problem of an HTTP run's config (none for a CoAP run without ``gateways.http``)."""
    hg = http_groups(cfg)
    gw = cfg.gateways
    out: list[str] = payload_problems(cfg)
    for i, g in enumerate(cfg.devices):
        for k, path in enumerate(g.paths or []):   # a CoAP group's: refused in config.byo
            if g.protocol == "http" and "{{" in path:
                out += template_problems(path, f"devices[{i}].paths[{k}]", PATH_PLACEHOLDERS)
        if g.protocol != "http" and "PATCH" in g.methods:
            out.append(f"devices[{i}].methods: PATCH is HTTP only, expected GET/PUT/POST/DELETE "
                       "for a CoAP group (or protocol: http)")
    if not hg:
        if gw.http is not None:
            out.append("gateways.http: only with a device group of protocol: http; remove it "
                       "(the devices speak CoAP)")
        return out
    first = hg[0]
    coap = [i for i, g in enumerate(cfg.devices) if g.protocol != "http"]
    if coap:
        out.append(f"devices[{coap[0]}].protocol: coap, but devices[{first}] is http: a gateway "
                   "emulator speaks one protocol per trace; give every group protocol: http, "
                   "or run the CoAP groups in another run")
    for i in hg:
        g, key = cfg.devices[i], f"devices[{i}]"
        if g.server is None and g.external is None:
            out.append(f"{key}.protocol: http needs 'server' (e.g. Debian's nginx, "
                       "configs/http-nginx.yaml) or 'external' endpoints: wot-device speaks CoAP "
                       "only")
        if g.response != "auto":
            out.append(f"{key}.response: {g.response} is wot-device's CoAP response path, "
                       "meaningless over HTTP; remove it")
    coap_only = [
        (gw.message_type != "con", "gateways.message_type",
         f"{gw.message_type}: CoAP message types mean nothing over HTTP (TCP); remove it"),
        (gw.retransmit, "gateways.retransmit",
         "true: CoAP retransmission means nothing over HTTP (TCP retransmits); remove it"),
        (gw.block_size is not None, "gateways.block_size",
         "block-wise transfer (RFC 7959) is CoAP only; HTTP bodies go whole (Content-Length)"),
        (gw.proxy is not None, "gateways.proxy",
         "a CoAP forward proxy cannot carry http:// requests; remove it"),
        (gw.clients is not None and gw.loop != "closed", "gateways.clients",
         "an open loop's client endpoints are CoAP's (UDP source ports); an open loop over HTTP "
         "uses gateways.http.connections (or loop: closed, where each client owns a connection)"),
        (gw.loop == "closed" and gw.http is not None and gw.http.connections is not None,
         "gateways.http.connections",
         "with loop: closed every client owns one connection (gateways.clients); remove it"),
        (cfg.dtls.enabled, "dtls.enabled",
         "true: DTLS is CoAP's (coaps://); https:// is not supported, expected false"),
    ]
    out += [f"{k}: {msg} (devices[{first}] has protocol: http)" for bad, k, msg in coap_only if bad]
    h = gw.http
    if h is None:
        return out
    out += phase_problems(h)
    for k, hdr in enumerate(h.headers):
        out += header_problems(hdr, f"gateways.http.headers[{k}]")
    if h.body_template is not None and h.body_template_file is not None:
        out.append("gateways.http: give body_template or body_template_file, not both")
    elif h.body_template is not None:
        out += template_problems(h.body_template, "gateways.http.body_template")
    elif h.body_template_file is not None:
        f = Path(h.body_template_file)
        try:
            text = f.read_text()
        except (OSError, UnicodeDecodeError) as e:
            out.append(f"gateways.http.body_template_file: cannot read {f} ({e}), expected a "
                       "readable text file")
        else:
            out += [f"gateways.http.body_template_file: {p}" for p in template_problems(text, str(f))]
    return out


def phase_problems(h: HttpClient) -> list[str]:
    """gateways.http.setup / verify: their templates, a body only with a method that has one."""
    out: list[str] = []
    for name in ("setup", "verify"):
        p = getattr(h, name)
        if p is None:
            continue
        key = f"gateways.http.{name}"
        out += template_problems(p.path, f"{key}.path", PATH_PLACEHOLDERS)
        if p.body_template is not None:
            out += template_problems(p.body_template, f"{key}.body_template")
            if p.method in ("GET", "DELETE"):
                out.append(f"{key}.body_template: with method {p.method}, expected POST, PUT or "
                           "PATCH (a GET or DELETE carries no body)")
        if any(c.isspace() or c in ",\"" for c in p.path):
            out.append(f"{key}.path: {p.path!r}, expected no spaces, commas or quotes")
    return out


def ge_args(cfg: Config) -> list[str]:
    """The main GEs' ``--http-*`` options but the body template's file (a CoAP run: only
    ``--seed`` for a path's {{rand}}; the runner adds ``--http-body-template`` with the file's
    path as the GE sees it)."""
    if not is_http(cfg):
        return seed_args(cfg)   # a CoAP path's {{rand}} (gateway-emulator/src/coap_tmpl.c)
    h = cfg.gateways.http or HttpClient()
    a = ["--http-connections", str(h.connections)] if h.connections else []
    if h.connection_per_request:
        a.append("--http-connection-per-request")
    for hdr in h.headers:
        a += ["--http-header", hdr]
    return a + seed_args(cfg)


COAP_PAYLOAD_MAX = 1024   # one datagram: the GE does not send a templated payload block-wise
FIXED_WIDTH = {"index": 10, "device": 10, "method": 6, "seq": 10, "client": 5, "rand": 16,
               "time_ms": 13, "time_ns": 19}


def ge_body_text(cfg: Config) -> Optional[str]:
    """The GE's --http-body-template file's text: the HTTP body template of an HTTP run, or
    the CoAP PUT/POST payload template (gateways.payload_template) of a CoAP run."""
    if not is_http(cfg):
        return cfg.gateways.payload_template
    return body_template_text(cfg.gateways.http) if cfg.gateways.http is not None else None


def payload_problems(cfg: Config) -> list[str]:
    """gateways.payload_template: a CoAP run's, its placeholders, and at most one datagram
    (an upper bound: each value at its width, {{path}} the longest path, {{payload}} the
    largest request_payload_bytes)."""
    t = cfg.gateways.payload_template
    if t is None:
        return []
    key = "gateways.payload_template"
    if is_http(cfg):
        return [f"{key}: a CoAP key, expected gateways.http.body_template for protocol: http"]
    out = template_problems(t, key)
    if out:
        return out
    if cfg.ge_block_size() is not None:
        return [f"{key}: with block-wise transfer (gateways.block_size, or a body above 1024 "
                "bytes), expected none (a templated CoAP payload fits one datagram)"]
    widths = dict(FIXED_WIDTH,
                  path=max([len(p) for g in cfg.devices for p in (g.paths or [])] + [16]),
                  payload=max(g.request_payload_bytes for g in cfg.devices))
    size = len(t.encode())
    for name, w in widths.items():
        size += t.count("{{" + name + "}}") * (w - len(name) - 4)
    if size > COAP_PAYLOAD_MAX:
        out.append(f"{key}: up to {size} bytes once rendered, expected at most "
                   f"{COAP_PAYLOAD_MAX} (one datagram: a templated CoAP payload is not sent "
                   "block-wise)")
    return out


def uses(cfg: Config, name: str) -> bool:
    """Does a path, header or the body template of the run hold ``{{name}}``?"""
    h = cfg.gateways.http or HttpClient()
    texts = [p for g in cfg.devices for p in (g.paths or [])] + list(h.headers) \
        + [cfg.gateways.payload_template or ""]
    try:
        texts.append(body_template_text(h) or "")
    except OSError:
        pass    # refused by problems()
    return any("{{" + name + "}}" in t for t in texts)


def seed_args(cfg: Config) -> list[str]:
    """GE ``--seed`` when a template holds ``{{rand}}``: its values follow the run's seed."""
    return ["--seed", str(cfg.seed)] if uses(cfg, "rand") else []
