"""Reading a config: ``load_config(path) -> Config`` parses the YAML, expands its ``things:``
into device groups (:mod:`wotbench.things.expand`), validates it against the schema
(:mod:`wotbench.config.schema`) and the cross-block rules (:mod:`wotbench.configfile.checks`).
Every problem becomes one ``"key.path: message"`` string in
:class:`~wotbench.errors.ConfigError` ``.problems`` (e.g. ``devices[1].service_time.mean: must be
> 0, got -5``); unknown keys get a did-you-mean (:mod:`wotbench.schema_errors`).

Relative paths in the file (``trace``, empirical ``file``, ``dtls.psk_key_file``,
``devices[].server.config_template``, ``gateways.http.body_template_file``) are relative
to the config file's directory; loading makes them absolute so a dumped config is self-contained.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from wotbench.configfile import checks
from wotbench.config.schema import Config
from wotbench.errors import ConfigError
from wotbench.schema_errors import problems as schema_problems
from wotbench.schema_errors import type_name
from wotbench.things.expand import expand as things_expand


def _absolutize(raw: dict, base_dir: Path) -> None:
    """Make relative paths in the raw mapping absolute (relative to the config's dir)."""
    def fix(p: Any) -> Any:
        if isinstance(p, str) and p and not Path(p).expanduser().is_absolute():
            return str((base_dir / p).resolve())
        return str(Path(p).expanduser()) if isinstance(p, str) else p
    tr = raw.get("trace")
    if isinstance(tr, str):
        raw["trace"] = fix(tr)
    elif isinstance(tr, dict):
        for k in ("file", "resources"):
            if k in tr:
                tr[k] = fix(tr[k])
    d = raw.get("dtls")
    if isinstance(d, dict) and isinstance(d.get("psk_key_file"), str):
        d["psk_key_file"] = fix(d["psk_key_file"])
    gw = raw.get("gateways")
    http = gw.get("http") if isinstance(gw, dict) else None
    if isinstance(http, dict) and isinstance(http.get("body_template_file"), str):
        http["body_template_file"] = fix(http["body_template_file"])
    edge = raw.get("edge_server")
    if isinstance(edge, dict) and isinstance(edge.get("config_template"), str):
        edge["config_template"] = fix(edge["config_template"])
    groups = raw.get("devices")
    for g in groups if isinstance(groups, list) else []:   # a wrong type is reported by validation
        if isinstance(g, dict):
            srv = g.get("server")
            if isinstance(srv, dict) and isinstance(srv.get("config_template"), str):
                srv["config_template"] = fix(srv["config_template"])
            for key in ("service_time", "rit"):
                spec = g.get(key)
                if isinstance(spec, dict) and "file" in spec:
                    spec["file"] = fix(spec["file"])


def config_from_dict(raw: Any, base_dir: str | Path = ".", source: str | None = None) -> Config:
    """Validate a mapping (as read from YAML); raises ConfigError listing every problem."""
    base_dir = Path(base_dir)
    if not isinstance(raw, dict):
        raise ConfigError([f"(top level): must be a mapping of keys (name, devices, ...), got {type_name(raw)}"], source)
    raw = copy.deepcopy(raw)
    _absolutize(raw, base_dir)
    raw, thing_problems = things_expand(raw, base_dir)
    if thing_problems:   # the groups they would have made are missing: report these alone
        raise ConfigError(thing_problems, source)
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(schema_problems(e, Config), source) from None
    problems = checks.problems(cfg, base_dir)
    if problems:
        raise ConfigError(problems, source)
    cfg._source = source
    return cfg


@dataclass(frozen=True)
class ConfigFile:
    """A config file read once: its text and mapping (what a sweep derives its points from)
    and the validated :class:`Config`."""
    path: Path
    text: str
    raw: dict
    config: Config


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file. Raises ConfigError (exit 2), never a traceback."""
    return read_config_file(path).config


def read_config_file(path: str | Path) -> ConfigFile:
    """:func:`load_config`, keeping the text and the mapping it was validated from."""
    path = Path(path)
    src = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(["file not found"], src) from None
    except IsADirectoryError:
        raise ConfigError(["is a directory, expected a YAML file"], src) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"cannot read: {getattr(e, 'strerror', None) or e}"], src) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError([f"{where}YAML syntax error: {what}"], src) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"YAML error: {e}"], src) from None
    if raw is None:
        raise ConfigError(["(top level): the file is empty, expected a mapping with at least 'name' and 'devices'"], src)
    return ConfigFile(path, text, raw, config_from_dict(raw, path.parent, src))
