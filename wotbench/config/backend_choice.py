"""Whether a command runs on swarm, and with which clock bound: the command line over the
config (``backend:``, ``cluster.clock_bound_ms``), each refusal naming the key and the fix.

``wotbench.dispatch`` uses it for ``wotbench run`` and for every point of a sweep or capacity
search; the pre-flight to skip the host checks a swarm run leaves to each node. It lives
beside the config (not in ``wotbench.distributed``) because the pre-flight, below the
runner, asks it too.
"""
from __future__ import annotations

from typing import Optional

from wotbench.config.schema import CLOCK_BOUND_MAX_MS, CLOCK_BOUND_MIN_MS, Config
from wotbench.errors import ConfigError

SWARM = "swarm"


def runs_on_swarm(cfg: Config, requested: Optional[str]) -> bool:
    """The command line's backend when given, else the config's."""
    return (requested or cfg.backend) == SWARM


def clock_bound_ms(cfg: Config, option_ms: Optional[float]) -> float:
    """``--clock-bound-ms`` when given (checked against the config key's limits), else
    ``cluster.clock_bound_ms``."""
    if option_ms is None:
        return cfg.cluster.clock_bound_ms
    if not CLOCK_BOUND_MIN_MS <= option_ms <= CLOCK_BOUND_MAX_MS:
        raise ConfigError(f"--clock-bound-ms: must be {CLOCK_BOUND_MIN_MS:g}..{CLOCK_BOUND_MAX_MS:g} "
                          f"ms (as cluster.clock_bound_ms), got {option_ms:g}")
    return option_ms
