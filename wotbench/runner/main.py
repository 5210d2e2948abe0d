"""``wotbench run``: one emulation run from config to verdict (paper §4.2 test harness).

Flow: network-impairment backend chosen (fails early) -> prerequisites (doctor) and stale
binaries (make) -> images (FROM scratch, local) -> inputs (resolved config, plan.json, trace/)
in ``<out_root>/<name>-<UTC>/`` -> network -> devices + CD node -> readiness (CoAP ping) ->
impairments applied (netem/pumba; app flags are on the device command lines) -> monitor ->
GEs with absolute start times -> wait (bounded) -> impairments removed -> SIGTERM devices (they
flush their logs) -> remove every container and network -> run.json -> analysis + report.

Timeline (CLOCK_MONOTONIC, the same in every container):
  T0 = now + lead (time to create and start the GE containers and let them load the trace);
  the CD-GE starts at T0 and probes the CD node for calibration_s + duration_s;
  the main GE(s) start at T0 + calibration_s (``run.json`` ``test.start_mono_ns``);
  the wait ends when every GE has exited, bounded by
  test start + duration_s + timeout_ms + a margin; GEs still running then get SIGTERM.

Cleanup runs on every path (normal end, failed step, Ctrl-C, SIGTERM): SIGINT/SIGTERM become
an :class:`Interrupted` exception; the ``finally`` block ignores further signals while it
removes the network impairments, stops the GEs and devices (so their partial logs are
written), removes every container and network labelled with this run id, and writes run.json. A SIGKILLed harness cannot clean up:
``wotbench clean`` removes what it left.

Exit codes: 0 trustworthy, 3 flagged (verdict, or a component failed), 2 bad input,
1 environment failure, 130/143 interrupted.
"""
from __future__ import annotations

import json
import os
import platform
import signal
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from wotbench.errors import ConfigError, EnvironmentProblem, WotbenchError
from wotbench.runner import cd_module, doctor, images
from wotbench.runner.components import DeviceRun, GeRun
from wotbench.runner.containers import NOBODY
from wotbench.runner.monitor import Monitor
from wotbench.runner.progress import ProgressView
from wotbench.runner.readiness import wait_ready

STOP_GRACE_S = 15.0       # devices: SIGTERM -> exit (they write their logs)
END_MARGIN_S = 15.0       # added to the bounded wait for the GEs


HARNESS_NICE = 10


def lower_priority(nice: int) -> None:
    """Raise this process's nice value to ``nice`` (never further: runs in a sweep repeat this,
    and an unprivileged process cannot lower it again)."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current < nice:
        os.nice(nice - current)


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def log(msg: str) -> None:
    print(f"wotbench: {msg}", flush=True)


def _writable_dir(path: Path) -> Path:
    """A directory the unprivileged (uid 65534) programs can write into."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    else:
        path.chmod(0o777)
    return path


def _utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


class Runner:
    def __init__(self, config_path, out_root="reports", backend=None):
        self.config_path = Path(config_path)
        self.out_root = Path(out_root)
        self.backend_name = backend
        self.run_dir: Path | None = None
        self.run_id: str | None = None
        self.backend = None
        self.monitor: Monitor | None = None
        self.cfg = self.resolved = self.plan = None
        self.devices: list[DeviceRun] = []
        self.ges: list[GeRun] = []          # main GEs
        self.cd_ge: GeRun | None = None
        self.cd: cd_module.CdSettings | None = None
        self.failures: list[dict] = []
        self.warnings: list[str] = []
        self.timeline: dict = {}
        self.ge_exit: dict[str, int | None] = {}
        self.interrupted: int | None = None
        self.error: BaseException | None = None
        self.aborted = False                # the test could not complete (GE failure)
        self.exit_hint: int | None = None   # 2 when a GE rejected its input
        self.started = False
        self.hogs = None
        self.contention: list[dict] = []
        self.impair = None                  # runner.impair.Impairments (network impairments)

    # -------------------------------------------------------------- signals
    def _raise_signal(self, signum, frame):
        raise Interrupted(signum)

    def _during_cleanup(self, signum, frame):
        log(f"{signal.Signals(signum).name} received: cleaning up, please wait")

    def _set_handlers(self, handler) -> dict:
        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def fail(self, component: str, what: str) -> None:
        self.failures.append({"component": component, "what": what})
        log(f"FAILURE {component}: {what}")

    # -------------------------------------------------------------- main
    def execute(self) -> int:
        old = self._set_handlers(self._raise_signal)
        # prepare() pins the harness to the OS cores; a sweep or capacity search runs many tests
        # in this process, and each must plan with the cores the user gave, not the last pin.
        affinity = os.sched_getaffinity(0)
        try:
            try:
                self.prepare()
                self.deploy()
                self.run_test()
                self.remove_impairments()
                self.stop_components()
            except Interrupted as e:
                self.interrupted = e.signum
                log(f"{e} received: stopping the run")
            except WotbenchError as e:
                self.error = e
            except Exception as e:  # a bug: still clean up, then show the traceback
                self.error = e
                traceback.print_exc()
            finally:
                self._set_handlers(self._during_cleanup)
                self.cleanup()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            os.sched_setaffinity(0, affinity)
        return self.conclude()

    # -------------------------------------------------------------- 1-3: inputs
    def prepare(self) -> None:
        from wotbench import tracegen
        from wotbench.config import dump_resolved, load_config, resolve
        from wotbench.plan import make_plan

        cfg = load_config(self.config_path)
        name = self.backend_name or cfg.backend
        explicit = name != "auto"
        if name == "auto":
            try:
                doctor.docker_client()
                name = "docker"
            except Exception:
                name = "process"
                log("Docker not reachable: using the process backend")
        if name not in ("docker", "process"):
            raise ConfigError(f"backend: unknown backend {name!r} (docker | process | auto)")
        self.backend_name = name
        # network impairments: choose the backend before anything is created (fail early)
        from wotbench.runner.impair import Impairments
        self.impair = Impairments.select(cfg, name, explicit)
        if self.impair.backend is not None:
            log(f"network impairments on {len(self.impair.plan.devices)} device(s): "
                f"{self.impair.name} backend ({self.impair.reasons[-1]})")
        checks = doctor.run_checks(name, quick=True)
        bad = [c for c in checks if c.status == doctor.FAIL]
        if bad:
            raise EnvironmentProblem("prerequisites missing:\n" + "\n".join(
                f"  {c.name}: {c.detail}" + (f"\n    fix: {c.fix}" if c.fix else "") for c in bad))
        for c in checks:
            if c.status == doctor.WARN and c.name in ("free cores", "leftovers", "collectl"):
                self.warnings.append(f"{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
                log(f"warning: {self.warnings[-1]}")
        self.binaries = images.ensure_binaries(log)
        self.impair.check_device_binary(self.binaries["wot-device"])

        if name == "process":  # devices on loopback addresses: 172.28.0.10 -> 127.0.0.10
            cfg = cfg.model_copy(deep=True)
            cfg.network.subnet = "127.0.0.0/8"
            self.warnings.append("process backend: cpu_quota and memory_mb are not enforced")
        self.cfg = cfg
        self.resolved = resolve(cfg)
        self.plan = make_plan(self.resolved)
        self.cd = cd_module.settings(self.resolved)

        self.out_root.mkdir(parents=True, exist_ok=True)
        base = f"{cfg.name}-{_utc_stamp()}"
        run_dir, k = self.out_root / base, 1
        while True:
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                k += 1
                run_dir = self.out_root / f"{base}-{k}"
        self.run_dir, self.run_id = run_dir.resolve(), run_dir.name
        log(f"run {self.run_id} ({name} backend) -> {self.run_dir}")
        self.impair.set_log_dir(self.run_dir / "network")
        dump_resolved(self.resolved, run_dir / "config.resolved.yaml")
        self.plan.write(run_dir / "plan.json")
        for w in self.plan.warnings:
            log(f"plan: {w}")
        summary = tracegen.write_trace(self.resolved, run_dir / "trace")
        self.trace_summary = summary
        for w in getattr(summary, "warnings", []):
            log(f"trace: {w}")
            self.warnings.append(f"trace: {w}")
        if self.plan.os_cores:  # the harness (and its monitor thread) stays on the OS cores
            os.sched_setaffinity(0, self.plan.os_cores)
        # Lower the harness's own priority (inherited by its monitor thread and collectl): on a
        # host too small for a dedicated GE core, its once-a-second sampling otherwise delays the
        # GE's wake-ups by milliseconds. Process-backend emulators are put back to 0 at spawn.
        lower_priority(HARNESS_NICE)

    # -------------------------------------------------------------- 4-6: deploy
    def _build_components(self) -> None:
        from wotbench.config import cd_node_address, device_addresses

        rd, cfg, plan = self.run_dir, self.resolved, self.plan
        groups = {g.group: g for g in cfg.devices}
        for a in device_addresses(cfg):
            g = groups[a.group]
            self.devices.append(DeviceRun(
                name=a.name, id=a.id, group=a.group, role="device", address=a.ip, port=a.port,
                cpuset=plan.devices[a.name], resources=rd / "trace" / "resources" / f"{a.name}.csv",
                log_dir=_writable_dir(rd / "devices" / a.name), threads=g.threads,
                cpu_quota=g.cpu_quota, memory_mb=g.memory_mb,
                impair=self.impair.device_args(a.name, "device")))
        if self.cd.enabled:
            a = cd_node_address(cfg)
            self.devices.append(DeviceRun(
                name=a.name, id=a.id, group=a.group, role="cd-node", address=a.ip, port=a.port,
                cpuset=plan.cd_node_cpuset, resources=rd / "trace" / "resources" / f"{a.name}.csv",
                log_dir=_writable_dir(rd / "devices" / a.name), threads=1, memory_mb=32))
            self.cd_ge = GeRun(name=cd_module.CD_GE, role="cd-ge", cpu=plan.cd_ge_core,
                               trace=rd / "trace" / "cd-trace.csv",
                               out_dir=_writable_dir(rd / "cd-ge"), wait="hybrid",
                               msg_type="con", timeout_ms=cfg.gateways.timeout_ms)
        n = cfg.gateways.count
        for k in range(n):
            trace = rd / "trace" / ("trace.csv" if n == 1 else f"ge-{k}.csv")
            self.ges.append(GeRun(name=f"ge-{k}", role="ge", cpu=plan.ge_cores[f"ge-{k}"],
                                  trace=trace, out_dir=_writable_dir(rd / "ge" / f"ge-{k}"),
                                  wait=cfg.gateways.wait, msg_type=cfg.gateways.message_type,
                                  timeout_ms=cfg.gateways.timeout_ms,
                                  retransmit=cfg.gateways.retransmit))

    def deploy(self) -> None:
        self._build_components()
        if self.backend_name == "docker":
            from wotbench.runner.docker_backend import DockerBackend
            self.backend = DockerBackend(doctor.docker_client(), self.run_id, log)
        else:
            from wotbench.runner.process_backend import ProcessBackend
            self.backend = ProcessBackend(self.run_id, self.run_dir, log)
        self.backend.prepare(self.binaries)
        from wotbench.runner.hogs import Hogs
        self.hogs = Hogs(self.backend, self.run_id, self.run_dir / "contention", log)
        self.hogs.prepare(self.resolved)
        gateways = [g.name for g in self.ges] + ([self.cd_ge.name] if self.cd_ge else [])
        self.backend.setup_network(self.resolved.network.subnet,
                                   {d.name: d.address for d in self.devices}, gateways)
        t = time.monotonic()
        self.started = True
        if self.backend_name == "docker":  # container creation is slow: a few in parallel
            with ThreadPoolExecutor(max_workers=8) as pool:
                for fut in [pool.submit(self.backend.start_device, d) for d in self.devices]:
                    fut.result()
        else:  # the main thread: the parent-death signal fires when the *spawning thread* ends
            for d in self.devices:
                self.backend.start_device(d)
        if self.impair.applies_at_start:  # app: the --impair flags are in effect already
            self.impair.apply([], self._impair_duration_s())
        log(f"{len(self.devices)} device(s) started in {time.monotonic() - t:.1f} s; "
            "waiting for CoAP pings")
        names = {d.name for d in self.devices}

        def dead():
            return {n: f"exited with {c}" for n, c in self.backend.exited(names).items()}
        took = wait_ready([(d.name, d.address, d.port) for d in self.devices],
                          timeout_s=15 + 0.05 * len(self.devices), dead=dead)
        log(f"all devices answer CoAP ping ({took:.2f} s)")
        self.apply_impairments()

    def _impair_duration_s(self) -> float:
        """How long a time-limited impairment (pumba --duration) must last: calibration, test,
        the GE timeout and the end margin, plus the start lead (bounded by 10 s)."""
        cfg = self.resolved
        cal = self.cd.calibration_s if self.cd_ge else 0.0
        return cal + cfg.duration_s + cfg.gateways.timeout_ms / 1000 + END_MARGIN_S + 10.0

    def apply_impairments(self) -> None:
        """netem/pumba: into the running device containers' namespaces (never the CD node)."""
        imp = self.impair
        if imp is None or imp.backend is None or imp.applied:
            return
        from wotbench.netimpair import DeviceTarget
        targets = [DeviceTarget.from_container(d.name, self.backend.ctr[d.name])
                   for d in self.devices if d.role == "device" and imp.plan.get(d.name)]
        log(f"applying network impairments ({imp.name} backend) to {len(targets)} device(s)")
        imp.apply(targets, self._impair_duration_s())

    def remove_impairments(self) -> None:
        if self.impair is not None and self.impair.backend is not None \
                and self.impair.removed is None:
            self.impair.remove(log)
            if self.impair.name != "app":
                log(f"network impairments removed ({self.impair.name} backend)")

    # -------------------------------------------------------------- 7-9: test
    def run_test(self) -> None:
        cfg = self.resolved
        # per-component CPU accounting always; collectl only with monitor.enabled
        self.monitor = Monitor(self.run_dir / "monitor", cfg.monitor.interval_s,
                               cpus=self.plan.os_cores or None,
                               collectl=cfg.monitor.enabled, log=log)
        self.monitor.start()
        for d in self.devices:
            pid = self.backend.pid(d.name)
            if pid:
                self.monitor.watch(d.name, d.role, pid, self.backend.own_cgroup)

        all_ges = self.ges + ([self.cd_ge] if self.cd_ge else [])
        requests = getattr(self.trace_summary, "requests", 0)
        lead_s = 1.0 + (0.4 if self.backend_name == "docker" else 0.05) * len(all_ges) \
            + requests / 2e6
        cal_ns = int(self.cd.calibration_s * 1e9) if self.cd_ge else 0
        t0 = time.monotonic_ns() + int(lead_s * 1e9)
        test_start = t0 + cal_ns
        test_end = test_start + int(cfg.duration_s * 1e9)
        if self.cd_ge:
            self.cd_ge.start_at = t0
        for g in self.ges:
            g.start_at = test_start
        self.timeline = {"t0_mono_ns": t0, "calibration": {"start_mono_ns": t0,
                                                            "end_mono_ns": test_start},
                         "test": {"start_mono_ns": test_start, "duration_s": cfg.duration_s}}
        self.contention = self.hogs.launch(self.resolved, self.plan, test_start)
        for g in all_ges:
            self.backend.create_ge(g)
        for g in ([self.cd_ge] if self.cd_ge else []) + self.ges:
            self.backend.start_ge(g)
            pid = self.backend.pid(g.name)
            if pid and self.monitor:
                self.monitor.watch(g.name, g.role, pid, self.backend.own_cgroup)
        late = time.monotonic_ns() - t0
        if late > 0:
            self.warnings.append(f"gateways started {late / 1e6:.0f} ms after T0: increase the lead")
        log(f"T0 in {(t0 - time.monotonic_ns()) / 1e9:.1f} s: calibration {cal_ns / 1e9:g} s, "
            f"then the test for {cfg.duration_s:g} s")

        deadline = test_end + int((cfg.gateways.timeout_ms / 1000 + END_MARGIN_S) * 1e9)
        dev_names = {d.name for d in self.devices}
        running = {g.name: g for g in all_ges}
        dead_devices: set[str] = set()
        next_check = 0.0
        with ProgressView([g.out_dir / "progress.bin" for g in self.ges],
                          self.cd_ge.out_dir / "progress.bin" if self.cd_ge else None,
                          test_start, test_end, t0) as view:
            while running:
                view.update()
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 1.0
                    gone = self.backend.exited(dev_names - dead_devices)
                    for name, code in sorted(gone.items()):
                        dead_devices.add(name)
                        self.fail(name, f"{self.backend.describe_exit(name)} during the test "
                                  f"(exit code {code})")
                    for name in list(running):
                        code = self.backend.exit_code(name)
                        if code is None:
                            continue
                        g = running.pop(name)
                        self.ge_exit[name] = code
                        if code != 0:
                            self._ge_failed(g, code, running)
                if time.monotonic_ns() > deadline:
                    for name in list(running):
                        self.fail(name, "still running at the bounded end of the test; stopped")
                        self.backend.signal(name, signal.SIGTERM)
                        self.ge_exit[name] = self.backend.wait(name, 10)
                        running.pop(name)
                    break
                time.sleep(0.25)
            view.update()

    def _ge_failed(self, g: GeRun, code: int, running: dict) -> None:
        out = g.out_dir / "container.log"
        self.backend.save_output(g.name, out)
        why = {2: "rejected its input (exit 2)", 1: "environment failure (exit 1)"}.get(
            code, f"exited with {code}")
        self.fail(g.name, f"gateway emulator {why}; see {out.relative_to(self.run_dir)}"
                  if out.exists() else f"gateway emulator {why}")
        if code == 2:
            self.exit_hint = 2
        if g.role == "ge":  # a main GE is gone: the test is compromised, stop the rest
            self.aborted = True
            for name in list(running):
                self.backend.signal(name, signal.SIGTERM)

    # -------------------------------------------------------------- 10: stop
    def stop_components(self) -> None:
        """Stop GEs that still run, then SIGTERM every device and wait for its logs. Components
        never created (deploy failed first) are skipped: pid() is None for such a GE, created()
        False for such a device."""
        if self.backend is None:
            return
        for g in self.ges + ([self.cd_ge] if self.cd_ge else []):
            if self.backend.pid(g.name) and self.backend.exit_code(g.name) is None:
                self.backend.signal(g.name, signal.SIGTERM)
                code = self.backend.wait(g.name, 10)
                self.ge_exit.setdefault(g.name, code)
        names = [d.name for d in self.devices if self.backend.created(d.name)]
        already = self.backend.exited(set(names))
        alive = [n for n in names if n not in already]
        for n in alive:
            self.backend.signal(n, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for n in alive:
            code = self.backend.wait(n, max(0.1, deadline - time.monotonic()))
            if code is None:
                self.backend.signal(n, signal.SIGKILL)
                self.fail(n, f"did not stop within {STOP_GRACE_S:g} s of SIGTERM; killed, "
                          "its device log is lost")
            elif code != 0:
                self.fail(n, f"exited with {code} after SIGTERM")
        reported = {f["component"] for f in self.failures}
        for d in self.devices:
            if not self.backend.created(d.name):
                continue    # never created: nothing to stop, no output to save
            if d.name in reported or d.name in already:
                self.backend.save_output(d.name, d.log_dir / "container.log")
            if d.name not in reported and not (d.log_dir / "device-log.csv").exists():
                self.fail(d.name, "no device-log.csv written")

    # -------------------------------------------------------------- cleanup + run.json
    def cleanup(self) -> None:
        self.remove_impairments()   # before the containers go (netem needs their namespaces)
        if (self.interrupted or self.error) and self.backend is not None and self.started:
            try:
                self.stop_components()
            except Exception as e:
                log(f"stopping components failed: {e}")
        if self.hogs is not None:
            self.hogs.stop()
        if self.monitor is not None:
            self.monitor.stop()
        if self.backend is not None:
            try:
                removed = self.backend.cleanup()
                log("removed " + ", ".join(f"{v} {k}" for k, v in removed.items()))
            except Exception as e:
                log(f"cleanup failed: {e}; run `wotbench clean`")
        if self.run_dir is not None:
            self.write_run_json()

    def host_record(self) -> dict:
        u = os.uname()
        host = {"hostname": u.nodename, "kernel": u.release, "machine": u.machine,
                "cpus": os.cpu_count(), "python": platform.python_version(),
                "harness_cpus": sorted(os.sched_getaffinity(0))}
        if self.backend_name == "docker" and self.backend is not None:
            try:
                v = self.backend.client.version()
                host["docker"] = v.get("Version")
            except Exception:
                pass
        return host

    def write_run_json(self) -> Path:
        rd = self.run_dir
        tl = self.timeline
        err = self.error
        rec = {
            "name": self.cfg.name if self.cfg else None, "run_id": self.run_id,
            "backend": self.backend_name, "host": self.host_record(),
            "calibration": tl.get("calibration") if self.cd_ge else None,
            "test": tl.get("test"), "t0_mono_ns": tl.get("t0_mono_ns"),
            "cd": dict(self.cd.record(), resources="trace/resources/cd-node.csv")
            if self.cd and self.cd_ge else None,
            "devices": [d.record(rd) for d in self.devices if d.role == "device"],
            "cd_node": next((d.record(rd) for d in self.devices if d.role == "cd-node"), None),
            "ges": [g.record(rd) for g in self.ges],
            "cd_ge": self.cd_ge.record(rd) if self.cd_ge else None,
            "ge_exit_codes": self.ge_exit,
            "networks": self.backend.network_record() if self.backend else [],
            "plan": {"faithful": self.plan.faithful, "warnings": self.plan.warnings}
            if self.plan else None,
            "contention": self.contention,
            "network": self.impair.record(rd) if self.impair is not None else None,
            "failures": self.failures, "warnings": self.warnings,
            "interrupted": self.interrupted is not None,
            "aborted": self.aborted,
            "error": str(err) if err else None,
            "written_at_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        path = rd / "run.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(rec, indent=2) + "\n")
        tmp.replace(path)
        return path

    # -------------------------------------------------------------- 11: verdict
    def conclude(self) -> int:
        if self.interrupted is not None:
            where = f"; raw data kept in {self.run_dir}" if self.run_dir else ""
            log(f"interrupted{where}")
            return 128 + self.interrupted
        if self.error is not None:
            if isinstance(self.error, WotbenchError):
                raise self.error  # the CLI prints it and exits with its code
            return 1
        if self.aborted:
            log(f"the test did not complete (see failures in {self.run_dir / 'run.json'})")
            return self.exit_hint or 1
        code = 0
        try:
            from wotbench.analysis import analyze
        except ImportError:
            log("analysis module not available: raw data and run.json written, no verdict")
            return 3 if self.failures else 0
        summary = analyze(self.run_dir)
        verdict = summary.get("verdict", {})
        code = int(verdict.get("exit_code", 0))
        log(f"verdict: {verdict.get('status', '?')}")
        for r in verdict.get("reasons", []):
            print(f"  - {r}")
        if self.resolved.report.enabled:
            try:
                from wotbench.report import render
            except ImportError:
                log("report module not available: no report.html")
            else:
                log(f"report: {render(self.run_dir)}")
        if self.failures and code == 0:
            log(f"{len(self.failures)} component failure(s): flagging the run")
            code = 3
        return code


def run(config_path, out_root="reports", backend=None) -> int:
    return Runner(config_path, out_root, backend).execute()
