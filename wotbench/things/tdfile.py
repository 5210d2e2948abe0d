"""Reading a TD or TM file and making a Thing instance's TD from it.

Every problem is a :class:`TdProblem`: the file, a JSON pointer (RFC 6901) into it and what
is wrong, printed ``FILE: /properties/temp/forms/0/href: what, expected what``; never a
traceback. Thing Model instantiation follows TD 1.1 §10 ("Thing Model") as far as WoTbench
needs: ``{{NAME}}`` placeholders are replaced by the instance's values (a string that is only
a placeholder takes the value's JSON type), ``tm:ThingModel`` leaves ``@type``, ``tm:required``
is dropped, and a model without ``security`` gets ``nosec`` (the emulated devices have no
security). ``tm:ref`` and ``links`` with ``rel: tm:extends`` (composed models) are refused.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

PLACEHOLDER = re.compile(r"\{\{([^{}]+)\}\}")


@dataclass(frozen=True)
class TdProblem:
    file: str
    pointer: str     # "" = the whole document
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.pointer or '(document)'}: {self.message}"


class TdError(Exception):
    def __init__(self, problems: list[TdProblem]):
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def pointer(parts) -> str:
    """The JSON pointer of a path of keys/indices (RFC 6901 escaping)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@lru_cache(maxsize=64)
def _read_cached(path: str, mtime_ns: int) -> Any:
    text = Path(path).read_text(encoding="utf-8")
    return json.loads(text)


def read_json(path: str | Path) -> Any:
    """The parsed file (cached per path and modification time; callers get a deep copy)."""
    p = Path(path)
    try:
        doc = _read_cached(str(p), p.stat().st_mtime_ns)
    except FileNotFoundError:
        raise TdError([TdProblem(str(p), "", "file not found")]) from None
    except IsADirectoryError:
        raise TdError([TdProblem(str(p), "", "is a directory, expected a JSON file")]) from None
    except UnicodeDecodeError as e:
        raise TdError([TdProblem(str(p), "", f"not UTF-8 text ({e.reason})")]) from None
    except OSError as e:
        raise TdError([TdProblem(str(p), "", f"cannot read: {e.strerror or e}")]) from None
    except json.JSONDecodeError as e:
        raise TdError([TdProblem(f"{p}:{e.lineno}:{e.colno}", "",
                                 f"JSON syntax error: {e.msg}")]) from None
    if not isinstance(doc, dict):
        raise TdError([TdProblem(str(p), "", f"the document is a JSON {type(doc).__name__}, "
                                             "expected an object (a Thing Description)")])
    return copy.deepcopy(doc)


def walk_strings(doc: Any, at: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """(path, string) of every string value in ``doc``."""
    if isinstance(doc, str):
        yield at, doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from walk_strings(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk_strings(v, at + (i,))


def placeholders(doc: Any) -> dict[str, str]:
    """Each placeholder name of ``doc`` and the pointer of its first use."""
    out: dict[str, str] = {}
    for at, s in walk_strings(doc):
        for name in PLACEHOLDER.findall(s):
            out.setdefault(name, pointer(at))
    return out


def model_problems(file: str, tm: dict, values: dict[str, object], values_key: str
                   ) -> list[TdProblem]:
    """What keeps the Thing Model ``tm`` from being instantiated with ``values``."""
    out = []
    for name, at in placeholders(tm).items():
        if name not in values:
            out.append(TdProblem(file, at, f"placeholder {{{{{name}}}}} has no value, expected "
                                           f"{values_key}.{name}"))
    types = tm.get("@type", [])
    if "tm:ThingModel" not in (types if isinstance(types, list) else [types]):
        out.append(TdProblem(file, "/@type", "a Thing Model's @type includes \"tm:ThingModel\", "
                                             "expected it (or give the file as td:)"))
    for at, s in walk_strings(tm):
        if at and at[-1] == "tm:ref":
            out.append(TdProblem(file, pointer(at), "tm:ref (a model importing definitions) is "
                                                    "not supported yet, expected a self-contained "
                                                    "model"))
    for i, link in enumerate(tm.get("links", []) if isinstance(tm.get("links"), list) else []):
        if isinstance(link, dict) and link.get("rel") == "tm:extends":
            out.append(TdProblem(file, f"/links/{i}", "tm:extends (a model extending another) "
                                                      "is not supported yet, expected a "
                                                      "self-contained model"))
    return out


def _substitute(v: Any, values: dict[str, object]) -> Any:
    if isinstance(v, str):
        whole = PLACEHOLDER.fullmatch(v)
        if whole:
            return copy.deepcopy(values[whole.group(1)])
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), v)
    if isinstance(v, dict):
        return {k: _substitute(x, values) for k, x in v.items()}
    if isinstance(v, list):
        return [_substitute(x, values) for x in v]
    return v


def instantiate(tm: dict, values: dict[str, object]) -> dict:
    """A TD from a Thing Model (``model_problems`` must be empty): see the module docstring."""
    td = _substitute(tm, values)
    types = td.get("@type", [])
    types = [t for t in (types if isinstance(types, list) else [types]) if t != "tm:ThingModel"]
    if types:
        td["@type"] = types if len(types) > 1 else types[0]
    else:
        td.pop("@type", None)
    td.pop("tm:required", None)
    td.pop("tm:optional", None)
    if "security" not in td:
        td.setdefault("securityDefinitions", {"nosec_sc": {"scheme": "nosec"}})
        td["security"] = "nosec_sc"
    return td


def instance_values(values: dict[str, object], index: int, device: str) -> dict[str, object]:
    """The placeholder values of instance ``index``: ``{index}``/``{device}`` in strings."""
    return {k: (v.replace("{index}", str(index)).replace("{device}", device)
                if isinstance(v, str) else v) for k, v in values.items()}
