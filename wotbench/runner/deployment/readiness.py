"""Readiness before the load starts, checked where it matters and without flooding the host:

1. every device listens: wot-device creates ``<log dir>/ready`` once its CoAP endpoint is bound
   (:func:`wait_listening`; no packet is sent, so a thousand devices cost no neighbour entries
   in the host's namespace);
2. every gateway emulator reaches its devices *from its own address*: before its start instant
   the GE pings (CoAP empty CON -> RST) each endpoint of its trace until it answered and writes
   ``warmup.json`` (``gateway-emulator --warmup-ms``). :func:`wait_warm` waits for those files
   and names the devices that did not answer. The pings warm both sides' neighbour (ARP)
   entries, the bridge and conntrack on exactly the paths the test uses, so T0 finds every
   path warm instead of resolving every device address at once.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from pydantic import ValidationError

from wotbench.errors import EnvironmentProblem
from wotbench.rundir.ge_files import GeWarmupFile
from wotbench.schema_errors import problems as schema_problems

POLL_S = 0.1
WARMUP_BASE_MS = 1000        # GE warm-up budget: a base ...
WARMUP_PER_ENDPOINT_MS = 2   # ... plus a little per endpoint (one ping round is ~1 µs each) ...
# ... plus the ARP exchange: each first ping broadcasts an ARP request to every port of the
# device's bridge, so a block of N devices costs ~N^2 veth deliveries (1000 devices: one round
# of pings took 3.9 s at load 30 -- make bench-scale), hence a quadratic term
WARMUP_PER_ENDPOINT_SQ_US = 8

Dead = Callable[[], dict[str, str]]   # {component: why} of components known to have exited


class NotReady(EnvironmentProblem):
    def __init__(self, missing: list[str], what: str, hint: str = ""):
        shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
        super().__init__(f"{len(missing)} device(s) {what}: {shown}{hint}")
        self.missing = missing


FLEET_BIND_US_PER_DEVICE = 600   # wot-fleet: a socket bound per device (the contract's target:
                                 # 100 000 ready in <= 60 s); the budget is what the target allows


# a wot-fleet device's endpoint: no process to wake, no ARP of its own (it shares its engine's
# address): 50 000 per GE answered in 4.0 s (100 000 devices, 6 engines on one core, load ~7,
# 2026-11-26), so 0.2 ms each leaves 2.5 times that
WARMUP_PER_FLEET_ENDPOINT_US = 200


def warmup_ms(endpoints: int, hosts: Optional[int] = None, fleet_endpoints: int = 0) -> int:
    """The warm-up budget of a GE with ``endpoints`` endpoints of process devices on ``hosts``
    addresses (default: one each) and ``fleet_endpoints`` of wot-fleet devices (on their
    engines' few addresses, counted in ``hosts``)."""
    hosts = endpoints if hosts is None else hosts
    return (WARMUP_BASE_MS + WARMUP_PER_ENDPOINT_MS * endpoints
            + WARMUP_PER_FLEET_ENDPOINT_US * fleet_endpoints // 1000
            + WARMUP_PER_ENDPOINT_SQ_US * hosts * hosts // 1000)


def fleet_bind_s(devices: int) -> float:
    """How long readiness waits, beyond its base, for engines binding ``devices`` endpoints."""
    return devices * FLEET_BIND_US_PER_DEVICE / 1e6


def _check_dead(dead: Optional[Dead], waiting: Iterable[str], what: str) -> None:
    if dead is None:
        return
    waiting = set(waiting)
    gone = {n: why for n, why in dead().items() if n in waiting}
    if gone:
        raise NotReady(sorted(gone), what, " -- " + "; ".join(
            f"{n}: {why}" for n, why in sorted(gone.items())[:5]))


def wait_listening(devices: Iterable[tuple[str, Path]], timeout_s: float,
                   dead: Optional[Dead] = None) -> float:
    """Wait until every ``(name, ready file)`` exists; return the seconds it took."""
    pending = dict(devices)
    t0 = time.monotonic()
    next_dead = 0.0
    while pending:
        for name in [n for n, p in pending.items() if p.exists()]:
            del pending[name]
        if not pending:
            break
        now = time.monotonic()
        if now - t0 >= timeout_s:
            raise NotReady(sorted(pending), f"did not start listening within {timeout_s:g} s")
        if now >= next_dead:
            next_dead = now + 0.5
            _check_dead(dead, pending, "exited before listening")
        time.sleep(POLL_S)
    return time.monotonic() - t0


WARM_RECORD_MARGIN_S = 1.0   # a GE stops pinging 20 ms before its start instant and then writes
                             # warmup.json; the margin covers the write on a loaded host


class GeNotWarm(EnvironmentProblem):
    """A gateway emulator wrote no warm-up record by its start instant (it was not scheduled,
    or started too late to ping at all): the GE's problem, not a device's."""
    def __init__(self, ges: list[str]):
        super().__init__(f"gateway emulator(s) {', '.join(ges)} wrote no warm-up record "
                         f"({WARM_RECORD_MARGIN_S:g} s after their start instant): they started "
                         "too late to ping their devices (a loaded host: docker took longer than "
                         "the run's lead to start them) -- run again on a quieter host")
        self.missing = ges


def wait_warm(ges: Iterable[tuple[str, Path, int]], names: dict[str, str],
              dead: Optional[Dead] = None, ge_gone: Callable[[str], bool] = lambda g: False
              ) -> dict[str, GeWarmupFile]:
    """Wait for every GE's ``warmup.json`` (``(GE name, file, start instant)``, CLOCK_MONOTONIC
    ns): a GE pings until 20 ms before its own start instant at the latest, so its record is
    waited for until then plus :data:`WARM_RECORD_MARGIN_S`, never less (a main GE whose
    docker start was slow may still be pinging after the CD-GE's T0). Raise :class:`NotReady`
    naming the devices (``names``: ``"ip:port"`` -> device) a GE could not reach,
    :class:`GeNotWarm` naming a GE that wrote nothing. A GE that exited is not waited for: the
    test's own checks report it. Returns each GE's warm-up record; a warmup.json that is not
    what a GE writes (:class:`GeWarmupFile`) is an EnvironmentProblem naming the file and the
    key."""
    pending = {ge: (path, start_ns + int(WARM_RECORD_MARGIN_S * 1e9))
               for ge, path, start_ns in ges}
    results = {}
    next_dead = 0.0
    while pending:
        for ge, (path, _) in list(pending.items()):
            if path.exists():
                try:
                    data = json.loads(path.read_text())
                except ValueError:
                    continue   # being written
                try:
                    results[ge] = GeWarmupFile.model_validate(data)
                except ValidationError as e:
                    raise EnvironmentProblem(f"{path}: warmup.json of {ge}: " + "; ".join(
                        schema_problems(e, GeWarmupFile))) from None
                del pending[ge]
            elif ge_gone(ge):
                del pending[ge]
        if not pending:
            break
        now = time.monotonic_ns()
        late = sorted(ge for ge, (_, deadline) in pending.items() if now >= deadline)
        if late:
            raise GeNotWarm(late)
        if time.monotonic() >= next_dead:
            next_dead = time.monotonic() + 0.5
            _check_dead(dead, names.values(), "exited before the test")
        time.sleep(POLL_S)
    silent = sorted({names.get(a, a) for r in results.values() for a in r.unanswered})
    if silent:
        raise NotReady(silent, "did not answer the gateway emulator's CoAP ping",
                       " (from the GE's own address, before T0)")
    return results
