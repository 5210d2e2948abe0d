"""What every impairment backend offers the runner.

Life cycle (the runner's side):

    backend, why = select_backend(requested, plan)        # raises ImpairmentError if unusable
    extra = backend.device_args(device_name)              # add to the wot-device command line
    ... start devices, wait until ready ...
    record = backend.apply(targets, duration_s)           # after devices are up
    ... test ...
    backend.remove()                                      # cleanup, on every path; idempotent
    run_json["network"] = backend.record()
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from wotbench.netimpair.cmdrun import CommandRunner, SubprocessRunner
from wotbench.netimpair.plan import ImpairmentPlan


@dataclass
class DeviceTarget:
    """One running device as the runner knows it."""
    name: str                         # device name, e.g. "cpu-3" (the plan's key)
    container: Optional[str] = None   # Docker container name (Pumba targets it by name)
    pid: Optional[int] = None         # its init PID (netem backend: nsenter -t PID -n)
    netns: Optional[str] = None       # or a named netns (ip netns exec NAME), for tests
    interface: str = "eth0"

    @classmethod
    def from_container(cls, name: str, container: Any, interface: str = "eth0") -> "DeviceTarget":
        """From a docker SDK Container: its name, and State.Pid from its (reloaded) attrs."""
        try:
            container.reload()
        except Exception:  # noqa: BLE001 - keep what we have; apply() reports a missing PID
            pass
        pid = (container.attrs.get("State") or {}).get("Pid") or None
        return cls(name=name, container=container.name, pid=pid, interface=interface)


class Backend:
    name = "base"

    def __init__(self, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None):
        self.plan = plan
        self.runner: CommandRunner = runner or SubprocessRunner()
        self.applied: dict[str, dict[str, Any]] = {}
        self.removal: list[dict[str, Any]] = []
        self.removed = False

    # -- decide ---------------------------------------------------------------------------
    def available(self) -> tuple[bool, str]:
        """Can this backend work on this machine at all? (ok, reason)."""
        raise NotImplementedError

    def check(self) -> list[str]:
        """Problems with the plan for this backend, as ``"key.path: message"`` strings."""
        return []

    # -- act ------------------------------------------------------------------------------
    def device_args(self, device: str) -> list[str]:
        """Extra wot-device arguments (only the app backend has any)."""
        return []

    def apply(self, targets: Sequence[DeviceTarget], duration_s: float) -> dict[str, Any]:
        raise NotImplementedError

    def remove(self) -> dict[str, Any]:
        raise NotImplementedError

    # -- report ---------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """For run.json ``network`` and the report header: exactly what was applied per device."""
        return {
            "backend": self.name,
            "devices": {d.device: {"describe": d.impairment.describe(), "key": d.key,
                                   "impairment": d.impairment.model_dump(exclude_none=True),
                                   **self.applied.get(d.device, {"applied": []})}
                        for d in self.plan},
            "removed": self.removed,
            "removal": self.removal,
        }

    def _targets_by_name(self, targets: Sequence[DeviceTarget]) -> dict[str, DeviceTarget]:
        from wotbench.netimpair.errors import ImpairmentError
        by = {t.name: t for t in targets}
        missing = [d.device for d in self.plan if d.device not in by]
        if missing:
            raise ImpairmentError(f"{self.name} backend: no running container given for impaired device(s) "
                                  f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        return by
