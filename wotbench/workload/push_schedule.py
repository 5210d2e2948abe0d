"""Per-device push schedules (``devices[].push``, :mod:`wotbench.config.push_spec`): every request a
device will send, with its path and body rendered, in the file wot-device replays
(``wot-device --push``, docs/CONTRACTS.md §3 "Push"):

    phase,op,at_us,method,type,target,path,content_format,payload_hex,retransmit

Rendering happens here, before the run, so the device's hot path only patches a message ID
and a token; a template that does not render for some device stops the run before anything
starts, naming the key, the device and the fix (:class:`PushRenderError`)."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from wotbench.config.distributions import make_distribution
from wotbench.config.push_spec import LOCATION, PLACEHOLDER, PushOp
from wotbench.workload import cbor

HEADER = "phase,op,at_us,method,type,target,path,content_format,payload_hex,retransmit"
MAX_PAYLOAD = 1024      # one datagram (wot-device: no block-wise transfer for pushes)
MAX_PATH = 255
PHASES = ("setup", "test", "teardown")


class PushRenderError(ValueError):
    """A template that does not render: ``key`` (the config key) and what to do."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class PushDevice:
    """One pushing device: who it is and where its ops go."""
    name: str
    id: int
    group: str
    index: int                      # in its group
    address: str
    port: int
    group_key: str                  # devices[i]
    targets: tuple[str, ...]        # per op: IP:PORT

    def fields(self) -> dict[str, Any]:
        """The template fields fixed per device (wotbench.config.push_spec.VERIFY_FIELDS)."""
        return {"device": self.name, "id": self.id, "group": self.group, "index": self.index,
                "address": self.address, "port": self.port}


@dataclass(frozen=True)
class Row:
    phase: str
    op: str
    at_us: int
    method: str
    type: str
    target: str
    path: str
    content_format: Optional[int]
    payload: bytes
    retransmit: bool = False        # a test CON retransmitted per RFC 7252 (PushOp.retransmit)

    def line(self) -> str:
        cf = "" if self.content_format is None else str(self.content_format)
        return (f"{self.phase},{self.op},{self.at_us},{self.method},{self.type},{self.target},"
                f"{self.path},{cf},{self.payload.hex()},{int(self.retransmit)}")


def _fmt(value: Any, spec: Optional[str]) -> str:
    return format(value, spec) if spec else str(value)


def render_text(t: str, fields: dict[str, Any]) -> str:
    return PLACEHOLDER.sub(lambda m: _fmt(fields[m.group(1)], m.group(2)), t)


def render_struct(t: Any, fields: dict[str, Any]) -> Any:
    """Strings are templates; a string that is one placeholder keeps the value's type."""
    if isinstance(t, str):
        m = PLACEHOLDER.fullmatch(t)
        if m and not m.group(2):
            return fields[m.group(1)]
        return render_text(t, fields)
    if isinstance(t, dict):
        return {render_text(str(k), fields): render_struct(v, fields) for k, v in t.items()}
    if isinstance(t, list):
        return [render_struct(v, fields) for v in t]
    return t


def render_body(op: PushOp, fields: dict[str, Any]) -> bytes:
    """The payload bytes; ValueError saying why it does not render."""
    if op.body is None:
        return b""
    structured = op.format in ("json", "senml+json", "cbor", "senml+cbor")
    if not structured:
        return render_text(op.body, fields).encode()
    if isinstance(op.body, str):
        text = render_text(op.body, fields)
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValueError(f"renders to {text[:80]!r}, which is not JSON ({e})") from None
    else:
        value = render_struct(op.body, fields)
    if op.format in ("cbor", "senml+cbor"):
        return cbor.dumps(value)
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _times(op: PushOp, duration_s: float, rng: np.random.Generator, base_dir) -> list[int]:
    """Send instants (µs from the test start): the first at a uniform phase in [0, mean)."""
    dist = _distribution(op.interval, base_dir)
    end_us = duration_s * 1e6
    t = rng.uniform(0, dist.mean) * 1000
    out: list[int] = []
    while t < end_us:
        n = max(16, int((end_us - t) / (dist.mean * 1000)) + 16)
        gaps = dist.sample(rng, n) * 1000
        for g in gaps:
            if t >= end_us:
                break
            out.append(int(t))
            t += max(float(g), 1.0)
    return out


def _distribution(spec, base_dir):
    """The op's distribution, built once for every device of its group (scipy's frozen
    distributions take milliseconds to build; sampling takes each device's own generator)."""
    if isinstance(spec, dict) and "file" in spec:   # an empirical file may change between runs
        return make_distribution(spec, base_dir)
    return _built(json.dumps(spec, sort_keys=True, default=str), str(base_dir))


@functools.lru_cache(maxsize=256)
def _built(spec_json: str, base_dir: str):
    return make_distribution(json.loads(spec_json), None if base_dir == "None" else base_dir)


def device_rows(d: PushDevice, ops: list[PushOp], duration_s: float, seed: int,
                base_dir=None) -> list[Row]:
    """Every row of one device's schedule, setup first, test by time, teardown last."""
    rng = np.random.default_rng([seed, d.id, 23])
    rows: dict[str, list[tuple[int, int, Row]]] = {p: [] for p in PHASES}
    for j, op in enumerate(ops):
        if op.phase == "verify":       # the harness's request (runner/during/push_verify.py)
            continue
        key = f"{d.group_key}.push[{j}]"
        values = _distribution(op.value, base_dir) if op.value is not None else None
        times = _times(op, duration_s, rng, base_dir) if op.phase == "test" else [0]
        vals = values.sample(rng, len(times)) if values is not None else None
        base = d.fields()
        for seq, at in enumerate(times):
            fields = dict(base, seq=seq, time_ms=at // 1000, time_s=round(at / 1e6, 6),
                          value=round(float(vals[seq]), op.value_decimals) if vals is not None
                          else None)
            try:
                path = render_text(op.path, fields)
                body = render_body(op, fields)
            except (ValueError, KeyError, TypeError) as e:
                raise PushRenderError(key, f"does not render for device {d.name} (request "
                                      f"{seq}): {e}; fix the template") from None
            if any(c.isspace() or c in ',"' for c in path) or len(path.encode()) > MAX_PATH:
                raise PushRenderError(f"{key}.path", f"renders to {path[:80]!r} for device "
                                      f"{d.name}: expected at most {MAX_PATH} bytes without "
                                      "spaces, commas or quotes")
            if len(body) > MAX_PAYLOAD:
                raise PushRenderError(f"{key}.body", f"renders to {len(body)} bytes for device "
                                      f"{d.name}, expected at most {MAX_PAYLOAD} (one datagram)")
            rows[op.phase].append((at, j, Row(op.phase, op.op, at, op.method, op.type,
                                              d.targets[j], path, op.content_format_number,
                                              body, op.retransmit)))
    out: list[Row] = []
    for p in PHASES:
        out += [r for _, _, r in sorted(rows[p], key=lambda x: (x[0], x[1]))]
    return out


def merge_test_rows(rows: list[Row], extra: list[Row]) -> list[Row]:
    """``extra`` test rows joined with a schedule's test rows in time order (stable)."""
    setup = [r for r in rows if r.phase == "setup"]
    test = sorted([r for r in rows if r.phase == "test"] + extra, key=lambda r: r.at_us)
    return setup + test + [r for r in rows if r.phase == "teardown"]


def write_schedule(path: Path, rows: list[Row], writer: Callable[[Path, str], None]) -> None:
    writer(path, HEADER + "\n" + "".join(r.line() + "\n" for r in rows))


FLEET_HEADER = "device," + HEADER     # wot-fleet --push: one file for an engine's devices


def write_fleet_schedule(path: Path, devices: list[tuple[int, list[Row]]],
                         writer: Callable[[Path, str], None]) -> int:
    """An engine's schedule: every (device index, rows), each device's rows together; the
    number of rows written."""
    lines = [f"{index},{r.line()}\n" for index, rows in devices for r in rows]
    writer(path, FLEET_HEADER + "\n" + "".join(lines))
    return len(lines)
