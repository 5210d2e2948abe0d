"""Per-config memo for the layout functions a run calls many times (:func:`pods.slots`,
:func:`resolve.device_addresses`): each walks every device in Python, and a 250 000-device
cell called them a dozen times while it prepared (minutes on a loaded host). Keyed by the
config's full JSON, so a changed config (``resolve`` fills ``engine``) is a new key; values are
immutable tuples, callers get a fresh list."""
from __future__ import annotations

import functools
from typing import Callable, TypeVar

from wotbench.config.schema import Config

T = TypeVar("T")
KEEP = 2                       # configs remembered per function (a run uses one or two; 10^6
                               # devices hold ~250 MB of layout each)


def per_config(fn: Callable[..., list[T]]) -> Callable[..., list[T]]:
    memo: dict[tuple, tuple[T, ...]] = {}

    @functools.wraps(fn)
    def wrapper(cfg: Config, *args, **kwargs) -> list[T]:
        key = (cfg.model_dump_json(), args, tuple(sorted(kwargs.items())))
        hit = memo.get(key)
        if hit is None:
            hit = tuple(fn(cfg, *args, **kwargs))
            if len(memo) >= KEEP:
                memo.pop(next(iter(memo)))
            memo[key] = hit
        return list(hit)

    wrapper.uncached = fn      # type: ignore[attr-defined]
    return wrapper
