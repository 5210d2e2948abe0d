"""Stage 1, before anything is deployed: the backend kind, host checks and limits, the binaries,
the run directory with its input files, the DTLS key (-> :class:`wotbench.runner.stages.Inputs`)."""
