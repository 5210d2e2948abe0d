"""The run function of ``wotbench run``, sweeps and capacity searches alike: a config on
``backend: swarm`` (or ``--backend swarm``) is one merged run across the Swarm's labelled
nodes (the coordinator), any other a single-host run."""
from __future__ import annotations

from typing import Optional

from wotbench.config.load import load_config
from wotbench.runner.backends.swarm.choose import clock_bound_ms, runs_on_swarm


def run_config(config_path, out_root="reports", backend: Optional[str] = None,
               bound_ms: Optional[float] = None) -> int:
    """Run one config (see the module docstring); the run's exit code."""
    cfg = load_config(config_path)
    if runs_on_swarm(cfg, backend):
        from wotbench.runner.backends.swarm.coordinator import run as run_cells
        return run_cells(config_path, out_root, clock_bound_ms(cfg, bound_ms))
    from wotbench.run_command import run
    return run(config_path, out_root, backend)
