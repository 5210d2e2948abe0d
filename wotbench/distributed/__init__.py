"""WoTbench across hosts (issue 24, docs/CLUSTER.md): a run split into cells, one per Swarm
node, each a whole single-host WoTbench run on its own node's cores and clock. It sits above
the runner (``wotbench.dispatch`` chooses it for ``backend: swarm``); nothing below imports it.

The coordinator's side: ``coordinator`` (the run: agents, split, clocks, T0, fetch, merge,
report), ``agents`` (the conversation with each cell), ``service`` (the agents' Swarm service),
``clean`` (``wotbench clean --cluster``), ``agentimage`` (the agent's image).
The cell's side: ``agent`` (the container's entry point), ``launcher``, ``cell`` (the runner
for this node's share, given its share and T0 source at construction), ``nodeclean``.
Between them: ``wire`` (the messages).
Pure pieces, no Docker: ``split`` (whole pods to cells, balancing offered load per device
core), ``tracesplit``, ``targets``, ``clock`` (each cell's clock offset by an NTP-style
exchange, the bound, T0 on the cell's clock), ``verdict`` (per-cell verdicts; the run's is the
worst cell's), ``merge`` and ``mergedsummary`` (the cells' run directories into one,
percentiles from the raw per-request data), ``answer`` (which host a sweep point's answer
names), ``report``/``report_data``/``report_figures`` (the merged report.html).
A connected config (docs/CONNECTED.md): ``connected_coord`` (one edge server, the shares),
``connected_cell`` (a cell's engines and applications), ``connected_merge`` (the analysis).
"""
