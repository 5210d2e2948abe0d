"""One formatter for every config section's pydantic errors: ``"key.path: message"`` lines.

Used by the config (``wotbench.config.schema``), the network impairments (``netimpair.model``) and the
contention episodes (``wotbench.config.hog_episodes``), so every part of a config file is reported the
same way: the key as the user writes it (``devices[1].service_time.mean``), a sentence that
says what is expected and what was given, and a did-you-mean for unknown keys and choices.
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from wotbench.errors import format_loc

# Custom errors (pydantic_core.PydanticCustomError) whose message is already final, e.g. the
# network impairments' "30 ms is larger than the delay time_ms 20 ms ...".
FINAL_MESSAGE_TYPES = ("netimpair",)


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def type_name(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _unwrap(tp: Any) -> Any:
    """Strip Optional/Annotated to the model or list type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _model_at(root: type[BaseModel], loc: tuple) -> Optional[type[BaseModel]]:
    tp: Any = root
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, int):
            if typing.get_origin(tp) is not list:
                return None
            tp = typing.get_args(tp)[0]
        else:
            if not (isinstance(tp, type) and issubclass(tp, BaseModel)) or part not in tp.model_fields:
                return None
            tp = tp.model_fields[part].annotation
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _message(err: dict, root: type[BaseModel]) -> str:
    t, ctx, inp = err["type"], err.get("ctx") or {}, err.get("input")
    if t in FINAL_MESSAGE_TYPES:
        return err["msg"]
    if t == "missing":
        return "required key missing"
    if t == "extra_forbidden":
        model = _model_at(root, tuple(err["loc"][:-1]))
        allowed = list(model.model_fields) if model else []
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1, cutoff=0.6)
        if close:
            return f"unknown key, did you mean '{close[0]}'?"
        return "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    for kind, op in (("greater_than_equal", ">="), ("greater_than", ">"),
                     ("less_than_equal", "<="), ("less_than", "<")):
        if t == kind:
            bound = next(iter(ctx.values()))
            bound = f"{bound:g}" if isinstance(bound, float) else bound
            return f"must be {op} {bound}, got {_show(inp)}"
    if t.startswith("int_"):
        return f"must be an integer, got {_show(inp)}"
    if t.startswith("float_"):
        return f"must be a number, got {_show(inp)}"
    if t.startswith("bool_"):
        return f"must be true or false, got {_show(inp)}"
    if t.startswith("string_type"):
        return f"must be a string, got {type_name(inp)} {_show(inp)}"
    if t == "string_pattern_mismatch":
        return ("must contain only lowercase letters, digits and '-' (and start with a letter or "
                f"digit), got {_show(inp)}")
    if t == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters, got {len(inp)}"
    if t == "literal_error":
        msg = f"must be {ctx.get('expected')}, got {_show(inp)}"
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        close = (difflib.get_close_matches(str(inp), choices, n=1, cutoff=0.6)
                 if isinstance(inp, str) else [])
        return msg + (f" (did you mean '{close[0]}'?)" if close else "")
    if t in ("too_short", "list_too_short"):
        return f"must have at least {ctx.get('min_length')} item(s)"
    if t in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping, got {type_name(inp)} {_show(inp)}"
    if t == "list_type":
        return f"must be a list, got {type_name(inp)} {_show(inp)}"
    if t == "value_error":
        msg = err["msg"]
        return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg
    msg = err["msg"]
    return msg[:1].lower() + msg[1:]


def problems(e: ValidationError, root: type[BaseModel], prefix: tuple = ()) -> list[str]:
    """One ``"key.path: message"`` per distinct problem of ``e``, raised validating ``root``.

    ``prefix``: the location of ``root`` inside the config (``("devices", 0, "network")``). A
    custom message may start with its own sub-path (``"overrides.cpu-3.delay.jitter_ms: ..."``,
    raised by a model validator that checks a nested mapping): it is moved into the key.
    """
    out, seen = [], set()
    for err in e.errors():
        loc = tuple(prefix) + tuple(err["loc"])
        msg = _message({**err, "loc": tuple(err["loc"])}, root)
        head, sep, rest = msg.partition(": ")
        if sep and head.startswith("overrides.") and " " not in head:
            loc, msg = loc + (head,), rest
        p = f"{format_loc(loc)}: {msg}" if loc else msg
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out
