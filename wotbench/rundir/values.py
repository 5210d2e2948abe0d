"""Plain values for the run-directory models: a float or None (JSON has no NaN), and a
dict-built block made JSON-clean (numpy scalars to Python, NaN/inf to None) before it is
validated into its model."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def fnum(x: Any) -> float | None:
    """float or None for NaN/inf (JSON has no NaN)."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def json_clean(x: Any) -> Any:
    """numpy scalars to Python, NaN/inf to None (JSON has neither), recursively: what the
    dict-built blocks go through before they become models."""
    if isinstance(x, dict):
        return {str(k): json_clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_clean(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, np.bool_):
        return bool(x)
    return x
