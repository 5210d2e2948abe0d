"""The test harness (paper §4.2): deploys devices and gateways on a backend
(:mod:`wotbench.runner.backends`), runs the timeline, and always cleans up. Entry points:
:func:`wotbench.runner.main.execute` (what ``wotbench run`` calls, see
:mod:`wotbench.run_command`), :func:`wotbench.runner.doctor.main`,
:func:`wotbench.runner.clean_command.main`."""
