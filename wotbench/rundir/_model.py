"""The base of every run-directory model: unknown keys are an error, never silently dropped,
so a writer and a reader that disagree about a key fail at once instead of drifting apart."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from wotbench.schema_errors import problems


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


R = TypeVar("R", bound=Record)


def read_record(path, model: type[R]) -> R:
    """A run-directory JSON file through its model. ValueError naming the file, and for a
    file of the wrong shape every bad key (``cost.json: samples: must be an integer, ...``);
    OSError when it cannot be read."""
    text = Path(path).read_text()
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{path}: " + "; ".join(problems(e, model))) from None
