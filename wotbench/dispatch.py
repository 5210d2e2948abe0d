"""The one door of every run: ``wotbench run``, each point of a sweep or capacity search and of
the validation study call :func:`run_config`, which chooses how the config runs.

- one host: :func:`wotbench.run_command.run` (the runner, then analysis and report);
- connected devices (``devices[].protocol: websocket | chunked | chunked-post``):
  :mod:`wotbench.connected`,
  across hosts :mod:`wotbench.distributed.connected_coord`;
- across hosts (``backend: swarm`` or ``--backend swarm``): the coordinator of
  :mod:`wotbench.distributed`, whose cells run the same runner on their nodes.

Nothing below this module imports it: the runner does not know whether it is a cell.
"""
from __future__ import annotations

from typing import Optional

from wotbench.config.backend_choice import clock_bound_ms, runs_on_swarm
from wotbench.configfile.yaml_loader import ConfigFile, read_config_file
from wotbench.run_result import RunDirSeen, RunResult


def run_config(config_path, out_root="reports", backend: Optional[str] = None,
               bound_ms: Optional[float] = None,
               on_run_dir: Optional[RunDirSeen] = None,
               source: Optional[ConfigFile] = None) -> RunResult:
    """Run one config (see the module docstring): its exit code, run directory and summary.
    The YAML is read here, once (``source``: already read by the caller, e.g. ``run --set``);
    the run goes on with the typed config. ``on_run_dir``: told the run directory the moment
    it exists (one host and across hosts; a connected run's directory is known from its
    result only)."""
    source = source if source is not None else read_config_file(config_path)
    cfg = source.config
    from wotbench.config.connected import connected_groups
    if connected_groups(cfg):   # connected devices: their own timeline (docs/CONNECTED.md)
        if runs_on_swarm(cfg, backend):   # cells of attached devices against one server
            from wotbench.distributed.connected_coord import run as run_connected_cells
            return run_connected_cells(config_path, out_root, clock_bound_ms(cfg, bound_ms),
                                       source=source)
        from wotbench.connected.run import run_connected
        return run_connected(cfg, str(config_path), out_root, backend=backend)
    if runs_on_swarm(cfg, backend):
        from wotbench.distributed.coordinator import run as run_cells
        return run_cells(config_path, out_root, clock_bound_ms(cfg, bound_ms), source=source,
                         on_run_dir=on_run_dir)
    from wotbench.run_command import run
    return run(config_path, out_root, backend, cfg=cfg, on_run_dir=on_run_dir)
