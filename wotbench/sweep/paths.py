"""Dotted config paths with list indices: ``devices[0].rit.mean`` and ``--vary`` arguments."""
from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from ..errors import ConfigError

_FULL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*")
_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def parse_key(key: str) -> list[str | int]:
    """``"devices[0].rit.mean"`` -> ``["devices", 0, "rit", "mean"]``; ValueError when malformed."""
    key = key.strip()
    if not _FULL.fullmatch(key):
        raise ValueError(f"malformed key {key!r}: expected name(.name|[index])*, e.g. devices[0].count")
    return [m.group(1) if m.group(1) else int(m.group(2)) for m in _PART.finditer(key)]


def format_key(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + p
    return out


def set_path(raw: dict, key: str, value: Any) -> dict:
    """A copy of ``raw`` with ``key`` set to ``value``; missing mappings are created, list
    indices must exist. ValueError (naming the key) when the path cannot be followed."""
    parts = parse_key(key)
    out = copy.deepcopy(raw)
    node: Any = out
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        where = format_key(parts[:i + 1])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise ValueError(f"{key}: {format_key(parts[:i]) or '(top level)'} is not a list")
            if part >= len(node):
                raise ValueError(f"{key}: {where} does not exist (the list has {len(node)} item(s))")
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise ValueError(f"{key}: {format_key(parts[:i]) or '(top level)'} is not a mapping")
            if node.get(part) is None:
                if isinstance(nxt, int):
                    raise ValueError(f"{key}: {where} is not a list in the config")
                node[part] = {}
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise ValueError(f"{key}: index {last} does not exist")
        node[last] = value
    else:
        if not isinstance(node, dict):
            raise ValueError(f"{key}: {format_key(parts[:-1])} is not a mapping")
        node[last] = value
    return out


def get_path(raw: Any, key: str, default: Any = None) -> Any:
    node = raw
    for part in parse_key(key):
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
