"""Synthetic workload generation: ``wotbench trace CONFIG --out DIR``.

Writes into DIR (contract sections 1 and 4)::

    trace.csv               merged, time-sorted main trace (times from the test start)
    ge-<k>.csv              only when gateways.count > 1: device ids with id % count == k
                            (a cell's share: rank among its ids % count, .ge_share)
    resources/<device>.csv  one per device
    cd-trace.csv            the contention detector's probe trace (times from calibration start)
    resources/cd-node.csv   the CD node's single resource ``cd``

Timeline (see CONTRACTS.md section 8): the CD-GE starts at T0 and sends one request every
``interval_s`` for ``calibration_s + duration_s``; the main GE(s) start at
``T0 + calibration_s`` (``--start-at``), so ``trace.csv`` times are relative to the test start.

Workload model, per device of a group:

- arrivals: a renewal process with the group's RIT distribution over ``duration_s``, seen in its
  steady state (``renewal.stationary_arrivals``: the first arrival is the forward recurrence
  time, so devices are not phase-locked and a test of D s holds count * D / mean requests on
  average even when the RIT outlasts the test; a plain U * X1 offered up to 1.5x, and 4.4x at
  the 10^6 cluster's 1 000 s RIT in 20 s);
- resources: ``resources`` synthetic resources ``r0..r{N-1}`` whose service times are the
  conditional means of the N equal-probability bins of the service-time distribution (shuffled
  per device); every request picks one uniformly. The *request-weighted* service time then has
  exactly the target mean and a CDF within 1/N of the target's everywhere (KS distance
  <= 1/N), for any distribution;
- a ``rate_profile`` (steps, ramp, burst, sine) makes the rate vary over the test: the same
  renewal process in operational time (:mod:`wotbench.workload.rate_profile`);
- method: drawn from the ``methods`` weights; PUT/POST (and PATCH, HTTP only) carry
  ``request_payload_bytes``;
  ``requests: false`` gives the group no requests at all;
- observations (``observe``, RFC 7641): the first ``observe.resources`` resources are
  observable (notification columns in the resource file, see :func:`notify_columns`); per device
  ``observe.observers`` observers, observer k on resource ``k mod resources`` with its own URI
  ``r<j>?o=<k>``, an ``OBSERVE`` line at a uniform instant in ``[0, register_within_s)`` and a
  ``CANCEL`` line ``hold`` later (or at the end of the test).

Everything is drawn from ``numpy.random.default_rng([seed, group index, stream])``, so a
seed gives the same files on every run and adding a group does not change the others.
"""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Protocol

import numpy as np
import pandas as pd

from wotbench.config.schema import HTTP_METHODS, MAX_DATAGRAM_PAYLOAD, Config
from wotbench.config.schema import device_name
from wotbench.deploy.resolve import DeviceAddress, device_addresses
from cd_module.trace import write_cd_files
from wotbench.workload.formats import (BODY_METHODS, TRACE_BODY_COLUMN, TRACE_HEADER, TRACE_METHODS, authority,
                                       write_resources)
from wotbench.workload.renewal import stationary_arrivals as _arrivals
from wotbench.workload import httpproxy, rate_profile
from wotbench.workload.ge_share import ge_index
from wotbench.workload.trace_io import observe_problems, read_resources, read_trace
from wotbench.config.distributions import make_distribution
from wotbench.errors import ConfigError
from wotbench.rundir import atomic
from wotbench.rundir.layout import RESOURCES_DIR, TRACE_CSV, ge_trace_name

_STREAM_ARRIVALS, _STREAM_RESOURCES, _STREAM_CHOICE, _STREAM_OBSERVE = 1, 2, 3, 4
_WITH_BODY = tuple(HTTP_METHODS.index(m) for m in BODY_METHODS)
_OBSERVE, _CANCEL = TRACE_METHODS.index("OBSERVE"), TRACE_METHODS.index("CANCEL")
DURABLE_RESOURCE_FILES = 2000   # more (wot-fleet runs): written without an fsync each
NOT_OBSERVABLE = ("none", 0, 0, 0, "con", 60)    # notification columns of a plain resource


@dataclass
class GroupSummary:
    group: str
    devices: int
    threads: int
    mode: str
    requests: int
    rate_per_device: float        # offered req/s per device (1000 / mean RIT)
    achieved_rate_per_device: float
    service_time_ms: float        # request-weighted mean service time (ms)
    rho: float                    # offered utilisation per device: rate * S / threads
    cpu_demand_cores: float       # busy-mode CPU work offered by the whole group, in cores


@dataclass
class TraceSummary:
    out_dir: str
    requests: int
    duration_s: float
    groups: list[GroupSummary]
    cd_requests: int
    ge_files: list[str]
    recorded: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def busy_cpu_demand_cores(self) -> float:
        return sum(g.cpu_demand_cores for g in self.groups)


@dataclass
class GeneratedTrace:
    device_id: np.ndarray       # int64
    send_time_us: np.ndarray    # int64, sorted
    method: np.ndarray          # int8 index into TRACE_METHODS
    resource: np.ndarray        # int64 index into resource_paths of the device
    payload: np.ndarray         # int64 request payload bytes
    resources: dict[str, list[tuple]]   # device -> rows of its file (4 or 10 columns)
    # device id -> the paths ``resource`` indexes, for third-party devices (wotbench.config.byo);
    # a wot-device's resource j is the path r<j>
    paths: dict[int, list[str]] = field(default_factory=dict)
    observer: Optional[np.ndarray] = None   # int64 observer k of OBSERVE/CANCEL rows, else -1
    # device -> the TD it serves, for devices made from ``things:`` (wotbench.things)
    thing_tds: dict[str, str] = field(default_factory=dict)
    directory_ops: list[dict] = field(default_factory=list)   # their things/affordances.csv rows
    # the trace's body column (docs/CONTRACTS.md §1): per row an index into ``bodies`` (the
    # encoded bodies), -1 for none (filler bytes); None when no row has a body
    body: Optional[np.ndarray] = None
    bodies: list[str] = field(default_factory=list)
    directory_tds: dict[str, str] = field(default_factory=dict)   # registered instance -> TD


@dataclass
class GroupPart:
    """A device group's part of the trace when its rows are not drawn here (a Thing's from its
    TD, a directory's registrations: :mod:`wotbench.things.trace`), arrays as
    :class:`GeneratedTrace` holds them."""
    device_id: list[np.ndarray] = field(default_factory=list)
    send_time_us: list[np.ndarray] = field(default_factory=list)
    method: list[np.ndarray] = field(default_factory=list)
    resource: list[np.ndarray] = field(default_factory=list)
    payload: list[np.ndarray] = field(default_factory=list)
    observer: list[np.ndarray] = field(default_factory=list)
    resources: dict[str, list[tuple]] = field(default_factory=dict)   # device -> rows
    paths: dict[int, list[str]] = field(default_factory=dict)         # device id -> paths
    tds: dict[str, str] = field(default_factory=dict)                 # device -> its TD (JSON)
    body: list[np.ndarray] = field(default_factory=list)   # per row: index into bodies, -1 none
    bodies: list[str] = field(default_factory=list)        # distinct bodies, encoded (encode_body)
    directory_tds: dict[str, str] = field(default_factory=dict)   # registered instance -> TD
    directory_ops: list[dict] = field(default_factory=list)   # their things/affordances.csv rows


class GroupSource(Protocol):
    """Where the rows of the groups this module does not draw come from (``devices[].thing``
    and ``directory`` groups: :data:`wotbench.things.trace.THING_GROUPS`). The layer above
    workload and things passes it in, so this module imports neither them nor their files."""

    def rows(self, cfg: Config, gi: int, first: int,
             addrs: list[DeviceAddress]) -> Optional[GroupPart]:
        """Group ``gi``'s part (its devices from id ``first``); None: a group drawn here."""

    def write_files(self, cfg: Config, out_dir: Path, tr: GeneratedTrace) -> None:
        """Its files beside the trace (the Things' TDs and affordances)."""


def _rng(cfg: Config, group_index: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([cfg.seed, group_index, stream])


def resource_service_times_us(dist, n: int) -> np.ndarray:
    """The N resource service times (µs, ascending) for a service-time distribution."""
    return np.maximum(np.rint(dist.bin_means(n) * 1000.0), 0).astype(np.int64)


def notify_columns(g) -> tuple:
    """The six notification columns (notify_dist, notify_mean_us, notify_jitter_us,
    notify_service_us, notify_type, max_age_s) of an observable resource of group ``g``."""
    o = g.observe
    if o.interval is None:
        dist = "uniform" if o.jitter_ms > 0 else "deterministic"
        mean, jit = o.period_ms, o.jitter_ms
    else:
        dist, mean, cv = o.interval.dist, float(o.interval.mean), float(o.interval.cv or 0)
        jit = {"uniform": mean * cv * math.sqrt(3), "normal": mean * cv}.get(dist, 0.0)
        if dist == "uniform" and jit == 0:
            dist = "deterministic"
    return (dist, max(1, round(mean * 1000)), round(jit * 1000), round(o.service_time_ms * 1000),
            o.type, o.max_age_s)


def notify_rate(g) -> float:
    """Configured notifications per second per observable resource of group ``g``."""
    o = g.observe
    return 1000.0 / (o.period_ms if o.interval is None else float(o.interval.mean))


def _observations(cfg: Config, gi: int, g, first: int, duration_us: int):
    """(device ids, times, methods, resources, observers) of the group's OBSERVE/CANCEL lines."""
    o = g.observe
    rng = _rng(cfg, gi, _STREAM_OBSERVE)
    n = g.count * o.observers
    dev = np.repeat(np.arange(first, first + g.count, dtype=np.int64), o.observers)
    k = np.tile(np.arange(o.observers, dtype=np.int64), g.count)
    reg = np.floor(rng.random(n) * o.register_within_s * 1e6).astype(np.int64)
    reg = np.minimum(reg, max(duration_us - 2, 0))
    if o.hold is None:
        end = np.full(n, duration_us, np.int64)
    else:
        hold = np.asarray(make_distribution(o.hold).sample(rng, n), dtype=float)
        end = np.minimum(reg + np.floor(hold * 1000).astype(np.int64), duration_us)
    end = np.maximum(end, reg + 1)
    return (np.concatenate([dev, dev]), np.concatenate([reg, end]),
            np.concatenate([np.full(n, _OBSERVE, np.int8), np.full(n, _CANCEL, np.int8)]),
            np.concatenate([k % o.resources] * 2), np.concatenate([k, k]))


def generate(cfg: Config, drawn_elsewhere: Optional[GroupSource] = None) -> GeneratedTrace:
    """Generate the main trace in memory (see the module docstring for the model);
    ``drawn_elsewhere``: the rows of the Things' and directory groups (a config with such a
    group needs it)."""
    duration_ms = cfg.duration_s * 1000.0
    addrs = device_addresses(cfg)
    ids, times, meths, ress, pays, obs = [], [], [], [], [], []
    resources: dict[str, list[tuple]] = {}
    paths: dict[int, list[str]] = {}
    first = 0
    thing_tds: dict[str, str] = {}
    directory_ops: list[dict] = []
    directory_tds: dict[str, str] = {}
    bods: list[np.ndarray] = []    # per row: index into bodies, -1 none
    bodies: list[str] = []

    def with_bodies(index: list[np.ndarray], texts: list[str]) -> None:
        off = len(bodies)
        bods.extend(np.where(b >= 0, b + off, -1) for b in index)
        bodies.extend(texts)

    for gi, g in enumerate(cfg.devices):
        part = drawn_elsewhere.rows(cfg, gi, first, addrs) if drawn_elsewhere else None
        if part is None and (g.thing is not None or g.directory):
            raise ValueError(f"devices[{gi}] ({g.group}): the rows of a Thing's or a directory's "
                             "group come from wotbench.things.trace.THING_GROUPS, not given")
        if part is not None:   # a Thing from its TD, a directory: own paths, rates and bodies
            ids += part.device_id
            times += part.send_time_us
            meths += part.method
            ress += part.resource
            pays += part.payload
            obs += part.observer
            resources.update(part.resources)
            paths.update(part.paths)
            thing_tds.update(part.tds)
            with_bodies(part.body, part.bodies)
            directory_tds.update(part.directory_tds)
            directory_ops.extend(part.directory_ops)
            first += g.count
            continue
        s_dist = make_distribution(g.service_time)
        r_dist = make_distribution(g.rit)
        n_res = len(g.paths) if g.third_party else g.resources
        if g.third_party:   # its own paths; no resource file (it is not a wot-device)
            paths.update({first + k: list(g.paths) for k in range(g.count)})
        else:
            base = resource_service_times_us(s_dist, g.resources)
            rng_res = _rng(cfg, gi, _STREAM_RESOURCES)
            cols = notify_columns(g) if g.observe is not None else None
            same = None      # one resource: every device's rows are the same (no draw is made)
            for k in range(g.count):
                if same is not None:
                    resources[addrs[first + k].name] = same
                    continue
                st = rng_res.permutation(base)
                rows = [(f"r{j}", int(st[j]), g.mode, g.payload_bytes) for j in range(g.resources)]
                if cols is not None:
                    rows = [row + (cols if j < g.observe.resources else NOT_OBSERVABLE)
                            for j, row in enumerate(rows)]
                resources[addrs[first + k].name] = rows
                if g.resources == 1:
                    same = rows
        closed = cfg.gateways.loop == "closed"
        if closed:   # the closed loop's targets: each resource of each device once, at 0
            rows = [np.zeros(n_res) for _ in range(g.count)]
        elif g.rate_profile is not None:   # the rate over time (issue 35)
            rows = rate_profile.profiled_arrivals(g.rate_profile, r_dist,
                                                  _rng(cfg, gi, _STREAM_ARRIVALS), g.count,
                                                  duration_ms, _arrivals)
        else:
            rows = _arrivals(r_dist, _rng(cfg, gi, _STREAM_ARRIVALS), g.count, duration_ms)
        if not g.requests:
            rows = [r[:0] for r in rows]
        n = sum(len(r) for r in rows)
        ids.append(np.repeat(np.arange(first, first + g.count, dtype=np.int64), [len(r) for r in rows]))
        times.append(np.floor(np.concatenate(rows) * 1000.0).astype(np.int64) if n else np.zeros(0, np.int64))
        rng_c = _rng(cfg, gi, _STREAM_CHOICE)
        ress.append(np.tile(np.arange(n_res, dtype=np.int64), g.count if n else 0) if closed
                    else rng_c.integers(0, n_res, size=n, dtype=np.int64))
        names = list(g.methods)
        w = np.array([g.methods[m] for m in names], dtype=float)
        midx = np.array([HTTP_METHODS.index(m) for m in names], dtype=np.int8)
        m = midx[rng_c.choice(len(names), size=n, p=w / w.sum())] if len(names) > 1 else np.full(n, midx[0], np.int8)
        meths.append(m)
        has_body = np.isin(m, _WITH_BODY)
        pays.append(np.where(has_body, g.request_payload_bytes, 0).astype(np.int64))
        obs.append(np.full(n, -1, np.int64))
        bods.append(np.full(n, -1, np.int32))
        if g.observe is not None:
            d, t, m, r, k = _observations(cfg, gi, g, first, int(round(duration_ms * 1000)))
            ids.append(d), times.append(t), meths.append(m), ress.append(r), obs.append(k)
            pays.append(np.zeros(len(d), np.int64))
            bods.append(np.full(len(d), -1, np.int32))
        first += g.count
    device_id, send_time = np.concatenate(ids), np.concatenate(times)
    order = np.lexsort((device_id, send_time))   # stable: an OBSERVE stays before its CANCEL
    observer = np.concatenate(obs)[order]
    body = np.concatenate(bods)[order]
    return GeneratedTrace(device_id[order], send_time[order], np.concatenate(meths)[order],
                          np.concatenate(ress)[order], np.concatenate(pays)[order], resources,
                          paths, observer if (observer >= 0).any() else None, thing_tds,
                          directory_ops, body if (body >= 0).any() else None, bodies,
                          directory_tds)


def _schemes(cfg: Config, addrs: list[DeviceAddress]) -> list[str]:
    """Each device's URI scheme: http for a ``protocol: http`` group, else coaps with DTLS,
    else coap (the CD node's probes stay coap)."""
    http = {g.group for g in cfg.devices if g.protocol == "http"}
    coap = "coaps" if cfg.dtls.enabled else "coap"
    return ["http" if a.group in http else coap for a in addrs]


def _uri_parts(tr: GeneratedTrace, addrs: list[DeviceAddress], schemes: Optional[list[str]],
               via: str) -> tuple[list[str], list[str]]:
    """Each device's row prefix (``id,``) and URI base (up to the resource), by device id:
    made once per trace, not once per GE's file (17 files x 10^6 devices took a cell 20 s)."""
    schemes = schemes or ["coap"] * len(addrs)
    prefix = [f"{a.id}," for a in addrs]
    base = [f"{via}{sc}://{authority(a)}/r" for a, sc in zip(addrs, schemes)]
    if tr.paths:   # third-party devices: their own paths instead of r<j>
        names = [tr.paths.get(a.id) for a in addrs]
        base = [f"{via}{sc}://{authority(a)}/" if names[a.id] else b
                for a, b, sc in zip(addrs, base, schemes)]
    return prefix, base


def _write_rows(path: Path, tr: GeneratedTrace, addrs: list[DeviceAddress], mask: Optional[np.ndarray] = None,
                schemes: Optional[list[str]] = None, clients: Optional[int] = None,
                via: str = "", parts: Optional[tuple[list[str], list[str]]] = None) -> int:
    """Write trace rows fast: one f-string per row over precomputed URI prefixes. ``clients``:
    an open loop from N client endpoints: row k (in send order) leaves from client k mod N
    (the trace's client column, after payload_bytes). ``via``: what goes before each device's
    URI (an HTTP->CoAP proxy's, :mod:`wotbench.workload.httpproxy`); ``parts``: what
    :func:`_uri_parts` made of them already."""
    d, t, m, r, p = tr.device_id, tr.send_time_us, tr.method, tr.resource, tr.payload
    if mask is not None:
        d, t, m, r, p = d[mask], t[mask], m[mask], r[mask], p[mask]
    if tr.observer is not None or tr.body is not None:   # observers' URIs, bodies: row by row
        k = tr.observer if tr.observer is not None else np.full(len(tr.device_id), -1, np.int64)
        b = tr.body if tr.body is not None else None
        if mask is not None:
            k, b = k[mask], (None if b is None else b[mask])
        return _write_rows_observe(path, d, t, m, r, p, k, addrs, schemes, tr.paths,
                                   body=b, bodies=tr.bodies, clients=clients, via=via)
    with_payload = bool(p.any()) or clients is not None
    prefix, base = parts or _uri_parts(tr, addrs, schemes, via)
    if tr.paths:   # third-party devices: their own paths instead of r<j>
        names = [tr.paths.get(a.id) for a in addrs]
        r = np.array([names[a][e] if names[a] else e for a, e in zip(d.tolist(), r.tolist())],
                     dtype=object)
    with atomic.replacing(path, buffering=1 << 20) as f:
        f.write(TRACE_HEADER + (",payload_bytes" if with_payload else "")
                + (",client" if clients is not None else "") + "\n")
        chunk = 200_000
        for s in range(0, len(d), chunk):
            dl, tl, ml, rl = (x[s:s + chunk].tolist() for x in (d, t, m, r))
            if clients is not None:
                pl = p[s:s + chunk].tolist()
                cl = (np.arange(s, s + len(dl)) % clients).tolist()
                f.write("".join([f"{prefix[a]}{b},{TRACE_METHODS[c]},{base[a]}{e},{g},{k}\n"
                                 for a, b, c, e, g, k in zip(dl, tl, ml, rl, pl, cl)]))
            elif with_payload:
                pl = p[s:s + chunk].tolist()
                f.write("".join([f"{prefix[a]}{b},{TRACE_METHODS[c]},{base[a]}{e},{g}\n"
                                 for a, b, c, e, g in zip(dl, tl, ml, rl, pl)]))
            else:
                f.write("".join([f"{prefix[a]}{b},{TRACE_METHODS[c]},{base[a]}{e}\n"
                                 for a, b, c, e in zip(dl, tl, ml, rl)]))
    return len(d)


def _write_rows_observe(path: Path, d, t, m, r, p, k, addrs: list[DeviceAddress],
                        schemes: Optional[list[str]], paths: dict[int, list[str]],
                        body: Optional[np.ndarray] = None, bodies: list[str] = (),
                        clients: Optional[int] = None, via: str = "") -> int:
    """The trace rows of a workload with observations or request bodies (slower, but only
    those runs take it); ``paths``: the devices whose resource j is ``paths[id][j]`` instead of
    r<j>; ``body``: per row an index into ``bodies`` (encoded) or -1, the last column."""
    with_payload = bool(p.any()) or body is not None or clients is not None
    schemes = schemes or ["coap"] * len(addrs)
    base = [f"{via}{sc}://{authority(a)}/" for a, sc in zip(addrs, schemes)]
    bl = body.tolist() if body is not None else [-1] * len(d)
    cl = (np.arange(len(d)) % clients).tolist() if clients is not None else [None] * len(d)
    with atomic.replacing(path, buffering=1 << 20) as f:
        f.write(TRACE_HEADER + (",payload_bytes" if with_payload else "")
                + (",client" if clients is not None else "")
                + (TRACE_BODY_COLUMN if body is not None else "") + "\n")
        for a, b, c, e, g, q, x, n in zip(d.tolist(), t.tolist(), m.tolist(), r.tolist(),
                                          p.tolist(), k.tolist(), bl, cl):
            query = f"?o={q}" if q >= 0 else ""
            res = paths[a][e] if a in paths else f"r{e}"
            f.write(f"{a},{b},{TRACE_METHODS[c]},{base[a]}{res}{query}"
                    + (f",{g}" if with_payload else "") + (f",{n}" if n is not None else "")
                    + ("" if body is None else f",{bodies[x]}" if x >= 0 else ",") + "\n")
    return len(d)


def _summarise(cfg: Config, device_id: np.ndarray, resources: dict[str, list], out_dir: Path,
               cd_requests: int, ge_files: list[str], recorded: bool) -> TraceSummary:
    counts = np.bincount(device_id, minlength=cfg.total_devices) if len(device_id) else np.zeros(cfg.total_devices, int)
    groups, warnings, first = [], [], 0
    all_names = cfg.device_names()
    for g in cfg.devices:
        rate = (g.rate_profile.mean_rate(cfg.duration_s) if g.rate_profile is not None
                else 1000.0 / make_distribution(g.rit).mean)
        names = all_names[first:first + g.count]
        # a Thing's resources are not chosen uniformly: its group carries the weighted mean
        st = [sum(row[1] for row in resources[n]) / len(resources[n]) / 1000.0 for n in names
              if n in resources and g.thing is None]
        # a third-party server's service time is unknown: 0 (no rho, no CPU demand)
        s_ms = float(np.mean(st)) if st else (0.0 if g.third_party
                                               else make_distribution(g.service_time).mean)
        req = int(counts[first:first + g.count].sum())
        achieved = req / g.count / cfg.duration_s
        lam = achieved if recorded else rate
        rho = lam * s_ms / 1000.0 / g.threads
        demand = g.count * lam * s_ms / 1000.0 if g.mode == "busy" else 0.0
        groups.append(GroupSummary(g.group, g.count, g.threads, g.mode, req, rate, achieved, s_ms, rho, demand))
        if rho >= 1:
            warnings.append(f"group {g.group}: offered utilisation per device rho = {rho:.2f} >= 1 "
                            f"({lam:.1f} req/s x {s_ms:.2f} ms / {g.threads} thread(s)): the devices cannot keep "
                            f"up, their queues grow for the whole test")
        first += g.count
    return TraceSummary(str(out_dir), int(len(device_id)), cfg.duration_s, groups, cd_requests, ge_files,
                        recorded, warnings)


def write_trace(cfg: Config, out_dir: str | Path, only: Optional[set[int]] = None,
                recorded: Optional[tuple[pd.DataFrame, dict[str, Path]]] = None,
                drawn_elsewhere: Optional[GroupSource] = None) -> TraceSummary:
    """Generate (or, with ``trace:``, import a recorded) workload into ``out_dir``; ``only``:
    the rows of these device ids (a cell's slice of the whole trace, ids kept); ``recorded``:
    what :func:`check_recorded` returned for it already (the pre-flight read every line);
    ``drawn_elsewhere``: the Things' and directory groups
    (:func:`wotbench.things.trace.write_trace` gives it)."""
    out_dir = Path(out_dir)
    (out_dir / RESOURCES_DIR).mkdir(parents=True, exist_ok=True)
    addrs = device_addresses(cfg)
    if cfg.trace is not None:
        return _import_recorded(cfg, out_dir, addrs, only, recorded)
    tr = generate(cfg, drawn_elsewhere)
    if only is not None:
        tr = keep_devices(tr, only, addrs)
    open_clients = cfg.gateways.clients if cfg.gateways.loop == "open" else None
    schemes, via = _schemes(cfg, addrs), httpproxy.via(cfg)
    parts = _uri_parts(tr, addrs, schemes, via)   # the whole trace's and each GE's rows
    _write_rows(out_dir / TRACE_CSV, tr, addrs, schemes=schemes, clients=open_clients,
                via=via, parts=parts)
    durable = len(tr.resources) <= DURABLE_RESOURCE_FILES
    res_dir = str(out_dir / RESOURCES_DIR)   # a str: 10^5 Path joins cost more than the writes
    for name, rows in tr.resources.items():
        write_resources(f"{res_dir}/{name}.csv", rows, durable)
    ge_files = _write_ge_split(cfg, out_dir, tr, addrs, parts, only)
    if drawn_elsewhere is not None:
        drawn_elsewhere.write_files(cfg, out_dir, tr)
    cd_requests = write_cd_files(cfg, out_dir)
    is_req = tr.method < len(HTTP_METHODS)     # OBSERVE/CANCEL lines are not requests
    return _summarise(cfg, tr.device_id[is_req], tr.resources, out_dir, cd_requests, ge_files, False)


def keep_devices(tr: GeneratedTrace, ids: set[int], addrs: list[DeviceAddress]) -> GeneratedTrace:
    """The trace's rows (and resource files) of the devices ``ids`` only: the same rows, times
    and ids as in the whole trace, so every cell's slice is the whole trace's."""
    mask = np.isin(tr.device_id, np.fromiter(ids, np.int64, len(ids)))
    names = {addrs[i].name for i in ids}
    return GeneratedTrace(tr.device_id[mask], tr.send_time_us[mask], tr.method[mask],
                          tr.resource[mask], tr.payload[mask],
                          {n: r for n, r in tr.resources.items() if n in names},
                          {i: p for i, p in tr.paths.items() if i in ids},
                          None if tr.observer is None else tr.observer[mask],
                          {n: t for n, t in tr.thing_tds.items() if n in names},
                          tr.directory_ops, None if tr.body is None else tr.body[mask],
                          tr.bodies, tr.directory_tds)


def _write_ge_split(cfg: Config, out_dir: Path, tr: GeneratedTrace, addrs,
                    parts: tuple[list[str], list[str]],
                    only: Optional[set[int]] = None) -> list[str]:
    G = cfg.gateways.count
    if G <= 1:
        return [TRACE_CSV]
    files = []
    schemes, via = _schemes(cfg, addrs), httpproxy.via(cfg)
    ge = ge_index(tr.device_id, G, only)
    for k in range(G):
        _write_rows(out_dir / ge_trace_name(k, G), tr, addrs, mask=ge == k,
                    schemes=schemes, via=via, parts=parts)
        files.append(ge_trace_name(k, G))
    return files


def check_recorded(cfg: Config) -> tuple[pd.DataFrame, dict[str, Path]]:
    """Read and check a recorded ``trace:`` and its resource files, every line of every file:
    (the trace, resource file per device name); ConfigError listing each bad line as FILE:LINE."""
    src = Path(cfg.trace.file)
    problems: list[str] = []
    try:
        df = read_trace(src)
    except ConfigError as e:
        df, problems = None, list(e.problems)
    n = cfg.total_devices
    if df is not None:
        bad = df.index[(df.device_id.astype(np.int64) >= n)]
        if len(bad):
            row = df.loc[bad[0]]
            more = f" ({len(bad) - 1} more line(s) like it)" if len(bad) > 1 else ""
            problems.append(f"trace.file: {src}:{int(row.line)}: device_id {int(row.device_id)} but the "
                            f"config has {n} devices (ids 0..{n - 1}){more}; add devices or use another trace")
    files, read = {}, {}
    emulated = set(_emulated_names(cfg))
    for dev_id, name in enumerate(cfg.device_names()):
        if name not in emulated:   # a third-party device has no resource file
            continue
        f = cfg.trace.resources_dir / f"{name}.csv"
        if not f.is_file():
            problems.append(f"trace.resources: {f} missing (one resources file per device, named <device>.csv)")
            continue
        try:
            read[dev_id] = (f, read_resources(f))
        except ConfigError as e:
            problems += e.problems
        files[name] = f
    if df is not None:
        problems += [f"trace.file: {p}" for p in observe_problems(df, src, read)]
    if cfg.gateways.block_size is None:   # bodies above one datagram need the GE's block-wise mode
        big = [f"{f}" for f, r in read.values() if len(r) and int(r["payload_bytes"].max()) > MAX_DATAGRAM_PAYLOAD]
        if df is not None and "payload_bytes" in df.columns and int(df.payload_bytes.max()) > MAX_DATAGRAM_PAYLOAD:
            big.insert(0, str(src))
        if big:
            problems.append(f"gateways.block_size: {big[0]} has payload_bytes above {MAX_DATAGRAM_PAYLOAD}, "
                            f"expected gateways.block_size (16..1024) for a block-wise transfer")
    if problems:
        raise ConfigError(problems)
    return df, files


def _import_recorded(cfg: Config, out_dir: Path, addrs: list[DeviceAddress],
                     only: Optional[set[int]] = None,
                     recorded: Optional[tuple[pd.DataFrame, dict[str, Path]]] = None
                     ) -> TraceSummary:
    """Copy a recorded trace, re-addressing every request to its device's configured address;
    ``only``: the lines and resource files of these device ids (a cell's slice, ids kept)."""
    df, files = recorded or check_recorded(cfg)
    if only is not None:
        df = df[df.device_id.isin(only)].reset_index(drop=True)
    resources: dict[str, list] = {}
    for a in addrs:
        if a.name in files and (only is None or a.id in only):   # third-party devices have none
            with atomic.replacing_path(out_dir / RESOURCES_DIR / files[a.name].name) as tmp:
                shutil.copyfile(files[a.name], tmp)
            resources[a.name] = _read_resources(files[a.name])
    paths = df.uri.str.replace(r"^(coaps?|http)://(\[[^\]]*\]|[^/]*)/", "", regex=True)
    host = np.array([f"{httpproxy.via(cfg)}{sc}://{authority(a)}/"
                     for a, sc in zip(addrs, _schemes(cfg, addrs))],
                    dtype=object)
    uris = host[df.device_id.to_numpy()] + paths.to_numpy(dtype=object)
    cols = ["device_id", "send_time_us", "method"]
    out = df[cols].copy()
    out["uri"] = uris
    if "payload_bytes" in df.columns or "body" in df.columns:
        out["payload_bytes"] = (df.payload_bytes.fillna(0).astype(np.int64)
                                if "payload_bytes" in df.columns else 0)
    if "body" in df.columns:   # the requests' own bodies, as recorded (no CSV quoting)
        out["body"] = df.body
    G = cfg.gateways.count
    ge_files = [TRACE_CSV]
    _write_frame(out_dir / TRACE_CSV, out)
    if G > 1:
        ge_files = []
        ge = ge_index(out.device_id.to_numpy(), G, only)
        for k in range(G):
            _write_frame(out_dir / ge_trace_name(k, G), out[ge == k])
            ge_files.append(ge_trace_name(k, G))
    cd_requests = write_cd_files(cfg, out_dir)
    is_req = df.method.isin(HTTP_METHODS).to_numpy()
    return _summarise(cfg, df.device_id.to_numpy()[is_req], resources, out_dir, cd_requests, ge_files, True)


def _write_frame(path: Path, out: pd.DataFrame) -> None:
    """A recorded trace's rows as the GE reads them: a body is percent-encoded and so holds no
    comma, but its quotes must not be CSV-quoted (to_csv would)."""
    with atomic.replacing_path(path) as tmp:
        if "body" not in out.columns:
            out.to_csv(tmp, index=False)
            return
        cols = [out[c].astype(str).tolist() for c in out.columns]
        with open(tmp, "w") as f:
            f.write(",".join(out.columns) + "\n")
            f.write("".join(",".join(row) + "\n" for row in zip(*cols)))


def _emulated_names(cfg: Config) -> list[str]:
    """The wot-devices (the devices that read a resource file), in config order."""
    return [device_name(g.group, k) for g in cfg.devices if not g.third_party
            for k in range(g.count)]


def _read_resources(path: Path) -> list[tuple]:
    df = read_resources(path)
    cols = ["path", "service_time_us", "mode", "payload_bytes"]
    cols += [c for c in df.columns if c.startswith("notify_") or c == "max_age_s"]
    return list(df[cols].itertuples(index=False, name=None))


def print_summary(summary: TraceSummary, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    t = Table(title=f"{'recorded' if summary.recorded else 'generated'} trace: {summary.requests} requests "
                    f"over {summary.duration_s:g} s -> {summary.out_dir}")
    for col in ("group", "devices", "mode", "threads", "requests", "req/s/dev", "S ms", "rho", "CPU cores"):
        t.add_column(col, justify="left" if col in ("group", "mode") else "right")
    for g in summary.groups:
        rho = f"{g.rho:.3f}"
        t.add_row(g.group, str(g.devices), g.mode, str(g.threads), str(g.requests),
                  f"{g.rate_per_device:.2f} ({g.achieved_rate_per_device:.2f})", f"{g.service_time_ms:.3f}",
                  f"[red]{rho}[/red]" if g.rho >= 1 else rho, f"{g.cpu_demand_cores:.2f}")
    console.print(t)
    console.print(f"req/s/dev: offered (achieved in this trace); S: request-weighted mean service time; "
                  f"rho = lambda S / threads per device; CPU cores: busy-mode CPU work offered. In total: "
                  f"{summary.busy_cpu_demand_cores:.2f} core(s). CD probes: {summary.cd_requests}. "
                  f"GE trace file(s): {', '.join(summary.ge_files)}")
    for w in summary.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
