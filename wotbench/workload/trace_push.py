"""Device-originated lines of a recorded trace (docs/CONTRACTS.md §1): a line whose method is
written ``>METHOD`` is a request the device ``device_id`` sent itself, replayed by that device
(wot-device --push, its test-phase schedule) from its own endpoint at ``send_time_us``:

    3,120000,>POST,coap://store/readings/meter-3,48

The URI's host names the target: a device group of this run (device i of the sending group
sends to the group's device i mod count, as ``devices[].push[].target``) or an IP address with
its port. The path may use the push template fields that are fixed per request ({device},
{id}, {group}, {index}, {address}, {port}, {seq}, {time_ms}, {time_s}). ``payload_bytes``
bytes of body (``x``, as the GE's), no Content-Format, CON, never retransmitted; the op is
``trace-<method>`` in the push figures. Bad lines: ConfigError ``FILE:LINE: what, expected``."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from wotbench.config.push_spec import PLACEHOLDER
from wotbench.config.schema import Config
from wotbench.csvcheck import MAX_LISTED
from wotbench.errors import ConfigError
from wotbench.workload.trace_io import DEVICE_MARK, is_device_line, trace_lines

METHODS = ("GET", "PUT", "POST", "DELETE")
MAX_PAYLOAD = 1024             # one datagram (wot-device: no block-wise transfer for pushes)
PATH_FIELDS = ("device", "id", "group", "index", "address", "port", "seq", "time_ms", "time_s")
_URI = re.compile(r"coap://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(?::(\d{1,5}))?/([^\s,#\"]*)")
_UINT = re.compile(r"\d{1,18}")


@dataclass(frozen=True)
class DeviceLine:
    """One device-originated request of the trace."""
    device_id: int
    at_us: int
    method: str
    host: str                   # a group of the run, or an IP address
    port: Optional[int]         # with an IP address: required
    path: str                   # template (PATH_FIELDS)
    payload_bytes: int
    line: int

    @property
    def op(self) -> str:
        return f"trace-{self.method.lower()}"


def _parse(s: str) -> tuple[Optional[DeviceLine], Optional[str]]:
    f = s.split(",")
    if not 4 <= len(f) <= 6:
        return None, f"{len(f)} field(s), expected device_id,send_time_us,>METHOD,uri[,payload_bytes[,client]]"
    dev, at, method, uri = f[0], f[1], f[2][len(DEVICE_MARK):], f[3]
    pl = f[4] if len(f) > 4 else ""
    if not _UINT.fullmatch(dev):
        return None, f"device_id {dev!r}, expected an integer >= 0"
    if not _UINT.fullmatch(at):
        return None, f"send_time_us {at!r}, expected an integer >= 0 (µs)"
    if method not in METHODS:
        return None, f"method {f[2]!r}, expected >GET, >PUT, >POST or >DELETE on a device-originated line"
    m = _URI.fullmatch(uri)
    if not m:
        return None, f"uri {uri!r}, expected coap://TARGET[:PORT]/path (TARGET: a device group of the run or an IP address)"
    host, port = m.group(1).strip("[]"), m.group(2)
    if port is not None and not 1 <= int(port) <= 65535:
        return None, f"port {port}, expected 1..65535"
    try:
        ipaddress.ip_address(host)
        if port is None:
            return None, f"uri {uri!r}: an IP address target needs its port, expected coap://IP:PORT/path"
    except ValueError:
        if port is not None:
            return None, f"uri {uri!r}: a device group target takes no port, expected coap://GROUP/path"
    unknown = [p.group(1) for p in PLACEHOLDER.finditer(m.group(3)) if p.group(1) not in PATH_FIELDS]
    if unknown:
        return None, f"path field {{{unknown[0]}}}, expected one of " + ", ".join("{" + x + "}" for x in PATH_FIELDS)
    if pl and (not _UINT.fullmatch(pl) or int(pl) > MAX_PAYLOAD):
        return None, f"payload_bytes {pl!r}, expected an integer 0..{MAX_PAYLOAD} (one datagram)"
    if len(f) == 6 and f[5] != "":
        return None, "client given on a device-originated line, expected it empty (the device sends from its own endpoint)"
    return DeviceLine(int(dev), int(at), method, host, int(port) if port else None, m.group(3),
                      int(pl or 0), 0), None


def read_device_lines(path: str | Path) -> list[DeviceLine]:
    """Every device-originated line of a trace (empty when it has none), syntax checked."""
    path = Path(path)
    lines, numbers = trace_lines(path)
    out, problems = [], []
    last: dict[int, int] = {}
    for s, no in zip(lines, numbers):
        if not is_device_line(s):
            continue
        d, why = _parse(s)
        if d is not None and d.at_us < last.get(d.device_id, 0):
            why = (f"send_time_us {d.at_us} is before device {d.device_id}'s previous line's "
                   f"{last[d.device_id]}, expected non-decreasing times")
        if why:
            problems.append(f"{path}:{no}: {why}")
            continue
        last[d.device_id] = d.at_us
        out.append(DeviceLine(d.device_id, d.at_us, d.method, d.host, d.port, d.path,
                              d.payload_bytes, no))
    if problems:
        more = [f"{path}: {len(problems) - MAX_LISTED} more bad line(s) not listed"] \
            if len(problems) > MAX_LISTED else []
        raise ConfigError(problems[:MAX_LISTED] + more)
    return out


@lru_cache(maxsize=4)
def _cached(path: str, mtime_ns: int, size: int) -> tuple[DeviceLine, ...]:
    return tuple(read_device_lines(path))


def device_lines(cfg: Config) -> dict[int, list[DeviceLine]]:
    """The config's trace's device-originated lines by device id, checked against the config:
    the device exists and is a wot-device, the target group is part of the run."""
    if cfg.trace is None:
        return {}
    src = Path(cfg.trace.file)
    try:
        st = src.stat()
    except OSError:
        return {}           # the trace check names a missing file
    lines = _cached(str(src), st.st_mtime_ns, st.st_size)
    names = cfg.device_names()
    group_of = [g for g in cfg.devices for _ in range(g.count)]
    groups = {g.group for g in cfg.devices}
    out: dict[int, list[DeviceLine]] = {}
    problems = []
    for d in lines:
        where = f"trace.file: {src}:{d.line}"
        if d.device_id >= len(names):
            problems.append(f"{where}: device_id {d.device_id} but the config has {len(names)} "
                            f"devices (ids 0..{len(names) - 1})")
        elif group_of[d.device_id].third_party:
            problems.append(f"{where}: device {names[d.device_id]} is a server/external "
                            "component, expected a wot-device to send a device-originated line")
        elif d.port is None and d.host not in groups:
            problems.append(f"{where}: target '{d.host}' is not a device group of this run "
                            f"(groups: {', '.join(sorted(groups))}), expected a group or IP:PORT")
        elif d.port is None and d.host == group_of[d.device_id].group:
            problems.append(f"{where}: target '{d.host}' is the sending device's own group, "
                            "expected another group or IP:PORT")
        else:
            out.setdefault(d.device_id, []).append(d)
        if len(problems) >= MAX_LISTED:
            break
    if problems:
        raise ConfigError(problems)
    return out
