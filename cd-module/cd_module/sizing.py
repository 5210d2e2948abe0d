"""How the contention detector is sized (paper §4.5): the CD node's service time and mode.

``auto`` takes the request-weighted mean service time of the emulated devices and the mode that
receives most requests, so a probe costs what an average request costs. It needs nothing but the
config, so the trace generator (the CD's own trace, :mod:`cd_module.trace`) and the
resolution (:mod:`wotbench.deploy.resolve`) both use it.
"""
from __future__ import annotations

from wotbench.config.distributions import make_distribution
from wotbench.config.schema import Config

CD_DEFAULT_MS = 1.0   # CD service time when no device's service time is known (all third-party)



def group_request_rates(cfg: Config) -> list[float]:
    """Offered request rate (req/s) of one device of each group: 1000 / mean RIT (ms)."""
    return [1000.0 / make_distribution(g.rit).mean for g in cfg.devices]


def resolve_cd(cfg: Config) -> Config:
    """A copy with the contention detector's ``auto`` values filled in:

    - service_time_ms: request-weighted mean device service time,
      sum_g(count_g * rate_g * S_g) / sum_g(count_g * rate_g)  (ms)
    - mode: the mode that receives most requests (ties: busy)
    """
    out = cfg.model_copy(deep=True)
    out._source = cfg._source
    cd = out.contention_detector
    if cd.service_time_ms != "auto" and cd.mode != "auto":
        return out
    # third-party servers and external endpoints have no known service time: the CD is sized
    # on the emulated devices, or, with none, on CD_DEFAULT_MS in busy mode (wotbench.config.byo)
    weights = [0.0 if g.third_party else g.count * r
               for g, r in zip(cfg.devices, group_request_rates(cfg))]
    total = sum(weights)
    if total == 0:
        if cd.service_time_ms == "auto":
            cd.service_time_ms = CD_DEFAULT_MS
        if cd.mode == "auto":
            cd.mode = "busy"
        return out
    if cd.service_time_ms == "auto":
        st = sum(w * make_distribution(g.service_time).mean
                 for w, g in zip(weights, cfg.devices)) / total
        cd.service_time_ms = round(st, 6)
    if cd.mode == "auto":
        busy = sum(w for w, g in zip(weights, cfg.devices) if g.mode == "busy")
        cd.mode = "busy" if busy >= total - busy else "sleep"
    return out
