"""The base of every run-directory model: unknown keys are an error, never silently dropped,
so a writer and a reader that disagree about a key fail at once instead of drifting apart."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
