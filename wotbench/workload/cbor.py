"""A minimal CBOR encoder (RFC 8949) for rendered push bodies: integers, floats (64-bit),
text, bytes, arrays, maps, booleans and null -- what a JSON-like template can hold."""
from __future__ import annotations

import struct
from typing import Any


def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for ai, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | ai]) + struct.pack(fmt, n)
    raise ValueError(f"integer {n} does not fit 64 bits")


def dumps(v: Any) -> bytes:
    if v is None:
        return b"\xf6"
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if isinstance(v, int):
        return _head(0, v) if v >= 0 else _head(1, -1 - v)
    if isinstance(v, float):
        return b"\xfb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return _head(3, len(b)) + b
    if isinstance(v, (bytes, bytearray)):
        return _head(2, len(v)) + bytes(v)
    if isinstance(v, (list, tuple)):
        return _head(4, len(v)) + b"".join(dumps(x) for x in v)
    if isinstance(v, dict):
        return _head(5, len(v)) + b"".join(dumps(k) + dumps(x) for k, x in v.items())
    raise ValueError(f"cannot encode {type(v).__name__} as CBOR")
