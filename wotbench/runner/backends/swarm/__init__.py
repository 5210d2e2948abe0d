"""backend: swarm: a run across the Swarm nodes labelled for WoTbench (docs/CLUSTER.md)."""
