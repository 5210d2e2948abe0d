"""Validating a Thing Description against the W3C TD 1.1 JSON Schema (``jsonschema``).

The official schema (``td-json-schema-validation.json`` of the W3C wot-thing-description
repository, version "1.1-04-June-2021") ships inside the PyPI package ``domus-tdd-api`` (the
Thing Description Directory WoTbench registers Things with, docs/WOT.md); it is read from the
installed distribution's files without importing the package (importing it starts a Flask
app). When that package is not installed, WoTbench's own subset
(``td-subset.schema.json`` beside this module: the required Thing keys and the affordances'
forms, nothing more) is used, and :func:`schema_source` says which one was.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from wotbench.things.tdfile import TdProblem, pointer

OFFICIAL_DIST = "domus-tdd-api"
OFFICIAL_FILE = "tdd/data/td-json-schema-validation.json"
SUBSET_FILE = Path(__file__).with_name("td-subset.schema.json")
MAX_PROBLEMS = 10   # per document: the first few say what is wrong; hundreds would drown it


def _official_path() -> Path | None:
    try:
        dist = metadata.distribution(OFFICIAL_DIST)
    except metadata.PackageNotFoundError:
        return None
    p = Path(str(dist.locate_file(OFFICIAL_FILE)))
    return p if p.is_file() else None


@lru_cache(maxsize=1)
def _validator() -> tuple[jsonschema.Draft7Validator, str]:
    path = _official_path()
    source = (f"W3C TD 1.1 JSON Schema (from the {OFFICIAL_DIST} package)" if path
              else f"WoTbench's TD subset schema ({SUBSET_FILE.name}; {OFFICIAL_DIST} not "
                   "installed)")
    schema = json.loads((path or SUBSET_FILE).read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(schema), source


def schema_source() -> str:
    """Which schema validates TDs here (the official one or our subset)."""
    return _validator()[1]


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For anyOf/oneOf failures, the sub-error that got furthest into the document."""
    return best_match(err.context) if err.context else err


def td_problems(file: str, td: Any, where: str = "") -> list[TdProblem]:
    """The schema's complaints about ``td``, each at its JSON pointer; ``where`` (e.g.
    ``instance 0``) is added to each message when the TD was made from a model."""
    validator, _ = _validator()
    out = []
    for err in sorted(validator.iter_errors(td), key=lambda e: list(map(str, e.absolute_path))):
        e = _deepest(err)
        msg = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        suffix = f" ({where})" if where else ""
        out.append(TdProblem(file, pointer(e.absolute_path),
                             f"{msg}{suffix}, expected what the TD 1.1 schema allows"))
        if len(out) >= MAX_PROBLEMS:
            break
    return out
