"""Watching the host (paper §4.2): the recorder that samples host and per-component CPU during a
run (``recorder``) and the quiet-host gate before measured runs (``quiet``). What the samples
mean is :mod:`wotbench.analysis.monitor`."""
