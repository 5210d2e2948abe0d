"""WoTbench: contention-aware Web of Things emulation testbed."""
__version__ = "0.1.0"
