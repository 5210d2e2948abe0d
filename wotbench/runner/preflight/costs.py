"""What one device costs the host, per deployment form: data, so the host-limit check
(:mod:`wotbench.runner.preflight.capacity`) needs no code per form.

A form is how a device group runs (``devices[].engine``): each wot-device its own process
(``process``; in a container of its own or in a pod, :mod:`wotbench.deploy.pods`), or many
devices in one wot-fleet engine (``fleet``). The check counts each group's devices with its
form's figures, and a refusal of the process form names the lighter form as a fix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from wotbench.config.schema import MAX_FLEET_PER_CONTAINER
from wotbench.deploy import fleet, fleet_capacity

MIB = 1 << 20


@dataclass(frozen=True)
class Need:
    """Host resources: tasks (threads), file descriptors, memory, listening ports, addresses."""
    tasks: int = 0
    fds: int = 0
    memory_bytes: int = 0
    ports: int = 0
    addresses: int = 0

    def __add__(self, other: "Need") -> "Need":
        return Need(*(a + b for a, b in zip(self._values(), other._values())))

    def _values(self) -> tuple[int, ...]:
        return (self.tasks, self.fds, self.memory_bytes, self.ports, self.addresses)


@dataclass(frozen=True)
class FormCost:
    """What ``devices`` devices of one form cost: per device, per worker thread of a device,
    and per process (a form with ``devices_per_process`` > 1 shares its process's cost)."""
    form: str
    tasks_per_device: float
    tasks_per_thread: float          # devices[].threads: a worker thread each
    fds_per_device: float
    memory_bytes_per_device: float
    ports_per_device: float
    addresses_per_device: float      # before pods share an address (the checks count those)
    requests_per_core_s: float       # what one device core serves at most, all of it busy
    devices_per_process: int = 1
    tasks_per_process: float = 0.0
    fds_per_process: float = 0.0
    memory_bytes_per_process: float = 0.0
    source: str = ""                 # where the figures come from

    def fds_of_one_process(self, devices: int) -> int:
        """Descriptors the busiest process of ``devices`` devices holds (its RLIMIT_NOFILE)."""
        return math.ceil(min(devices, self.devices_per_process) * self.fds_per_device
                         + self.fds_per_process)

    def need(self, devices: int, threads: int = 1) -> Need:
        procs = math.ceil(devices / self.devices_per_process)
        return Need(
            tasks=math.ceil(devices * (self.tasks_per_device + threads * self.tasks_per_thread)
                            + procs * self.tasks_per_process),
            fds=math.ceil(devices * self.fds_per_device + procs * self.fds_per_process),
            memory_bytes=math.ceil(devices * self.memory_bytes_per_device
                                   + procs * self.memory_bytes_per_process),
            ports=math.ceil(devices * self.ports_per_device),
            addresses=math.ceil(devices * self.addresses_per_device))


# One wot-device process per device. Tasks: its main thread + one per worker (measured
# 2026-11-26: 5 tasks at --threads 4); descriptors: 11 (its socket, epoll x2, timerfd,
# signalfd, eventfd, a pipe, stdio); memory: host memory per device of `make bench-scale`
# (docs/SCALE.md: MemAvailable's drop over 1000 devices in pods, 1.1 MiB; own RSS 1.2 MiB);
# requests: 10.8 us of CPU per request, plain UDP (docs/PERFORMANCE.md), so at most ~92 k/s
# per core with nothing else on it.
PROCESS = FormCost(form="process", tasks_per_device=1, tasks_per_thread=1, fds_per_device=11,
                   memory_bytes_per_device=1.2 * MIB, ports_per_device=1,
                   addresses_per_device=1, requests_per_core_s=1e6 / 10.8,
                   source="docs/SCALE.md, docs/PERFORMANCE.md; tasks and fds measured")

# Many devices in one wot-fleet engine process (docs/FLEET.md): a socket and 16 KiB (engine
# state + the kernel's socket, the contract's target; 5.0 KiB measured) per device, no task
# per device; the engine's own threads, descriptors and code per process. Its per-process
# descriptor limit and its loops' request rate are checked by wotbench.deploy.fleet_capacity,
# sized from the runtime's hard limit, so this form carries no rate here.
FLEET = FormCost(form="fleet", tasks_per_device=0, tasks_per_thread=0, fds_per_device=1,
                 memory_bytes_per_device=fleet_capacity.BYTES_PER_DEVICE, ports_per_device=1,
                 addresses_per_device=0, requests_per_core_s=float(fleet_capacity.REQS_PER_LOOP_S),
                 devices_per_process=MAX_FLEET_PER_CONTAINER,
                 tasks_per_process=fleet_capacity.TASKS_BASE + 2,
                 fds_per_process=fleet_capacity.FDS_BASE + fleet_capacity.FDS_PER_LOOP,
                 memory_bytes_per_process=fleet_capacity.BASE_BYTES,
                 source="docs/FLEET.md (wotbench.deploy.fleet_capacity)")
CHECKED_BY_FLEET_CAPACITY = frozenset({FLEET.form})   # per-process fds and loop rate

FORMS: dict[str, FormCost] = {PROCESS.form: PROCESS, FLEET.form: FLEET}


def form_of(cfg, i: int) -> str:
    """The form device group ``i`` runs in (``devices[].engine``, ``auto`` decided)."""
    return fleet.engine_of(cfg, i)


def cost_of(cfg, i: int) -> FormCost:
    return FORMS.get(form_of(cfg, i), PROCESS)
