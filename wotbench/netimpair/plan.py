"""Resolve group-level ``network:`` settings into one Impairment per device."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from wotbench.netimpair.errors import ImpairmentConfigError
from wotbench.netimpair.model import Impairment, NetworkImpairment, parse_network


@dataclass(frozen=True)
class DeviceImpairment:
    device: str            # device name, e.g. "cpu-3"
    group: str
    key: str               # config key it came from, e.g. "devices[0].network" (for messages)
    impairment: Impairment


@dataclass
class ImpairmentPlan:
    """Impaired devices only (devices without impairments are absent), in config order."""
    devices: dict[str, DeviceImpairment] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.devices)

    def __iter__(self):
        return iter(self.devices.values())

    def get(self, device: str) -> Optional[DeviceImpairment]:
        return self.devices.get(device)


def _group_attr(g: Any, name: str, default: Any = None) -> Any:
    return g.get(name, default) if isinstance(g, Mapping) else getattr(g, name, default)


def resolve_impairments(groups: Iterable[Any],
                        device_names: Optional[Mapping[str, Sequence[str]]] = None) -> ImpairmentPlan:
    """Per-device impairments from the config's device groups.

    ``groups``: ``config.devices`` (objects or dicts with ``group``, ``count``, ``network``).
    ``device_names``: group -> its device names; default ``<group>-<i>`` for i < count
    (contract §5). ``network`` may be None, a dict (validated here) or a NetworkImpairment.
    Raises ImpairmentConfigError naming the key when an override names no device of the group.
    """
    plan, problems = ImpairmentPlan(), []
    for gi, g in enumerate(groups):
        gname = _group_attr(g, "group")
        key = f"devices[{gi}].network"
        raw = _group_attr(g, "network")
        if raw is None:
            continue
        if not isinstance(raw, NetworkImpairment):
            dump = raw.model_dump() if hasattr(raw, "model_dump") else raw
            try:
                raw = parse_network(dump, key)
            except ImpairmentConfigError as e:
                problems += e.problems
                continue
        names = list(device_names[gname]) if device_names and gname in device_names else \
            [f"{gname}-{i}" for i in range(int(_group_attr(g, "count", 1)))]
        for dev in raw.overrides:
            if dev not in names:
                shown = f"{names[0]}..{names[-1]}" if len(names) > 1 else ", ".join(names)
                problems.append(f"{key}.overrides.{dev}: no device named {dev} in group {gname} ({shown})")
        base = raw.base()   # Impairment is frozen: devices without an override share it
        for name in names:
            imp = raw.for_device(name) if name in raw.overrides else base
            if imp.is_empty():
                continue
            k = f"{key}.overrides.{name}" if name in raw.overrides else key
            plan.devices[name] = DeviceImpairment(name, gname, k, imp)
    if problems:
        raise ImpairmentConfigError(problems)
    return plan
