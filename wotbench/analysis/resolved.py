"""What the analysis judges a run by from its ``config.resolved.yaml``: the ``verdict:``
tolerance, the ``slo:`` and ``notify.slo``, read once per analysis (:func:`read`) and passed
down, each section through its typed model.

Section by section, not the whole ``Config``: a run directory of an older version, or a
hand-made one holding only the sections it is judged by, still analyses; a section that cannot
be read is a warning and its default (no SLO, the default tolerance), as each reader did before
it moved here. The file's mapping is kept (``raw``) for the one reader that needs the whole
``Config``, the notification sink's block (:mod:`wotbench.analysis.notify_sink`), so the file
is read once."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from cd_module.tolerance import from_config as verdict_from_config
from wotbench.config.notify import NotifySlo
from wotbench.config.slo_spec import Slo
from wotbench.rundir.evidence import VerdictParams

SECTIONS = ("verdict", "slo", "notify_slo")


@dataclass(frozen=True)
class ResolvedSpecs:
    verdict: Optional[VerdictParams] = None   # None: the analysis parameters' own
    slo: Optional[Slo] = None
    notify_slo: Optional[NotifySlo] = None
    # the file's YAML as read (None: no file, or not YAML) and where it is, for error messages
    raw: Any = field(default=None, compare=False, repr=False)
    path: Optional[Path] = field(default=None, compare=False, repr=False)


def _cannot(name: str, section: str, e: Exception) -> str:
    return {"verdict": f"{name}: its verdict: cannot be read, the default tolerance is used ({e})",
            "slo": f"{name}: its slo: cannot be read, SLOs not evaluated ({e})",
            "notify_slo": f"{name}: its notify.slo cannot be read ({e})"}[section]


def _section(raw: Any, section: str) -> Any:
    if section == "notify_slo":     # AttributeError: notify: (or the file) not a mapping
        spec = ((raw or {}).get("notify") or {}).get("slo")
        return NotifySlo.model_validate(spec) if spec else None
    spec = raw.get(section) if isinstance(raw, dict) else None
    if spec is None:
        return None
    return verdict_from_config(spec) if section == "verdict" else Slo.model_validate(spec)


def read(config_resolved: Path, warnings: list[str],
         sections: tuple[str, ...] = SECTIONS) -> ResolvedSpecs:
    """The ``sections`` of the run's config (None each without the file or the section); a
    warning appended for each that cannot be read."""
    if not config_resolved.is_file():
        return ResolvedSpecs()
    name = config_resolved.name
    try:
        raw = yaml.safe_load(config_resolved.read_text())
    except (OSError, yaml.YAMLError) as e:
        warnings.extend(_cannot(name, s, e) for s in sections)
        return ResolvedSpecs()
    out: dict[str, Any] = {"raw": raw, "path": config_resolved}
    for s in sections:
        try:
            out[s] = _section(raw, s)
        except (ValueError, ValidationError, AttributeError) as e:
            warnings.append(_cannot(name, s, e))
    return ResolvedSpecs(**out)
