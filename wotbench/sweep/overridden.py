"""``wotbench run CONFIG --set KEY=VALUE``: one run of a config with keys changed, through the
same path a sweep point takes (:func:`wotbench.sweep.core.derive_config`: the keys checked and
named on a bad value, relative paths made absolute), written to a temporary file for the run
and handed to it read: the YAML is parsed once."""
from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

from wotbench.configfile.yaml_loader import ConfigFile, config_from_dict
from wotbench.errors import ConfigError
from wotbench.sweep.core import derive_config
from wotbench.sweep.paths import parse_set


@contextmanager
def overridden_config(path: Path, set_args: list[str]) -> Iterator[ConfigFile]:
    """The config at ``path`` with ``set_args`` applied, as a file that lives for the block
    (``.path``) and the config it holds (``.config``: paths absolute, so its directory is not
    the original's)."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError([f"{path}: cannot read ({e.strerror})"]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"{path}: not valid YAML ({e})"]) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"{path}: expected a mapping of config keys"])
    cfg = derive_config(raw, parse_set(set_args), base_dir=path.resolve().parent,
                        name=raw.get("name", path.stem), label="--set")
    tmp = Path(tempfile.mkdtemp(prefix="wotbench-set-"))
    try:
        out = tmp / path.name
        text = yaml.safe_dump(cfg, sort_keys=False)
        out.write_text(text)
        yield ConfigFile(out, text, cfg, config_from_dict(cfg, tmp, str(out)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
