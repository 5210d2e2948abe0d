"""The trace rows and resource files of a device group made from a ``things:`` entry.

Per instance, its resources are the TD's CoAP form paths (service time per affordance,
Observe columns for an observed property or subscribed event) and ``.well-known/wot``, whose
``body`` column is the instance's own TD. A resource of an affordance with a data schema
(property; action ``output``) answers with one value of it drawn per instance from ``[seed,
group index, 98, instance]`` (the ``body`` column: the wot-device/wot-fleet resource file
holds one body per resource, so an instance answers every read with the same value); an
observable resource's notifications and a schema-less resource carry filler bytes. An HTTP
Thing (:attr:`ThingPlan.protocol` http) has no resource file: its server
(:mod:`.http_thing`) computes the same service times and values with these functions.
Per instance and ``load`` entry: a renewal process of requests (``rate_per_s``: Poisson, or
``interval``) to the op's form with its method; a PUT/POST (writeproperty, invokeaction with an
``input``) carries its own value of the affordance's data schema as compact JSON (the trace's
``body`` column, its size the ``payload_bytes``), drawn from ``[seed, group index, 200 + entry
index]`` so the bodies do not move the requests' times; an
observe op gives ``observers`` OBSERVE lines at uniform instants in
``[0, register_within_s)`` and their CANCEL at the end of the test (observer k of a device
has its own URI ``?o=k``). Every draw comes from ``numpy.random.default_rng([seed, group
index, 100 + entry index])``: the same seed gives the same trace, and adding an entry does
not change the others' rows.
"""
from __future__ import annotations

import re

import numpy as np

from wotbench.config.distributions import make_distribution
from wotbench.config.schema import Config, DistSpec
from wotbench.deploy.resolve import DeviceAddress
from wotbench.things import payloads
from wotbench.things.instances import compact, instance_td
from wotbench.things.affordances import SSE, find
from wotbench.things.model import ThingPlan, cached_plan, response_schema
from wotbench.workload.formats import TRACE_METHODS, authority, encode_body
from wotbench.workload.renewal import stationary_arrivals as arrivals
from wotbench.workload.generate import GroupPart

_STREAM_BASE = 100
_STREAM_BODY = 200      # + entry index: the request bodies' values
STREAM_SERVICE = 99     # the instances' service times (the load entries' streams are 100 + i)
_STREAM_RESPONSE = 98   # + instance index: the values its resources answer with
_OBSERVE, _CANCEL = TRACE_METHODS.index("OBSERVE"), TRACE_METHODS.index("CANCEL")


def thing_plan(cfg: Config, gi: int) -> ThingPlan:
    g = cfg.devices[gi]
    return cached_plan(cfg.things[g.thing], g.thing, cfg.seed)


def _interval(e) -> DistSpec:
    if e.rate_per_s is not None:
        return DistSpec(dist="exponential", mean=1000.0 / e.rate_per_s)
    return e.interval


def service_times_us(tp: ThingPlan, count: int, rng: np.random.Generator) -> np.ndarray:
    """Each instance's service time per resource (µs, ``[count, resources]``): a fixed one as
    written; a distribution as a device group's resources get theirs: the ``count`` bin means
    (each equally likely) in a random order, so the group has the distribution itself."""
    out = np.zeros((count, len(tp.resources)), np.int64)
    for j, r in enumerate(tp.resources):
        if isinstance(r.service, DistSpec) and r.service.dist != "deterministic":
            d = make_distribution(r.service)
            out[:, j] = rng.permutation(np.maximum(np.rint(d.bin_means(count) * 1000.0), 0))
        else:
            out[:, j] = r.service_us
    return out


def response_values(tp: ThingPlan, seed: int, gi: int, index: int) -> list[bytes | None]:
    """Per resource of instance ``index`` (group ``gi``), the value it answers with: compact
    JSON of its affordance's data schema; None for ``.well-known/wot`` (its TD), an observable
    resource (notifications carry filler: a resource file's body is refused there) and an
    affordance without a schema."""
    rng = np.random.default_rng([seed, gi, _STREAM_RESPONSE, index])
    out: list[bytes | None] = []
    for r in tp.resources:
        a = find(tp.affordances, r.affordance) if r.affordance else None
        schema = response_schema(a) if a is not None else None
        if not schema or r.notify[0] != "none":
            out.append(None)
            continue
        out.append(payloads.value_text(schema, rng).encode())
    return out


def resource_rows(tp: ThingPlan, mode: str, td: bytes, observable: bool,
                  service_us: np.ndarray, values: list[bytes | None]) -> list[tuple]:
    """One instance's resource file rows (``service_us``: its service time per resource;
    ``values``: :func:`response_values`): ``.well-known/wot`` answers with ``td`` itself and a
    resource with a value with that value (the ``body`` column), every other one with filler
    bytes of its data schema's largest value; a notification's sensor read takes the
    resource's service time."""
    rows = []
    for r, st, v in zip(tp.resources, service_us.tolist(), values):
        body = td if r.affordance == "" else v
        row = (r.path, st, mode, len(body) if body is not None else r.response_bytes)
        notify = r.notify[:3] + (st,) + r.notify[4:] if r.notify[0] != "none" else r.notify
        rows.append((row + notify if observable else row)
                    + (encode_body(body) if body is not None else "",))
    return rows


def group_rows(cfg: Config, gi: int, first: int, addrs: list[DeviceAddress]) -> GroupPart:
    """Rows of group ``gi`` (devices ``first`` .. ``first + count - 1``)."""
    g = cfg.devices[gi]
    tp = thing_plan(cfg, gi)
    out = GroupPart()
    duration_us = int(round(cfg.duration_s * 1e6))
    paths = [r.path for r in tp.resources]
    observable = any(r.notify[0] != "none" for r in tp.resources)
    http = tp.protocol == "http"   # an HTTP Thing's server computes its own (.http_thing)
    scheme = "http" if http else "coaps" if cfg.dtls.enabled else "coap"
    service = service_times_us(tp, g.count, np.random.default_rng([cfg.seed, gi, STREAM_SERVICE]))
    for k in range(g.count):
        a = addrs[first + k]
        text = compact(instance_td(tp, k, a.name, authority(a), scheme))
        out.tds[a.name] = text
        if not http:
            out.resources[a.name] = resource_rows(tp, g.mode, text.encode(), observable,
                                                  service[k], response_values(tp, cfg.seed, gi, k))
        out.paths[a.id] = paths
    ids = np.arange(first, first + g.count, dtype=np.int64)
    next_observer = np.zeros(g.count, np.int64)
    for lp in tp.loads:
        rng = np.random.default_rng([cfg.seed, gi, _STREAM_BASE + lp.index])
        e = lp.entry
        if lp.method == SSE:
            continue   # the notification sink subscribes (notify:, wotbench.things.sse_notify)
        if lp.method == "OBSERVE":
            n = g.count * e.observers
            dev = np.repeat(ids, e.observers)
            obs = np.repeat(next_observer, e.observers) + np.tile(np.arange(e.observers), g.count)
            next_observer += e.observers
            reg = np.floor(rng.random(n) * e.register_within_s * 1e6).astype(np.int64)
            reg = np.minimum(reg, max(duration_us - 2, 0))
            end = np.full(n, duration_us, np.int64)
            out.device_id += [dev, dev]
            out.send_time_us += [reg, end]
            out.method += [np.full(n, _OBSERVE, np.int8), np.full(n, _CANCEL, np.int8)]
            out.resource += [np.full(n, lp.resource, np.int64)] * 2
            out.payload += [np.zeros(n, np.int64)] * 2
            out.observer += [obs, obs]
            out.body += [np.full(n, -1, np.int32)] * 2
            continue
        times = arrivals(make_distribution(_interval(e)), rng, g.count, cfg.duration_s * 1000.0)
        n = sum(len(t) for t in times)
        out.device_id.append(np.repeat(ids, [len(t) for t in times]))
        out.send_time_us.append(np.floor(np.concatenate(times) * 1000.0).astype(np.int64)
                                if n else np.zeros(0, np.int64))
        out.method.append(np.full(n, TRACE_METHODS.index(lp.method), np.int8))
        out.resource.append(np.full(n, lp.resource, np.int64))
        sizes, index = request_bodies(lp, n, np.random.default_rng([cfg.seed, gi, _STREAM_BODY + lp.index]),
                                      out.bodies)
        out.payload.append(sizes)
        out.body.append(index)
        out.observer.append(np.full(n, -1, np.int64))
    return out


def request_bodies(lp, n: int, rng: np.random.Generator, bodies: list[str]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(payload bytes, index into ``bodies``) of ``n`` requests of load entry ``lp``: each a
    value of its data schema as compact JSON (distinct texts kept once, encoded for the trace's
    body column); no schema (a GET, an action without input): 0 bytes, no body."""
    if lp.request_schema is None:
        return np.full(n, lp.request_bytes, np.int64), np.full(n, -1, np.int32)
    seen = {b: k for k, b in enumerate(bodies)}
    sizes, index = np.zeros(n, np.int64), np.zeros(n, np.int32)
    for j in range(n):
        text = payloads.value_text(lp.request_schema, rng).encode()
        enc = encode_body(text)
        k = seen.get(enc)
        if k is None:
            k = seen[enc] = len(bodies)
            bodies.append(enc)
        sizes[j], index[j] = len(text), k
    return sizes, index


def affordance_rows(cfg: Config) -> list[dict]:
    """One row per group, load entry: what the report groups requests by (things/affordances.csv)."""
    rows, first = [], 0
    for gi, g in enumerate(cfg.devices):
        if g.thing is not None:
            tp = thing_plan(cfg, gi)
            for lp in tp.loads:
                if lp.method == SSE:
                    continue   # no requests: its figures are the notification sink's
                rows.append({"group": g.group, "model": tp.model_name, "first_device": first,
                             "devices": g.count, "affordance": lp.entry.affordance,
                             "op": lp.entry.op, "method": lp.method,
                             "path": tp.resources[lp.resource].path,
                             # the observers' ?o=k, a query a form's href may not have had
                             "pattern": re.escape(tp.resources[lp.resource].path) + r"(\?.*)?"})
        first += g.count
    return rows
