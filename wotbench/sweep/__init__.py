"""Series of tests (``wotbench sweep``) and their report; see README.md in this folder.

Public API:

- :func:`run_sweep` (create or resume, run, report), :func:`sweep_exit_code`,
  :func:`plan_points`, :func:`cartesian`, :func:`read_matrix`, :func:`create_sweep`
  (``command.py``: the verbs)
- :class:`Sweep` (``create``, ``open``, ``run_all``, ``run_point``, ``add_point``, ``points``),
  :func:`derive_config` (``core.py``: the sweep dir and its points)
- :func:`wotbench.sweep.paths.parse_vary`, ``parse_key``, ``set_path``, ``get_path``
- :func:`wotbench.sweep.report.write_report`, ``collect``
"""
from wotbench.sweep.command import (cartesian, create_sweep, plan_points, read_matrix, run_sweep,
                      sweep_exit_code)
from wotbench.sweep.core import Point, Sweep, derive_config

__all__ = ["Point", "Sweep", "cartesian", "create_sweep", "derive_config", "plan_points", "read_matrix",
           "run_sweep", "sweep_exit_code"]
