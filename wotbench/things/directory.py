"""Discovery under load: the ``things:`` instances register with a Thing Description
Directory (``directory:``, WoT Discovery §7.3 HTTP API) and a consumer queries it.

The directory is one device group ``tdd`` (``protocol: http``, its ``server:`` the
directory's), so the run is an HTTP run and every request is measured like any other: one
trace of the gateway emulator, per instance (its TD id ``ID``):

| phase | when (test time) | request |
|---|---|---|
| register | uniform in `[0, R)` | `PUT things/ID` with the instance's own TD |
| verify | uniform in `[R, R + V)` | `GET things/ID?verify`: 200 = found |
| update | Poisson at `updates_per_s` in `[R + V, D - X)` | `PUT things/ID?update`, its TD again |
| query | Poisson at `queries_per_s` (all instances) in `[R + V, D - X)` | `GET <query>` |
| deregister | uniform in `[D - X, D)` | `DELETE things/ID` |

(R ``register_within_s``, V ``verify_within_s``, X ``deregister_within_s``, D the test;
the query strings ``?verify``/``?update`` only tell the phases apart in requests.csv: the
directory ignores them.) Each PUT carries its instance's own TD (the trace's ``body``
column, docs/CONTRACTS.md §1): its ``id`` (the URL's, as WoT Discovery's PUT wants), its
``base`` address and a model's instance values; the same bytes as its line of
``things/tds.jsonl``.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import numpy as np

from wotbench.config.distributions import make_distribution
from wotbench.config.http_spec import HTTP_PORT
from wotbench.config.schema import Config, DistSpec
from wotbench.deploy.addressing import host_address
from wotbench.things.instances import compact, instance_td
from wotbench.things.model import ThingPlan, cached_plan
from wotbench.config.things_spec import DirectorySpec
from wotbench.workload.formats import TRACE_METHODS, encode_body
from wotbench.workload.renewal import stationary_arrivals as arrivals

GROUP = "tdd"
_STREAM = 200
# (op, method, path regex): how the report names a directory request (things/affordances.csv)
OPS = (("register", "PUT", r"things/[^?]+"), ("verify", "GET", r"things/[^?]+\?verify"),
       ("update", "PUT", r"things/[^?]+\?update"), ("deregister", "DELETE", r"things/[^?]+"))


@dataclass
class Registered:
    """One instance as the directory sees it."""
    plan: ThingPlan
    index: int
    device: str
    id: str            # its TD's id: the URL's things/ID
    td: str            # its TD, compact JSON: the registration's body


def instances(cfg: Config) -> list[Registered]:
    """Every instance of every ``things:`` entry, with its own TD (addressed as an emulated
    instance would be: the subnet's addresses in order, port 5683; an HTTP Thing's
    ``http://`` on 8080)."""
    out, j = [], 1
    net = ipaddress.ip_network(cfg.network.subnet)
    for k, spec in enumerate(cfg.things or []):
        tp = cached_plan(spec, k, cfg.seed)
        for i in range(spec.count):
            device = f"{tp.group}-{i}"
            http = tp.protocol == "http"
            td = instance_td(tp, i, device, f"{host_address(net, j)}:{HTTP_PORT if http else 5683}",
                             "http" if http else "coap")
            out.append(Registered(tp, i, device, str(td["id"]), compact(td)))
            j += 1
    return out


def group_of(d: DirectorySpec) -> dict:
    return {"group": GROUP, "count": 1, "protocol": "http", "server": d.server,
            "paths": ["things"], "directory": True, "methods": {"GET": 1, "PUT": 1}}


@dataclass
class DirectoryRows:
    device_id: np.ndarray
    send_time_us: np.ndarray
    method: np.ndarray
    resource: np.ndarray
    payload: np.ndarray
    paths: list[str]
    ops: list[tuple[str, str, str, int]]   # (op, method, path regex, requests)
    body: np.ndarray = None                # per row: index into bodies (-1: none)
    bodies: list[str] = None               # instance i's TD, encoded (encode_body)
    tds: dict[str, str] = None             # device -> its TD (things/tds.jsonl)


def rows(cfg: Config, device: int) -> DirectoryRows:
    """The directory's trace (every row to device ``device``, the directory)."""
    d = cfg.directory
    regs = instances(cfg)
    ids = [r.id for r in regs]
    tds = [r.td.encode() for r in regs]
    n = len(ids)
    D = cfg.duration_s * 1e6
    R, V, X = d.register_within_s * 1e6, d.verify_within_s * 1e6, d.deregister_within_s * 1e6
    rng = np.random.default_rng([cfg.seed, _STREAM])
    paths = [f"things/{i}" for i in ids] + [f"things/{i}?verify" for i in ids] + \
            [f"things/{i}?update" for i in ids] + [d.query]
    t, m, r = [], [], []
    put, get, delete = (TRACE_METHODS.index(x) for x in ("PUT", "GET", "DELETE"))
    idx = np.arange(n)
    t.append(rng.random(n) * R), m.append(np.full(n, put)), r.append(idx)
    if V > 0:
        t.append(R + rng.random(n) * V), m.append(np.full(n, get)), r.append(n + idx)
    test_ms = max((D - X) - (R + V), 0) / 1000.0
    if d.updates_per_s > 0 and test_ms > 0:
        rows_ = arrivals(make_distribution(DistSpec(dist="exponential", mean=1000 / d.updates_per_s)),
                         rng, n, test_ms)
        k = np.repeat(idx, [len(x) for x in rows_])
        t.append(R + V + np.concatenate(rows_) * 1000.0), m.append(np.full(len(k), put))
        r.append(2 * n + k)
    if d.queries_per_s > 0 and test_ms > 0:
        q = arrivals(make_distribution(DistSpec(dist="exponential", mean=1000 / d.queries_per_s)),
                     rng, 1, test_ms)[0]
        t.append(R + V + q * 1000.0), m.append(np.full(len(q), get)), r.append(np.full(len(q), 3 * n))
    if X > 0:
        t.append(D - X + rng.random(n) * X), m.append(np.full(n, delete)), r.append(idx)
    times = np.floor(np.concatenate(t)).astype(np.int64)
    meth = np.concatenate(m).astype(np.int8)
    res = np.concatenate(r).astype(np.int64)
    order = np.argsort(times, kind="stable")
    # register (res < n) and update (2n <= res < 3n) carry the instance's TD, sized by it
    own = np.where(meth == put, res % n if n else res, -1)
    size = np.array([len(x) for x in tds] or [0], np.int64)
    payload = np.where(own >= 0, size[np.maximum(own, 0)], 0).astype(np.int64)
    ops = [(o, mm, rx, int(((meth == TRACE_METHODS.index(mm)) & _in_op(o, res, n)).sum()))
           for o, mm, rx in OPS] + [("query", "GET", _regex(d.query), int((res == 3 * n).sum()))]
    return DirectoryRows(np.full(len(times), device, np.int64), times[order], meth[order],
                         res[order], payload[order], paths, ops, own[order],
                         [encode_body(x) for x in tds], {g.device: g.td for g in regs})


def _in_op(op: str, res: np.ndarray, n: int) -> np.ndarray:
    lo = {"register": 0, "deregister": 0, "verify": n, "update": 2 * n}[op]
    return (res >= lo) & (res < lo + n)


def _regex(path: str) -> str:
    return re.escape(path)


def affordance_rows(cfg: Config, first: int, ops: list[tuple[str, str, str, int]]) -> list[dict]:
    """The directory's rows of things/affordances.csv (:mod:`.files`)."""
    return [{"group": GROUP, "model": "Thing Description Directory", "first_device": first,
             "devices": 1, "affordance": "things", "op": op, "method": m, "path": rx,
             "pattern": rx} for op, m, rx, _ in ops]
