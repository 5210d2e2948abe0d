"""pumba backend: the paper's way. One ``pumba netem`` process per device and impairment kind,
targeting the device container by name, with a locally built ``--tc-image`` (never pulled).

Checked against Pumba's source (cmd/commands.go, pkg/chaos/netem/cmd/*.go, pkg/chaos/netem/*.go):
- netem-level flags: ``--duration`` (Go duration, required), ``--interface`` (default eth0),
  ``--tc-image``, ``--pull-image`` (BoolT, default true: we pass ``--pull-image=false``).
- ``delay --time MS --jitter MS --correlation PCT [--distribution uniform|normal|pareto|paretonormal]``:
  time and jitter are Go ints (milliseconds); jitter defaults to 10 and correlation to 20, so we
  always pass both. Pumba requires jitter <= time.
- ``loss --percent PCT --correlation PCT``; ``loss-gemodel --pg P --pb R --one-h PCT --one-k PCT``
  (--pg is tc's p, --pb is tc's r); ``rate --rate N[k|m|g]bit`` (regex ``\\d+[gmk]?bit``);
  ``duplicate --percent --correlation``; ``corrupt --percent --correlation``.
- Every subcommand runs ``tc qdisc add dev IFACE root netem ...`` in a sidecar and, after
  --duration or on SIGINT/SIGTERM, ``tc qdisc del dev IFACE root netem``. netem acts on egress
  only. A second root netem on the same interface fails ("Exclusivity flag on, cannot
  modify"), so Pumba cannot combine two impairment kinds on one device: check() rejects that
  and points to the netem backend, which puts all kinds in one qdisc.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

from wotbench.netimpair.cmdrun import CommandRunner, shell_join
from wotbench.netimpair.errors import ImpairmentError
from wotbench.netimpair.model import Impairment, fmt_num
from wotbench.netimpair.plan import ImpairmentPlan
from wotbench.netimpair.probe import NO_NETEM_HINT, probe_netem
from wotbench.netimpair.tc import NetnsRef, leftover_qdiscs, remove_all
from wotbench.netimpair.tcimage import ensure_tc_image
from wotbench.netimpair.backends.base import Backend, DeviceTarget

PUMBA_RATE_RE = re.compile(r"^\d+[gmk]?bit$")
STOP_WAIT_S = 35.0   # Pumba gives its own cleanup up to 30 s (cleanupTimeout)


def _int_ms(v: float, key: str, problems: list[str]) -> None:
    if not float(v).is_integer():
        problems.append(f"{key}: {fmt_num(v)} ms is not a whole number of milliseconds; Pumba takes "
                        f"integer milliseconds only (use {math.floor(v)} or {math.ceil(v)}, or network.backend: netem)")


def subcommands(imp: Impairment) -> list[tuple[str, list[str]]]:
    """(kind, pumba netem subcommand with flags) for each impairment kind present."""
    out: list[tuple[str, list[str]]] = []
    if imp.delay:
        d = imp.delay
        a = ["delay", "--time", str(int(d.time_ms)), "--jitter", str(int(d.jitter_ms)),
             "--correlation", fmt_num(d.correlation)]
        # "uniform" is left out: tc has no uniform.dist; Pumba's empty default = the kernel's uniform jitter
        if d.distribution and d.distribution != "uniform":
            a += ["--distribution", d.distribution]
        out.append(("delay", a))
    if imp.loss:
        lo = imp.loss
        if lo.gilbert_elliott:
            g = lo.gilbert_elliott
            out.append(("loss", ["loss-gemodel", "--pg", fmt_num(g.p), "--pb", fmt_num(g.r),
                                 "--one-h", fmt_num(g.one_minus_h), "--one-k", fmt_num(g.one_minus_k)]))
        else:
            out.append(("loss", ["loss", "--percent", fmt_num(lo.percent), "--correlation", fmt_num(lo.correlation)]))
    if imp.rate:
        out.append(("rate", ["rate", "--rate", imp.rate]))
    for kind in ("duplicate", "corrupt"):
        v = getattr(imp, kind)
        if v:
            out.append((kind, [kind, "--percent", fmt_num(v.percent), "--correlation", fmt_num(v.correlation)]))
    return out


def pumba_duration(duration_s: float, margin_s: float) -> str:
    return f"{int(math.ceil(duration_s + margin_s))}s"


class PumbaBackend(Backend):
    name = "pumba"

    def __init__(self, plan: ImpairmentPlan, runner: Optional[CommandRunner] = None, *,
                 pumba: str = "pumba", tc_image: Optional[str] = None,
                 image_builder: Callable[[], str] = ensure_tc_image,
                 popen: Callable[..., Any] = subprocess.Popen,
                 which: Callable[[str], Optional[str]] = shutil.which,
                 probe=probe_netem, margin_s: float = 30.0, log_dir: Optional[str] = None,
                 settle_s: float = 2.0):
        super().__init__(plan, runner)
        self.pumba, self.tc_image, self.image_builder = pumba, tc_image, image_builder
        self.popen, self.which, self.probe = popen, which, probe
        self.margin_s, self.log_dir, self.settle_s = margin_s, log_dir, settle_s
        self.procs: list[tuple[str, str, Any, str]] = []   # (device, kind, Popen, log path)
        self._refs: dict[str, tuple[NetnsRef, str]] = {}

    def available(self) -> tuple[bool, str]:
        if not self.which(self.pumba):
            return False, ("pumba backend: no `pumba` binary on PATH (Pumba is not installed); "
                           "use network.backend: netem or app")
        ok, why = self.probe()
        if not ok:
            return False, f"pumba backend: Pumba drives tc netem, and {why}; {NO_NETEM_HINT}"
        return True, f"{self.which(self.pumba)} found; {why}"

    def check(self) -> list[str]:
        problems: list[str] = []
        for d in self.plan:
            imp, k = d.impairment, d.key
            if imp.direction != "egress":
                problems.append(f"{k}.direction: Pumba's netem shapes egress only (device -> gateway); "
                                f"{imp.direction} needs network.backend: netem (ifb) or app")
            kinds = imp.kinds()
            if len(kinds) > 1:
                problems.append(f"{k}: Pumba runs one root netem qdisc per container, so {' + '.join(kinds)} "
                                f"cannot be combined on {d.device} (the second fails 'Exclusivity flag on'); "
                                f"keep one kind or use network.backend: netem")
            if imp.delay:
                _int_ms(imp.delay.time_ms, f"{k}.delay.time_ms", problems)
                _int_ms(imp.delay.jitter_ms, f"{k}.delay.jitter_ms", problems)
            if imp.rate and not PUMBA_RATE_RE.match(imp.rate):
                problems.append(f"{k}.rate: {imp.rate} is not a rate Pumba takes (integer with bit, kbit, mbit "
                                f"or gbit, e.g. 250kbit)")
        return problems

    def commands(self, targets: Sequence[DeviceTarget], duration_s: float, tc_image: str) -> dict[str, list[list[str]]]:
        """device -> the pumba command lines (one per impairment kind)."""
        return self._commands(self._targets_by_name(targets), duration_s, tc_image)

    def _commands(self, by: dict[str, DeviceTarget], duration_s: float,
                  tc_image: str) -> dict[str, list[list[str]]]:
        out: dict[str, list[list[str]]] = {}
        for d in self.plan:
            t = by[d.device]
            if not t.container:
                raise ImpairmentError(f"pumba backend: device {d.device} has no container name")
            head = [self.pumba, "--log-level", "info", "netem", "--duration", pumba_duration(duration_s, self.margin_s),
                    "--interface", t.interface, "--tc-image", tc_image, "--pull-image=false"]
            out[d.device] = [head + sub + [t.container] for _, sub in subcommands(d.impairment)]
        return out

    def apply(self, targets: Sequence[DeviceTarget], duration_s: float) -> dict[str, Any]:
        ok, why = self.available()
        if not ok:
            raise ImpairmentError(why)
        problems = self.check()
        if problems:
            raise ImpairmentError("pumba backend: " + "; ".join(problems))
        image = self.tc_image or self.image_builder()
        self.tc_image = image
        by = self._targets_by_name(targets)
        cmds = self._commands(by, duration_s, image)
        log_dir = self.log_dir or tempfile.mkdtemp(prefix="wotbench-pumba-")
        os.makedirs(log_dir, exist_ok=True)
        for dev, argvs in cmds.items():
            t = by[dev]
            if t.pid:
                self._refs[dev] = (NetnsRef.for_pid(int(t.pid)), t.interface)
            self.applied[dev] = {"target": t.container, "tc_image": image, "applied": []}
            for argv in argvs:
                kind = argv[argv.index("--pull-image=false") + 1]   # the netem subcommand
                log = os.path.join(log_dir, f"pumba-{dev}-{kind}.log")
                with open(log, "wb") as fh:
                    p = self.popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
                self.procs.append((dev, kind, p, log))
                self.applied[dev]["applied"].append(shell_join(argv))
        deadline = time.monotonic() + self.settle_s
        while time.monotonic() < deadline:
            dead = [(dev, kind, p, log) for dev, kind, p, log in self.procs if p.poll() is not None]
            if dead:
                dev, kind, p, log = dead[0]
                tail = _tail(log)
                self.remove()
                raise ImpairmentError(f"pumba backend: pumba {kind} for {dev} exited with {p.returncode} "
                                      f"right after start: {tail}")
            time.sleep(0.1)
        return self.record()

    def remove(self) -> dict[str, Any]:
        """Stop every pumba process (SIGTERM: Pumba deletes its qdisc itself; SIGKILL after
        STOP_WAIT_S), then verify in each device namespace and delete anything left. Idempotent."""
        stopped = []
        for dev, kind, p, log in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    p.terminate()
        for dev, kind, p, log in self.procs:
            try:
                p.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
            stopped.append({"device": dev, "kind": kind, "exit": p.returncode})
        self.procs = []
        results = []
        for dev, (ref, iface) in self._refs.items():
            left = leftover_qdiscs(self.runner, ref, iface) if ref.still_same() else []
            res: dict[str, Any] = {"device": dev, "left_by_pumba": left, "errors": []}
            if left:   # Pumba did not clean up (killed, sidecar failed): do it ourselves
                res.update(remove_all(self.runner, ref, iface))
                res["device"], res["left_by_pumba"] = dev, left
            results.append(res)
        self.removal = stopped + results
        self.removed = all(not r.get("errors") for r in results)
        return {"removed": self.removed, "processes": stopped, "devices": results}


def _tail(path: str, n: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace").strip() or "(no output)"
    except OSError:
        return "(no log)"
