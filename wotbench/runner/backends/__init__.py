"""The runtimes a run deploys on, each implementing :class:`wotbench.runner.backends.interface.RunBackend`:
``docker`` (FROM scratch images, per-run bridges, least-privilege containers) and ``process``
(local processes on loopback addresses). A run across hosts is not a runtime: each of its cells
deploys on ``docker`` (:mod:`wotbench.distributed`)."""
