"""The test harness (paper §4.2): deploys devices and gateways on a backend
(:mod:`wotbench.runner.backends`), runs the timeline, and always cleans up. Entry points:
:class:`wotbench.runner.main.Runner` (what ``wotbench run`` runs on one host and each cell
of a run across hosts, see :mod:`wotbench.run_command` and :mod:`wotbench.distributed`), :func:`wotbench.runner.commands.doctor.main`,
:func:`wotbench.runner.commands.clean_command.main`."""
