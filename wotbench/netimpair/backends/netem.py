"""netem backend: tc netem inside each device's network namespace, without Pumba.

All impairment kinds of a device go into one netem qdisc per direction (so delay + loss + rate
combine, unlike Pumba). Sub-millisecond times are fine (tc takes µs). Ingress uses an ifb device.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from wotbench.netimpair.cmdrun import CommandRunner, shell_join
from wotbench.netimpair.errors import ImpairmentError
from wotbench.netimpair.plan import ImpairmentPlan
from wotbench.netimpair.probe import NO_NETEM_HINT, probe_ifb, probe_netem
from wotbench.netimpair.tc import NetnsRef, apply_commands, leftover_qdiscs, netem_args, remove_all
from wotbench.netimpair.backends.base import Backend, DeviceTarget


class NetemBackend(Backend):
    name = "netem"

    def __init__(self, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None,
                 probe=probe_netem, ifb_probe=probe_ifb):
        super().__init__(plan, runner)
        self._probe, self._ifb_probe = probe, ifb_probe
        self._refs: dict[str, tuple[NetnsRef, str]] = {}   # device -> (namespace, interface)

    def available(self) -> tuple[bool, str]:
        ok, why = self._probe()
        if not ok:
            return False, f"netem backend: {why}; {NO_NETEM_HINT}"
        return True, why

    def check(self) -> list[str]:
        problems = []
        ingress = [d for d in self.plan if d.impairment.direction in ("ingress", "both")]
        if ingress:
            ok, why = self._ifb_probe()
            if not ok:
                problems += [f"{d.key}.direction: {why}" for d in ingress]
        return problems

    @staticmethod
    def ref_for(t: DeviceTarget) -> NetnsRef:
        if t.pid:
            return NetnsRef.for_pid(int(t.pid))
        if t.netns:
            return NetnsRef(name=t.netns)
        raise ImpairmentError(f"netem backend: device {t.name} has no PID (container not running?)")

    def apply(self, targets: Sequence[DeviceTarget], duration_s: float = 0.0) -> dict[str, Any]:
        """Install the qdiscs; on the first failure undo everything done so far and raise."""
        ok, why = self.available()
        if not ok:
            raise ImpairmentError(why)
        by = self._targets_by_name(targets)
        for d in self.plan:
            t = by[d.device]
            ref = self.ref_for(t)
            self._refs[d.device] = (ref, t.interface)
            cmds = apply_commands(ref, t.interface, d.impairment.direction, ["netem", *netem_args(d.impairment)])
            done = []
            self.applied[d.device] = {"target": ref.describe(), "interface": t.interface, "applied": done}
            for argv in cmds:
                r = self.runner.run(argv)
                if not r.ok:
                    self.remove()
                    raise ImpairmentError(f"netem backend: {shell_join(argv)} failed for {d.device}: "
                                          f"{r.text() or f'exit {r.rc}'}")
                done.append(shell_join(argv))
        return self.record()

    def remove(self) -> dict[str, Any]:
        """Idempotent; never raises. Deletes root/ingress qdiscs and the ifb in every namespace
        touched (also a partly configured one), then checks that nothing is left."""
        results = []
        for dev, (ref, iface) in self._refs.items():
            res = remove_all(self.runner, ref, iface)
            res["device"] = dev
            if not res["skipped"] and not res["errors"]:
                left = leftover_qdiscs(self.runner, ref, iface)
                if left:
                    res["errors"].append("still present after removal: " + "; ".join(left))
            results.append(res)
        self.removal = results
        self.removed = all(not r["errors"] for r in results)
        return {"removed": self.removed, "devices": results}
