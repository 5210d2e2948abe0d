"""Per-device network impairments (issue 5): delay, loss, rate, duplicate, corrupt.

See docs/NETWORK-IMPAIRMENTS.md. Runner usage:

    from wotbench import netimpair
    plan = netimpair.resolve_impairments(cfg.devices)          # {} when nothing is impaired
    backend, reasons = netimpair.select_backend(cfg.network.backend, plan, seed=cfg.seed)
    argv += backend.device_args(device_name)                    # app backend only
    backend.apply([netimpair.DeviceTarget.from_container(name, ctr), ...], duration_s)
    ...
    backend.remove()                                            # every path; idempotent
    run_json["network"] = {**backend.record(), "requested": cfg.network.backend, "reasons": reasons}
"""
from wotbench.netimpair.backends import AppBackend, Backend, DeviceTarget, NetemBackend, PumbaBackend
from wotbench.netimpair.errors import ImpairmentConfigError, ImpairmentError
from wotbench.netimpair.model import (BackendName, Impairment, NetworkImpairment, parse_network,
                    problems_from_validation_error)
from wotbench.netimpair.plan import DeviceImpairment, ImpairmentPlan, resolve_impairments
from wotbench.netimpair.probe import probe_ifb, probe_netem
from wotbench.netimpair.select import make_backend, select_backend

__all__ = [
    "AppBackend", "Backend", "BackendName", "DeviceImpairment", "DeviceTarget", "Impairment",
    "ImpairmentConfigError", "ImpairmentError", "ImpairmentPlan", "NetemBackend", "NetworkImpairment",
    "PumbaBackend", "make_backend", "parse_network", "probe_ifb", "probe_netem",
    "problems_from_validation_error", "resolve_impairments", "select_backend",
]
