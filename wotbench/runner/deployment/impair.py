"""Network impairments in the run flow (issue 5), on top of ``wotbench.netimpair``.

    imp = Impairments.select(cfg, kind, runtime_explicit=True)   # before anything exists
    imp.check_device_binary(wot_device_path)        # app backend: the build must know --impair
    device.impair = imp.device_args(name)           # devices only; the CD node never
    imp.apply(backend.impairment_targets(names), duration_s)   # app: at start; others: when ready
    imp.remove()                                    # every path, idempotent, never raises
    run_json["network"] = imp.record()

Exit codes when the chosen backend cannot work (``docs/NETWORK-IMPAIRMENTS.md``):
- 1 (:class:`EnvironmentProblem`): the config is fine but this host cannot do it -- an explicit
  ``network.backend: netem|pumba`` on a kernel without sch_netem or without Pumba, a wot-device
  build without ``--impair``, or netem/pumba when Docker is unreachable and ``backend: auto``
  fell back to processes;
- 2 (:class:`ConfigError`): the config asks for something the backend cannot do on any host --
  the backend's ``check()`` rejects the plan (e.g. Pumba with delay + loss on one device), or
  ``backend: process`` with ``network.backend: netem|pumba`` (they need containers).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Optional, Sequence

from wotbench import netimpair
from wotbench.deploy import fleet
from wotbench.errors import ConfigError, EnvironmentProblem
from wotbench.rundir import DeviceSummary, NetworkRecord, RunDir


class Impairments:
    def __init__(self, requested: str, plan, backend=None, reasons: Optional[list[str]] = None):
        self.requested = requested
        self.plan = plan
        self.backend = backend               # a netimpair Backend, None when nothing is impaired
        self.reasons = reasons or []
        self.applied = False
        self.removed: Optional[dict] = None

    # ------------------------------------------------------------------ choose
    @classmethod
    def select(cls, cfg, kind, runtime_explicit: bool, options=None) -> "Impairments":
        """``kind``: the runner backend's kind (``container_namespaces``: can netem/pumba enter
        the devices' network namespaces); ``runtime_explicit``: the user chose it."""
        requested = cfg.network.backend
        try:
            plan = netimpair.resolve_impairments(cfg.devices)
        except netimpair.ImpairmentConfigError as e:
            raise ConfigError(e.problems) from None
        if not plan:
            return cls(requested, plan, None, ["no device has network impairments"])
        in_engine = [g.group for i, g in enumerate(cfg.devices)
                     if g.network is not None and fleet.is_fleet(cfg, i)]
        if in_engine and requested == "auto":   # explicit netem/pumba: refused by deploy.fleet
            backend, reasons = netimpair.select_backend("app", plan, seed=cfg.seed,
                                                        options=options)
            return cls(requested, plan, backend, [
                f"app: group(s) {', '.join(in_engine)} run in wot-fleet engines, which impair "
                "each device's datagrams themselves (netem/pumba would act on every device of "
                "an engine's container at once)"] + reasons)
        if not kind.container_namespaces:
            if requested in ("netem", "pumba"):
                msg = (f"network.backend: {requested} works on device containers (it enters their "
                       f"network namespaces), but this run uses local processes; use "
                       f"network.backend: app (or auto) with the process backend")
                if runtime_explicit:
                    raise ConfigError([msg])
                raise EnvironmentProblem(msg + " (Docker is not reachable, so backend: auto chose "
                                         "processes)")
            requested_here = "app"
        else:
            requested_here = requested
        try:
            backend, reasons = netimpair.select_backend(requested_here, plan, seed=cfg.seed,
                                                        options=options)
        except netimpair.ImpairmentError as e:
            if requested_here != "auto":
                ok, _ = netimpair.make_backend(requested_here, plan, seed=cfg.seed,
                                               **(options or {}).get(requested_here, {})).available()
                if ok:  # available here, but check() rejected the plan: a config problem
                    raise ConfigError([f"network.backend: {e}"]) from None
            raise EnvironmentProblem(f"network.backend: {requested}: {e}") from None
        if not kind.container_namespaces and requested == "auto":
            reasons = ["pumba, netem: need device containers; the process backend runs devices "
                       "as local processes"] + reasons
        return cls(requested, plan, backend, reasons)

    @property
    def name(self) -> Optional[str]:
        return self.backend.name if self.backend else None

    def check_device_binary(self, wot_device: Path) -> None:
        """The app backend needs a wot-device that understands --impair (CONTRACTS §3)."""
        if self.name != "app":
            return
        try:
            r = subprocess.run([str(wot_device), "--help"], capture_output=True, text=True, timeout=10)
            text = r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired) as e:
            text = f"({e})"
        if "--impair" not in text:
            raise EnvironmentProblem(
                f"network.backend: app: {wot_device} does not support --impair (app-level "
                "impairments, CONTRACTS.md §3); rebuild it (make -C wot-device) or point "
                "WOTBENCH_DEVICE_BIN at a build that does, or remove devices[].network")

    def set_log_dir(self, path: Path) -> None:
        if self.backend is not None and hasattr(self.backend, "log_dir"):
            path.mkdir(parents=True, exist_ok=True)
            self.backend.log_dir = str(path)

    # ------------------------------------------------------------------ act
    def device_args(self, name: str, role: str) -> list[str]:
        if self.backend is None or role != "device":
            return []
        return list(self.backend.device_args(name))

    @property
    def applies_at_start(self) -> bool:
        """app: the flags are on the command line, so they are in effect as soon as the device runs."""
        return self.name == "app"

    def apply(self, targets: Sequence[Any], duration_s: float) -> None:
        if self.backend is None or self.applied:
            return
        try:
            self.backend.apply(list(targets), duration_s)
        except netimpair.ImpairmentError as e:
            raise EnvironmentProblem(f"network impairments ({self.name} backend): {e}") from None
        self.applied = True

    def remove(self, log=print) -> None:
        """Idempotent; never raises (cleanup must go on)."""
        if self.backend is None or self.removed is not None:
            return
        try:
            self.removed = self.backend.remove()
        except Exception as e:  # noqa: BLE001 - report and go on with the cleanup
            self.removed = {"removed": False, "error": str(e)}
            log(f"removing network impairments failed: {e}")
            return
        if not self.removed.get("removed", False):
            log(f"network impairments ({self.name}) not fully removed: "
                f"{json.dumps(self.removed)[:400]}")

    # ------------------------------------------------------------------ report
    def record(self, rd: Optional[RunDir] = None,
               fleet_counters: Optional[dict[str, dict]] = None) -> NetworkRecord:
        """run.json ``network``: backend.record() + requested/backend/reasons; with the app
        backend also each impaired device's counters from its device-summary.json ``impair``
        (``fleet_counters``: those of the devices in wot-fleet engines, by name:
        ``wotbench.runner.deployment.fleets.impair_counters``)."""
        if self.backend is None:
            return NetworkRecord(backend=None, requested=self.requested, reasons=self.reasons,
                                 devices={}, removed=True, removal=[])
        rec = dict(self.backend.record())
        rec.update(requested=self.requested, backend=self.backend.name, reasons=self.reasons,
                   in_effect=self.applied)
        if rd is not None:
            for name, d in rec.get("devices", {}).items():
                try:
                    summ = DeviceSummary.model_validate_json(rd.device_summary(name).read_text())
                except (OSError, ValueError):   # none, or not what a wot-device writes
                    continue
                if summ.impair is not None:
                    d["counters"] = summ.impair.model_dump()
        for name, c in (fleet_counters or {}).items():
            if name in rec.get("devices", {}):
                rec["devices"][name]["counters"] = c
        return NetworkRecord.model_validate(rec)
