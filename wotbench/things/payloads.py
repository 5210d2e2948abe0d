"""Values that conform to a TD data schema (TD 1.1 §5.3.2 DataSchema): request bodies and sizes.

A writeproperty/invokeaction request carries a value generated from the affordance's data
schema (its property schema, the action's ``input``) as compact JSON: the trace's ``body``
column (docs/CONTRACTS.md §1), one value per request drawn with the run's seed
(:func:`value_text`, :mod:`.workload`); a read's or an invocation's response is one such value
per instance and resource (the devices serve it). :func:`body` checks one generated value
against the schema with ``jsonschema`` when the config is read (``pattern`` and ``format`` are
not generated for, and so left out of that check); :func:`max_bytes` bounds every value
:func:`generate` can give, which sizes the group (one datagram or block-wise) since each
request draws its own.
"""
from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np

# keys of an affordance that are not part of its data schema (TD 1.1 InteractionAffordance)
_NOT_SCHEMA = {"forms", "observable", "uriVariables", "safe", "idempotent", "synchronous",
               "input", "output", "data", "subscription", "cancellation", "dataResponse"}
_UNCHECKED = ("pattern", "format", "contentMediaType", "contentEncoding")


def data_schema(affordance_or_schema: dict) -> dict:
    return {k: v for k, v in affordance_or_schema.items() if k not in _NOT_SCHEMA}


def generate(schema: Any, rng: np.random.Generator, depth: int = 0) -> Any:
    """One value conforming to ``schema`` (a TD DataSchema)."""
    if not isinstance(schema, dict) or depth > 20:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return generate(schema[key][0], rng, depth + 1)
    t = schema.get("type")
    if t == "boolean":
        return bool(rng.integers(2))
    if t in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 100))
        if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or hi < lo:
            lo, hi = 0, 100
        if t == "integer":
            a, b = int(np.ceil(lo)) + ("exclusiveMinimum" in schema), int(np.floor(hi)) - ("exclusiveMaximum" in schema)
            return int(rng.integers(a, b + 1)) if b >= a else a
        x = round(float(lo + (hi - lo) * (0.05 + 0.9 * rng.random())), 2)
        return min(max(x, lo), hi)
    if t == "string":
        n = max(int(schema.get("minLength", 0)), min(8, int(schema.get("maxLength", 8))))
        return "x" * n
    if t == "array":
        n = max(int(schema.get("minItems", 1)), 0)
        n = min(n, int(schema.get("maxItems", n)))
        return [generate(schema.get("items", {}), rng, depth + 1) for _ in range(n)]
    if t == "object":
        props = schema.get("properties") or {}
        return {k: generate(v, rng, depth + 1) for k, v in props.items()}
    if t == "null":
        return None
    return None


def _checkable(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _checkable(v) for k, v in schema.items() if k not in _UNCHECKED}
    if isinstance(schema, list):
        return [_checkable(v) for v in schema]
    return schema


def body(schema: dict | None, rng: np.random.Generator) -> tuple[int, str | None]:
    """(bytes of a compact JSON value of ``schema``, a problem or None); no schema: 0 bytes."""
    if not schema:
        return 0, None
    value = generate(schema, rng)
    try:
        jsonschema.validate(value, _checkable(schema))
    except jsonschema.ValidationError as e:
        return 0, f"cannot generate a value it accepts ({e.message}), expected a data schema " \
                  "with type/enum/const and satisfiable limits"
    except jsonschema.SchemaError as e:
        return 0, f"not a valid data schema ({e.message})"
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()), None


def _num_text_max(lo: float, hi: float, integer: bool) -> int:
    """The longest JSON text of a number :func:`generate` draws in ``[lo, hi]``: an integer's
    digits, or a float rounded to 2 decimals (its shortest repr), or a limit itself (clamped)."""
    if integer:
        a, b = int(np.ceil(lo)), int(np.floor(hi))   # an exclusive limit moves them by 1
        return max(len(str(x)) for x in (a - 1, a, a + 1, b - 1, b, b + 1))
    whole = len(str(int(max(abs(lo), abs(hi))))) + (lo < 0) + 3   # sign, digits, ".dd"
    return max(whole, len(json.dumps(float(lo))), len(json.dumps(float(hi))))


def max_bytes(schema: Any, depth: int = 0) -> int:
    """An upper bound of the compact JSON bytes of any value :func:`generate` gives for
    ``schema`` (it mirrors generate's branches)."""
    def text(v: Any) -> int:
        return len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode())
    if not isinstance(schema, dict) or depth > 20:
        return 4                                               # null
    if "const" in schema:
        return text(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return max(text(v) for v in schema["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return max_bytes(schema[key][0], depth + 1)
    t = schema.get("type")
    if t == "boolean":
        return 5
    if t in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 100
                                                               if isinstance(lo, (int, float)) else 100))
        if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or hi < lo:
            lo, hi = 0, 100
        return _num_text_max(lo, hi, t == "integer")
    if t == "string":
        return text(generate(schema, np.random.default_rng(0)))   # its length is fixed
    if t == "array":
        n = max(int(schema.get("minItems", 1)), 0)
        n = min(n, int(schema.get("maxItems", n)))
        return 2 + n * max_bytes(schema.get("items", {}), depth + 1) + max(n - 1, 0)
    if t == "object":
        props = schema.get("properties") or {}
        return 2 + sum(text(k) + 1 + max_bytes(v, depth + 1) for k, v in props.items()) \
            + max(len(props) - 1, 0)
    return 4


def value_text(schema: dict, rng: np.random.Generator) -> str:
    """One value of ``schema`` as compact JSON (what a request's body carries)."""
    return json.dumps(generate(schema, rng), separators=(",", ":"), ensure_ascii=False)
