"""The test harness (paper §4.2): builds images, deploys devices and gateways, runs the timeline,
monitors the host and always cleans up. Entry points: :func:`wotbench.runner.main.run`,
:func:`wotbench.runner.doctor.main`, :func:`wotbench.runner.cleanup.main`."""
