"""WoTbench across hosts (issue 24, docs/CLUSTER.md): a run split into cells, one per Swarm
node, each a whole WoTbench run on its own node's cores and clock.

Pure pieces, no Docker: ``split`` (whole pods to cells, balancing offered load per device
core), ``clock`` (each cell's clock offset by an NTP-style exchange, the bound, T0 on the
cell's clock), ``verdict`` (per-cell verdicts; the run's is the worst cell's) and ``merge``
(the cells' run directories into one, percentiles from the raw per-request data).
"""
