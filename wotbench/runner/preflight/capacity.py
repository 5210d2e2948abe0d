"""Does this host have room for the run's devices? Tasks, file descriptors, memory and the
device cores the plan gives them, against what each device's form costs
(:mod:`wotbench.runner.preflight.costs`). One refusal per limit passed, naming the key, the limit, what
the run needs and the fix (fewer devices, more hosts, a lighter form, or the setting).

Docker's own per-container costs (containerd-shim tasks, dockerd descriptors, conntrack) are
checked by :mod:`wotbench.runner.backends.docker.scalelimits` when the backend adapts the config.
"""
from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from wotbench.config.schema import Config
from wotbench.config.schema import device_name
from wotbench.deploy.plan import Plan
from wotbench.runner.preflight.costs import (CHECKED_BY_FLEET_CAPACITY, FORMS, MIB, PROCESS, Need,
                                      cost_of, form_of)
from wotbench.runner.prepare.hostlimits import read_int

HOST_RESERVE_TASKS = 2000      # the harness, the GEs, the monitor and the host's own growth
HOST_RESERVE_BYTES = 512 * MIB


@dataclass(frozen=True)
class HostLimit:
    setting: str      # what to name: kernel.pid_max, MemTotal, ...
    kind: str         # tasks | fds | memory_bytes (sums), fds_per_process (one process's)
    free: int         # what is left for the run
    total: int
    fix: str
    room: str = ""    # how the refusal names it (no figure that changes from call to call)

    @property
    def names(self) -> str:
        return self.room or f"{self.setting} = {self.total:,} leaves beside what the host runs"


def _cgroup_pids(proc_cgroup: Path = Path("/proc/self/cgroup"),
                 root: Path = Path("/sys/fs/cgroup")) -> Optional[tuple[int, int]]:
    """(pids.max, pids.current) of this process's cgroup (v1 ``N:pids:/path``, v2
    ``0::/path``); None: no limit, or not readable."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if ctrl and "pids" not in ctrl.split(","):
            continue
        d = (root / "pids" if ctrl else root) / path.lstrip("/")
        try:
            mx = (d / "pids.max").read_text().strip()
        except OSError:
            continue
        cur = read_int(d / "pids.current")
        if mx != "max" and cur is not None:
            return int(mx), cur
    return None


def _running_tasks(loadavg: Path = Path("/proc/loadavg")) -> int:
    try:   # "0.5 0.4 0.3 2/612 1234": 612 tasks on the host now
        return int(loadavg.read_text().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 0


def _meminfo(key: str) -> Optional[int]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_limits(read: Callable[[str], Optional[int]] = read_int) -> list[HostLimit]:
    """This host's limits and what is free of each now (those it does not expose are left out)."""
    out = []
    tasks = _running_tasks()
    for setting, path in (("kernel.pid_max", "/proc/sys/kernel/pid_max"),
                          ("kernel.threads-max", "/proc/sys/kernel/threads-max")):
        v = read(path)
        if v is not None:
            out.append(HostLimit(setting, "tasks", v - tasks - HOST_RESERVE_TASKS, v,
                                 f"sysctl -w {setting}=4194304"))
    pids = _cgroup_pids()
    if pids is not None:
        out.append(HostLimit("the pids limit of this cgroup (pids.max)", "tasks",
                             pids[0] - pids[1] - HOST_RESERVE_TASKS, pids[0],
                             "raise pids.max of the cgroup WoTbench runs in (TasksMax= of its "
                             "systemd unit or session)"))
    if os.geteuid() != 0:    # the devices run as this user: RLIMIT_NPROC counts their threads
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY:
            out.append(HostLimit("RLIMIT_NPROC (ulimit -u)", "tasks", soft - HOST_RESERVE_TASKS,
                                 soft, "ulimit -u unlimited (or raise nproc in "
                                       "/etc/security/limits.conf)"))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY:   # what each device process may raise its own limit to
        out.append(HostLimit("RLIMIT_NOFILE (hard, ulimit -Hn)", "fds_per_process", hard - 64,
                             hard, "ulimit -Hn as root before the run; Docker: LimitNOFILE= of "
                                   "the daemon"))
    fmax = read("/proc/sys/fs/file-max")
    fnow = read("/proc/sys/fs/file-nr")
    if fmax is not None:
        out.append(HostLimit("fs.file-max", "fds", fmax - (fnow or 0) - HOST_RESERVE_TASKS, fmax,
                             "sysctl -w fs.file-max=9223372036854775807"))
    mem, total = _meminfo("MemAvailable"), _meminfo("MemTotal")
    if mem is not None and total is not None:   # named by its total: what is free varies
        out.append(HostLimit("MemAvailable", "memory_bytes", mem - HOST_RESERVE_BYTES, total,
                             "free memory on this host",
                             f"this host has free (MemAvailable; MemTotal {total / 1024 / MIB:,.0f} "
                             "GiB)"))
    return out


Share = Optional[frozenset[str]]    # a cell's devices (a run across hosts); None: all


def devices_here(g, share: Share) -> int:
    """The group's devices this host runs."""
    if share is None:
        return g.count
    return sum(1 for i in range(g.count) if device_name(g.group, i) in share)


def demand(cfg: Config, share: Share = None) -> dict[str, tuple[int, Need]]:
    """Per form: (devices, what they need). Endpoints WoTbench does not start cost nothing;
    a third-party server counts as one process."""
    out: dict[str, tuple[int, Need]] = {}
    for i, g in enumerate(cfg.devices):
        if g.external is not None:
            continue
        form = PROCESS if g.server is not None else cost_of(cfg, i)
        count = devices_here(g, share)
        n, need = out.get(form.form, (0, Need()))
        out[form.form] = (n + count, need + form.need(count, g.threads))
    return out


def _amount(kind: str, v: int) -> str:
    return f"{v / 1024 / MIB:,.0f} GiB" if kind == "memory_bytes" else f"{v:,}"


def _fix(form: str) -> str:
    lighter = [f for f in FORMS.values() if f.form != form
               and f.memory_bytes_per_device < FORMS.get(form, PROCESS).memory_bytes_per_device]
    return ("fewer devices, or more hosts (backend: swarm, docs/CLUSTER.md: each host runs a "
            "cell of the devices)" + "".join(f", or devices[].engine: {f.form}" for f in lighter))


def count_key(cfg: Config, form: str) -> str:
    """The key to name: the largest group of the form."""
    idx = [i for i, g in enumerate(cfg.devices) if g.external is None and form_of(cfg, i) == form]
    i = max(idx or [0], key=lambda i: cfg.devices[i].count)
    return f"devices[{i}].count" if len(idx) <= 1 else f"devices[*].count (largest devices[{i}])"


def problems(cfg: Config, plan: Plan, limits: list[HostLimit], share: Share = None) -> list[str]:
    """One line per limit the run's devices (``share``: a cell's) would pass, and per form whose
    request rate needs more device cores than the plan gives."""
    out = []
    per_form = demand(cfg, share)
    total = Need()
    for _, need in per_form.values():
        total = total + need
    heaviest = max(per_form, key=lambda f: per_form[f][1].tasks) if per_form else PROCESS.form
    devices = sum(n for n, _ in per_form.values())
    for lim in limits:
        if lim.kind == "fds_per_process":
            out.extend(_process_fd_problems(cfg, per_form, lim))
            continue
        need = getattr(total, lim.kind)
        if need > lim.free:
            form = FORMS.get(heaviest, PROCESS)
            per = {"tasks": f"{form.tasks_per_device + form.tasks_per_thread:g} per device "
                            "plus one per extra worker thread",
                   "fds": f"{form.fds_per_device:g} per device",
                   "memory_bytes": f"{form.memory_bytes_per_device / MIB:.1f} MiB per device"
                   }[lim.kind]
            # the limit, not what is free of it now: check and run say the same
            out.append(f"{count_key(cfg, heaviest)}: {devices:,} devices ({heaviest} form: "
                       f"{per}) need about {_amount(lim.kind, need)} "
                       f"{'of memory' if lim.kind == 'memory_bytes' else lim.kind}, more than "
                       f"{lim.names}; fix: {_fix(heaviest)}; or raise the limit "
                       f"({lim.fix})")
    out.extend(_core_problems(cfg, plan, share))
    return out


def _process_fd_problems(cfg: Config, per_form: dict[str, tuple[int, Need]],
                         lim: HostLimit) -> list[str]:
    """A form that carries many devices per process holds their sockets in one process."""
    out = []
    for name, (n, _) in per_form.items():
        if name in CHECKED_BY_FLEET_CAPACITY:
            continue
        form = FORMS.get(name, PROCESS)
        need = form.fds_of_one_process(n)
        if need > lim.free:
            one = min(n, form.devices_per_process)
            out.append(f"{count_key(cfg, name)}: one {name}-form process of {one:,} "
                       f"devices holds about {need:,} file descriptors, more than {lim.setting} "
                       f"= {lim.total:,} allows; fix: {_fix(name)}; or raise the limit "
                       f"({lim.fix})")
    return out


def request_rate(cfg: Config, share: Share = None) -> dict[str, float]:
    """Per form: requests per second the trace sends its devices (from each group's rit mean;
    a recorded trace is read when the run writes it, so it is not counted here)."""
    out: dict[str, float] = {}
    if cfg.trace is not None:
        return out
    for i, g in enumerate(cfg.devices):
        mean = getattr(g.rit, "mean", None)
        if g.third_party or not mean:
            continue
        f = form_of(cfg, i)
        if f in CHECKED_BY_FLEET_CAPACITY:
            continue
        out[f] = out.get(f, 0.0) + devices_here(g, share) * 1000.0 / mean
    return out


def _core_problems(cfg: Config, plan: Plan, share: Share) -> list[str]:
    cores = len(plan.device_cores)
    out = []
    for form, rate in request_rate(cfg, share).items():
        cap = FORMS.get(form, PROCESS).requests_per_core_s
        if rate > cap * cores:
            need = -(-rate // cap)
            out.append(f"{count_key(cfg, form)}: the devices receive about {rate:,.0f} requests/s "
                       f"(count x 1000 / rit.mean), more than the {cores} device core(s) of this "
                       f"host's plan serve ({cap:,.0f} requests/s per core at most, {form} form: "
                       f"{FORMS.get(form, PROCESS).source}); {need:.0f} device cores are needed; "
                       f"fix: {_fix(form)}, or a longer devices[].rit.mean")
    return out
