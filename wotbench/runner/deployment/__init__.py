"""Stage 2: what a run deploys, built from the inputs (devices, wot-fleet engines, gateway
emulators, the CD's pair, a proxy), started under the run's lease and checked ready
(-> :class:`wotbench.runner.stages.Components`)."""
