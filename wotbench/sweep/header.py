"""``sweep.json`` without its points: what a sweep, a capacity search or a study scenario is
(schema in wotbench/sweep/README.md). Only the keys a sweep was written with are written back
(``exclude_unset``), so a file read and saved again keeps its keys."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "wotbench-sweep/2"      # /2: points carry setting and repeat (``--repeats``)
READABLE = ("wotbench-sweep/1", SCHEMA)   # a /1 sweep is a sweep with one repeat


class SweepHeader(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)   # keys of older sweeps kept
    schema_version: str = Field(SCHEMA, alias="schema")
    kind: Literal["sweep", "capacity", "study"]
    name: str
    created_utc: Optional[str] = None
    updated_utc: Optional[str] = None
    base_config: str
    base_dir: str
    backend: Optional[str] = None
    repeats: int = 1
    order: Optional[str] = None             # how repeats are ordered (sweep/repeats.py)
    vary: Optional[list[dict[str, Any]]] = None   # the --vary keys and values
    matrix: Optional[str] = None            # --matrix FILE
    set: dict[str, Any] = Field(default_factory=dict)   # --set, every point's keys
    capacity_params: Optional[dict[str, Any]] = None    # capacity: the search's parameters
    scenario: Optional[dict[str, Any]] = None           # study: the manifest's scenario

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True)
