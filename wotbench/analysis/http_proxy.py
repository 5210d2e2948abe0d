"""The analysis of a run through an HTTP->CoAP proxy (``gateways.proxy.mode: http``, the
paper's Figure 1; docs/HTTP-PROXY.md): the paths the GE recorded mapped to the devices' own
(:func:`wotbench.workload.httpproxy.to_device_paths`, so the device logs join the GE's requests by path and time, as behind a CoAP proxy, and R
splits into "proxy + network" and "device"), and where the proxy's losses go.

Loss rules (after :func:`wotbench.analysis.loss.classify`), for a request whose device keeps a
log (wot-device); the proxy is part of the system under test, and so is its CoAP leg to the
device, whose losses its CoAP retransmissions cover:

=====================================  =====================================================
GE outcome                             cause
=====================================  =====================================================
HTTP 502 Bad Gateway / 504 Gateway     ``device_late`` when the device answered after the
Timeout (the proxy's own answers:      GE's timeout (the proxy gave up on a slow device);
it could not get, or translate, the    else ``proxy``
device's answer)
HTTP 503 Service Unavailable           ``refused_503`` when the device logged it (its 5.03,
                                       translated); else ``proxy`` (the proxy refused it;
                                       a device without a log: ``refused_503``, not placed)
timeout, the device never logged it    ``proxy`` (was ``to_device``): TCP delivered it to
                                       the proxy, which never got it to the device
timeout, the device answered in time   ``proxy`` (was ``from_device``): the proxy did not
                                       pass the answer on in time
error without a status, sent, in a     ``proxy`` (was ``interrupted``): an answer the GE could
run that was not interrupted           not parse as HTTP (its ``protocol_errors``)
=====================================  =====================================================

Everything else keeps its cause (``device_late``, other statuses ``sut_error``, a connection
the proxy refused or reset ``sut_reset``, a GE send failure ``local_send``, ...). So the testbed's own losses (verdict ``testbed_loss``) are only
what the GE itself failed to send.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from wotbench.analysis import loss as lossm

PROXY_ANSWERS = ("502", "504")   # RFC 9110 15.6.3/15.6.5: a gateway's own statuses


def reclassify(cause: np.ndarray, req: pd.DataFrame, matched: pd.DataFrame, logged: np.ndarray,
               timeout_ms: float, interrupted: bool) -> np.ndarray:
    """``cause`` (from ``loss.classify``) with the proxy's losses placed (module table);
    ``logged``: per request row, whether its device keeps a log; ``interrupted``: the run was."""
    out = cause.copy()
    idx = lossm.CAUSES.index
    code = req["code"].astype(object).where(req["code"].notna(), "").astype(str).to_numpy()
    answered_at = lossm.answer_times(len(req), matched)
    reached = ~np.isnan(answered_at)
    late = reached & (answered_at > req["sent"].to_numpy(np.float64) + timeout_ms * 1e6)
    gateway = np.isin(code, PROXY_ANSWERS) & (out == idx("sut_error"))
    out[gateway & late] = idx("device_late")
    out[gateway & ~late] = idx("proxy")
    out[(out == idx("refused_503")) & logged & ~reached] = idx("proxy")
    out[np.isin(out, [idx("to_device"), idx("from_device")])] = idx("proxy")
    if not interrupted:   # sent, no status: the proxy's answer was no HTTP the GE could parse
        out[out == idx("interrupted")] = idx("proxy")
    return out
