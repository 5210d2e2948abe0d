"""The run's pre-flight (issue 33): one function, :func:`preflight`, holds every refusal
``wotbench run`` can make before T0 from the config and this host; ``wotbench check`` prints
what it checked, ``run`` goes on with what it found. ``costs`` is what one device of each form
costs the host, ``capacity`` the host-limit check on those costs, ``programs`` the third-party
programs' check."""
from wotbench.runner.preflight.check import Preflight, Step, preflight

__all__ = ["Preflight", "Step", "preflight"]
