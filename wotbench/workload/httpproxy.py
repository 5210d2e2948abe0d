"""The URI mapping of an HTTP->CoAP proxy in the path (``gateways.proxy.mode: http``, the
paper's Figure 1; docs/HTTP-PROXY.md).

The GE speaks HTTP/1.1 to the proxy; each request names its device by carrying the device's
CoAP URI in the HTTP request target, after the proxy's path prefix (RFC 8075 section 5, the
form Californium's proxy2 serves under ``/proxy/``)::

    coap://10.77.0.3:5683/r0  ->  http://10.77.0.200:8080/proxy/coap://10.77.0.3:5683/r0

The trace is written with these URIs (:func:`via`, used by the generator); the analysis maps
the path the GE records back to the device's resource path (:func:`device_path`), which the
device logs, so the device logs join the GE's requests and R splits into "proxy + network" and
"device". The trace's device id column still names the device.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd

from wotbench.config.schema import Config
from wotbench.deploy.resolve import proxy_address
from wotbench.workload.formats import authority

# what the GE records as the path of a proxied request: "proxy/coap://10.77.0.3:5683/r0"
_TO_DEVICE_PATH = re.compile(r"^.*?coaps?://(?:\[[^\]]*\]|[^/]*)/")


def via(cfg: Config) -> str:
    """What goes before every device's CoAP URI in the trace: ``http://PROXY:PORT/proxy/``
    with an HTTP->CoAP proxy, else nothing."""
    p = cfg.gateways.proxy
    if p is None or not p.http:
        return ""
    return f"http://{authority(proxy_address(cfg))}{p.http_prefix}"


def target_uri(proxy_host: str, proxy_port: int, prefix: str, coap_uri: str) -> str:
    """The HTTP URI that asks the proxy at ``proxy_host:proxy_port`` for ``coap_uri``."""
    host = f"[{proxy_host}]" if ":" in proxy_host else proxy_host
    return f"http://{host}:{proxy_port}{prefix}{coap_uri}"


def device_path(path: str) -> Optional[str]:
    """The device's resource path in a proxied request's path (``proxy/coap://H:P/r0`` ->
    ``r0``); None when it carries no CoAP URI."""
    m = _TO_DEVICE_PATH.match(path)
    return path[m.end():] if m else None


def to_device_paths(req: pd.DataFrame) -> pd.DataFrame:
    """``req`` (the GEs' requests) with each path the device's own (the categories renamed:
    paths that carry no CoAP URI stay as they are; two proxied paths of one resource, which
    differ only in the device address, become one category)."""
    col = req["path"].astype("category")
    mapped = [device_path(str(c)) or str(c) for c in col.cat.categories]
    names = sorted(set(mapped))
    new_code = np.array([names.index(m) for m in mapped] + [-1], np.int64)  # [-1]: NaN stays
    out = req.copy()
    out["path"] = pd.Categorical.from_codes(new_code[col.cat.codes.to_numpy()], names)
    return out
