"""``study.json`` (:class:`wotbench.rundir.layout.StudyDir`): what a validation study was asked
and when, written when it starts, read back by ``wotbench study --resume``; the same record is
``meta`` in results.json (with ``finished_utc`` once the study ends)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import ConfigDict, Field, ValidationError

from wotbench.errors import ConfigError
from wotbench.rundir._model import Record
from wotbench.schema_errors import problems as schema_problems

SCHEMA = "wotbench-study/1"


class StudyGate(Record):
    """The quiet-host gate the study ran behind (wotbench.monitor.quiet.QuietGate)."""
    max_load: float
    timeout_s: float
    wait: bool


class StudyMeta(Record):
    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(SCHEMA, alias="schema")
    started_utc: str
    manifest: str                      # the manifest the study was created from (absolute)
    host: str
    cpus: Optional[int]
    only: Optional[list[str]]          # the scenarios asked for (null: every one)
    # a study started before these keys were written resumes with them unset (null)
    repeats_override: Optional[int] = None
    seed_base: Optional[int] = None    # null: each config's seed
    gate: Optional[StudyGate] = None
    finished_utc: Optional[str] = None   # set once the study ends (results.json only)

    def to_json(self) -> dict[str, Any]:
        d = self.model_dump(mode="json", by_alias=True)
        if d["finished_utc"] is None:      # study.json is written before the end
            del d["finished_utc"]
        return d


def read_study_meta(path: Path) -> StudyMeta:
    """ConfigError naming the file (not a study directory) or the file and every bad key."""
    try:
        text = Path(path).read_text()
        return StudyMeta.model_validate_json(text)
    except OSError as e:
        raise ConfigError([f"{path}: not a study directory ({e})"]) from None
    except ValidationError as e:
        if any(err["type"] == "json_invalid" for err in e.errors()):
            raise ConfigError([f"{path}: not a study directory (not valid JSON)"]) from None
        raise ConfigError([f"{path}: {p}" for p in schema_problems(e, StudyMeta)]) from None
