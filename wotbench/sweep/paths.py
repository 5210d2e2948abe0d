"""Dotted config paths with list indices: ``devices[0].rit.mean`` and ``--vary`` arguments.

``[*]`` stands for every item of a list: ``devices[*].network.loss.percent`` sets the key in
every device group (the what-if keys: "the same question with 2 % loss" is one flag).
"""
from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from wotbench.errors import ConfigError

ALL = "*"     # the [*] index: every item of the list
_FULL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[(?:\d+|\*)\])*")
_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\*)\]")
# keys users reach for that live elsewhere in the schema
_HINTS = {
    "network": ("subnet", "backend"),
}


_RATE = re.compile(r"^(devices\[(?:\d+|\*)\])\.rate$")


def expand_pseudo(key: str, value: Any) -> tuple[str, Any]:
    """``devices[N].rate`` (req/s per device; ``[*]`` every group) is a pseudo key for
    ``devices[N].rit.mean = 1000 / rate`` (ms); every other key is itself."""
    m = _RATE.match(key)
    if not m:
        return key, value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{key}: a rate in requests/s per device must be a number > 0, got {value!r}")
    return f"{m.group(1)}.rit.mean", round(1000.0 / float(value), 6)


def parse_key(key: str) -> list[str | int]:
    """``"devices[0].rit.mean"`` -> ``["devices", 0, "rit", "mean"]`` (``[*]`` -> ``"*"`` in a
    list position); ValueError when malformed."""
    key = key.strip()
    if not _FULL.fullmatch(key):
        raise ValueError(f"malformed key {key!r}: expected name(.name|[index]|[*])*, e.g. devices[0].count")
    out: list[str | int] = []
    for m in _PART.finditer(key):
        if m.group(1):
            out.append(m.group(1))
        else:
            out.append(ALL if m.group(2) == ALL else int(m.group(2)))
    return out


def format_key(parts: list[str | int]) -> str:
    out = ""
    for i, p in enumerate(parts):
        index = isinstance(p, int) or (p == ALL and i > 0)
        out += f"[{p}]" if index else ("." if out else "") + p
    return out


def key_hint(key: str) -> str:
    """A pointer for a top-level key that exists but not with that child (network.impairments)."""
    parts = parse_key(key)
    top = parts[0]
    if top in _HINTS and len(parts) > 1 and parts[1] not in _HINTS[top]:
        return (f"; {top}: has only {', '.join(_HINTS[top])} -- network impairments are per device "
                f"group: devices[N].network.loss.percent, devices[*].network.delay.time_ms, ... "
                f"(docs/NETWORK-IMPAIRMENTS.md)")
    return ""


def set_path(raw: dict, key: str, value: Any) -> dict:
    """A copy of ``raw`` with ``key`` set to ``value``; missing mappings are created, list
    indices must exist, ``[*]`` sets every item. ValueError (naming the key) when the path
    cannot be followed."""
    parts = parse_key(key)
    out = copy.deepcopy(raw)
    try:
        _set(out, parts, 0, key, value)
    except ValueError as e:
        raise ValueError(f"{e}{key_hint(key)}") from None
    return out


def _set(node: Any, parts: list, i: int, key: str, value: Any) -> None:
    part, last = parts[i], i == len(parts) - 1
    where = format_key(parts[:i + 1])
    if isinstance(part, int) or (part == ALL and i > 0):
        if not isinstance(node, list):
            raise ValueError(f"{key}: {format_key(parts[:i]) or '(top level)'} is not a list")
        if part == ALL:
            if not node:
                raise ValueError(f"{key}: {format_key(parts[:i])} is an empty list")
            items = range(len(node))
        elif part >= len(node):
            raise ValueError(f"{key}: {where} does not exist (the list has {len(node)} item(s))")
        else:
            items = [part]
        for j in items:
            if last:
                node[j] = value
            else:
                _set(node[j], parts, i + 1, key, value)
        return
    if not isinstance(node, dict):
        raise ValueError(f"{key}: {format_key(parts[:i]) or '(top level)'} is not a mapping")
    if last:
        node[part] = value
        return
    if node.get(part) is None:
        nxt = parts[i + 1]
        if isinstance(nxt, int) or nxt == ALL:
            raise ValueError(f"{key}: {where} is not a list in the config")
        node[part] = {}
    _set(node[part], parts, i + 1, key, value)


def get_path(raw: Any, key: str, default: Any = None) -> Any:
    """The value at ``key`` (``[*]`` reads the first item), else ``default``."""
    node = raw
    for part in parse_key(key):
        part = 0 if part == ALL else part
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return default
    return node


def _split_values(text: str) -> list[str]:
    """Split on commas outside brackets/braces/quotes: ``1,[2,3],'a,b'`` -> 3 values."""
    out, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    out.append(cur)
    return out


def parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"cannot read {text!r} as a YAML value: {e}") from None


def parse_vary(arg: str) -> tuple[str, list[Any]]:
    """``"devices[0].count=5,10,20"`` -> ``("devices[0].count", [5, 10, 20])``.

    Raises :class:`ConfigError` naming the argument."""
    if "=" not in arg:
        raise ConfigError([f"--vary {arg}: expected KEY=V1,V2,..., e.g. devices[0].count=5,10,20"])
    key, _, values = arg.partition("=")
    try:
        parts = parse_key(key)
        vals = [parse_scalar(v.strip()) for v in _split_values(values)]
    except ValueError as e:
        raise ConfigError([f"--vary {arg}: {e}"]) from None
    if not values.strip() or any(v is None for v in vals):
        raise ConfigError([f"--vary {arg}: empty value in the list (expected V1,V2,...)"])
    if len({repr(v) for v in vals}) != len(vals):
        raise ConfigError([f"--vary {arg}: a value is listed twice"])
    return format_key(parts), vals


def parse_set(args: list[str]) -> dict[str, Any]:
    """``["devices[*].network.loss.percent=2", ...]`` -> ``{key: value}``: keys every point of a
    sweep or capacity search gets (one YAML value each). Raises :class:`ConfigError` naming
    the argument."""
    out: dict[str, Any] = {}
    for arg in args:
        key, eq, text = arg.partition("=")
        try:
            if not eq or not text.strip():
                raise ValueError("expected KEY=VALUE, e.g. devices[*].network.loss.percent=2")
            k = format_key(parse_key(key))
            value = parse_scalar(text.strip())
        except ValueError as e:
            raise ConfigError([f"--set {arg}: {e}"]) from None
        if k in out:
            raise ConfigError([f"--set {arg}: {k} is set twice"])
        out[k] = value
    return out
