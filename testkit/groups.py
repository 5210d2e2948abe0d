"""A config of device groups for unit tests: ``config_of(*groups, **top)`` (name ``t``, 2 s)
and ``problems_of(...)``, the problems a ConfigError names (the test fails without one)."""
from __future__ import annotations

import pytest

from wotbench.configfile.yaml_loader import config_from_dict
from wotbench.errors import ConfigError


def config_of(*groups, **top):
    return config_from_dict({"name": "t", "duration_s": 2, "devices": list(groups), **top})


def problems_of(*groups, **top) -> list[str]:
    with pytest.raises(ConfigError) as e:
        config_of(*groups, **top)
    return e.value.problems
