"""What connected devices and applications put on the wire beyond the path (issue 30,
docs/CONNECTED.md): the attach request's headers and the attach message of a device group,
rendered per device, and the choice of where an RPC's id travels. Checks raise ValueError with
what is expected (pydantic names the key); :func:`file_field` is the percent-encoding of
wot-fleet's connections file (CONTRACTS §3c)."""
from __future__ import annotations

import re
from typing import Literal

# where an RPC's id travels: in the body, in a header, or in the request target
IdPlace = Literal["body", "header", "path"]
DEFAULT_ID_HEADER = "X-Rpc-Id"
DEFAULT_RPC_PATH = "/rpc/{device}"
# transport websocket: an RPC's text frame (wot-rpcapp --frame)
DEFAULT_FRAME = '{"id":"{id}","device":{device},"method":"ping"}'
FRAME_FIELDS = ("device", "id")
RPC_FRAME_MAX = 4096 - 1      # wot-rpcapp's RA_FRAME_MAX less one: a frame once filled
FILLED_WIDTH = {"id": 31, "device": 10}   # the longest "<app>-<seq>" (10+1+20) and device index
ACK_TEXT_MAX = 255

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# set by the engine for the attach request itself (Host, the Upgrade, the chunked GET)
RESERVED_HEADERS = frozenset({
    "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
    "content-length", "transfer-encoding", "te", "accept"})
ATTACH_HEADERS_MAX = 2048     # decoded bytes, as the engine takes them
ATTACH_BODY_MAX = 8192
REPLY_HEADERS_MAX = 1024      # wot-rpcapp's reply_headers buffer (lines + CRLFs + NUL)
REPLY_SUBSCRIBE_MAX = 512     # wot-rpcapp's subscribe message buffer, the shard filled in
FIELD_MAX = 64                # the longest value a placeholder is filled with (a device name)


def rendered_max(text: str) -> int:
    """The most bytes ``text`` can take once every placeholder is filled in."""
    return len(text.encode()) + FIELD_MAX * len(_PLACEHOLDER.findall(text))


def check_placeholders(text: str, known: tuple[str, ...]) -> str:
    """Every ``{name}`` of text is a known field (other braces, e.g. JSON's, are text)."""
    for m in _PLACEHOLDER.finditer(text):
        if m.group(1) not in known:
            raise ValueError(f"{text!r}: unknown placeholder {{{m.group(1)}}} (known: "
                             + ", ".join("{" + f + "}" for f in known) + ")")
    return text


def check_header_name(name: str) -> str:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name) or len(name) > 63:
        raise ValueError(f"header name {name!r}: expected an HTTP token of 1..63 characters "
                         "(letters, digits, !#$%&'*+-.^_`|~)")
    return name


def check_attach_headers(headers: dict[str, str], known: tuple[str, ...]) -> dict[str, str]:
    for name, value in headers.items():
        check_header_name(name)
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r}: set by the engine for the attach request, "
                             f"expected another name (not {', '.join(sorted(RESERVED_HEADERS))})")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"header {name!r}: expected a one-line text value, got {value!r}")
        check_placeholders(value, known)
    if rendered_max(header_block(headers)) > ATTACH_HEADERS_MAX - 64:
        raise ValueError(f"expected at most {ATTACH_HEADERS_MAX - 64} bytes of header lines, "
                         f"each placeholder counted as {FIELD_MAX} bytes (its longest value)")
    return headers


def check_reply_headers(headers: dict[str, str]) -> dict[str, str]:
    check_attach_headers(headers, ())
    if sum(len(f"{k}: {v}".encode()) + 2 for k, v in headers.items()) + 1 > REPLY_HEADERS_MAX:
        raise ValueError(f"expected at most {REPLY_HEADERS_MAX - 1} bytes of header lines "
                         "(wot-rpcapp's limit, CRLFs included)")
    return headers


def check_reply_subscribe(message: str) -> str:
    if "%" in message:
        raise ValueError(f"expected no '%' in the message, got {message!r}")
    if message.count("{shard}") > 1:
        raise ValueError(f"expected {{shard}} at most once (the shard is filled in once), got "
                         f"{message!r}")
    check_attach_body(message, ("shard",))
    if len(message.encode()) + 10 >= REPLY_SUBSCRIBE_MAX:
        raise ValueError(f"expected a message of fewer than {REPLY_SUBSCRIBE_MAX - 10} bytes "
                         "(wot-rpcapp's limit with the shard filled in)")
    return message


def check_rpc_frame(frame: str) -> str:
    """An application's RPC frame: non-empty, the device and the id in it, within wot-rpcapp's
    buffer."""
    if "\0" in frame or not frame:
        raise ValueError("expected a non-empty message without NUL characters")
    check_placeholders(frame, FRAME_FIELDS)
    why = {"device": "the server routes the RPC by it", "id": "its reply is matched by it"}
    for f in FRAME_FIELDS:
        if "{" + f + "}" not in frame:
            raise ValueError(f"expected {{{f}}} in the frame (the RPC's {f}: {why[f]}), got "
                             f"{frame!r}")
    filled = len(frame.encode()) + sum(frame.count("{" + f + "}") * (w - len(f) - 2)
                                       for f, w in FILLED_WIDTH.items())
    if filled > RPC_FRAME_MAX:
        raise ValueError(f"expected at most {RPC_FRAME_MAX} bytes once every {{id}} (up to 31 "
                         f"bytes) and {{device}} (up to 10) is filled (wot-rpcapp's limit), got "
                         f"up to {filled}")
    return frame


def check_ack_text(text: str) -> str:
    """A text an application's ack is recognised by: one line, no NUL."""
    if not text or any(c in text for c in "\r\n\0") or len(text.encode()) > ACK_TEXT_MAX:
        raise ValueError(f"expected a one-line text of 1..{ACK_TEXT_MAX} bytes, got {text!r}")
    return text


def check_attach_body(body: str, known: tuple[str, ...]) -> str:
    if "\0" in body or not body:
        raise ValueError("expected a non-empty message without NUL characters")
    if rendered_max(body) > ATTACH_BODY_MAX - 64:
        raise ValueError(f"expected at most {ATTACH_BODY_MAX - 64} bytes, each placeholder "
                         f"counted as {FIELD_MAX} bytes (its longest value)")
    return check_placeholders(body, known)


def render(template: str, fields: dict[str, object]) -> str:
    """Plain substitution of ``{field}`` (no str.format: the text may be JSON with braces)."""
    for k, v in fields.items():
        template = template.replace("{" + k + "}", str(v))
    return template


def header_block(headers: dict[str, str]) -> str:
    return "\r\n".join(f"{k}: {v}" for k, v in headers.items())


def file_field(text: str) -> str:
    """Percent-encoding for a connections file column: the row stays one line, no commas."""
    return "".join(chr(b) if 0x20 < b < 0x7f and b not in (0x25, 0x2c) else f"%{b:02X}"
                   for b in text.encode())
