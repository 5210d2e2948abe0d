"""The runner's own verbs: ``wotbench doctor`` and ``wotbench clean``."""
