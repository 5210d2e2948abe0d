"""One ``things:`` entry resolved against its TD/TM file: what each instance serves and what
the workload sends it (:class:`ThingPlan`), or every problem, each naming the config key and
the file with a JSON pointer.

Checked here: the file is JSON; a model's placeholders all have values; the TD (of a model:
the TDs of its first and last instance, which differ only in placeholder values) passes the
TD 1.1 JSON Schema (:mod:`.tdschema`); every ``load`` entry names an affordance of the TD
with a CoAP form for its op (:mod:`.affordances`); the affordance's data schema yields a
conforming value (:mod:`.payloads`); and the entries of one affordance agree on its service
time.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np

from wotbench.config.schema import NOTIFY_DISTS
from wotbench.things import payloads
from wotbench.things.affordances import (WELL_KNOWN_WOT, Affordance, affordances, find,
                                        with_default_forms)
from wotbench.things.spec import OBSERVE_OPS, OpLoad, ServiceTime, ThingSpec, service_mean_ms
from wotbench.things.tdfile import (TdError, TdProblem, instance_values, instantiate,
                                    model_problems, read_json)
from wotbench.things.tdschema import td_problems

NOT_OBSERVABLE = ("none", 0, 0, 0, "con", 60)
MAX_AGE_S = 60


@dataclass
class Resource:
    path: str
    affordance: str            # properties/NAME, ... or "" for .well-known/wot
    service_us: int            # the mean (the workload draws each instance's from `service`)
    response_bytes: int
    notify: tuple = NOT_OBSERVABLE   # the six Observe columns of the resource file
    service: ServiceTime = 0.0       # ms, or a distribution (spec.ServiceTime)


@dataclass
class LoadPlan:
    entry: OpLoad
    index: int                 # position in the entry's load list
    resource: int              # index into ThingPlan.resources
    method: str                # GET | PUT | POST | DELETE | OBSERVE
    request_bytes: int         # of one value (the trace's bodies are drawn per request)
    request_schema: Optional[dict] = None   # a PUT/POST's data schema: its bodies' values


@dataclass
class ThingPlan:
    spec: ThingSpec
    key: str                   # "things[k]"
    group: str
    template: dict             # the TD, or the TM before instantiation
    affordances: list[Affordance]
    resources: list[Resource]
    loads: list[LoadPlan] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return str(self.template.get("title") or Path(self.spec.file).name)

    def td(self, index: int, device: str) -> dict:
        """The TD of instance ``index`` before addressing (:mod:`.instances` adds that)."""
        if not self.spec.is_model:
            return self.template
        return with_default_forms(
            instantiate(self.template, instance_values(self.spec.instance, index, device)))

    @property
    def observed(self) -> bool:
        return any(lp.method == "OBSERVE" for lp in self.loads)

    def request_rate_per_s(self) -> float:
        """Requests per second per instance (observations excluded)."""
        return sum(1000.0 / lp.entry.mean_interval_ms for lp in self.loads
                   if lp.method != "OBSERVE")

    def weighted_service_ms(self) -> float:
        """The request-weighted mean service time per instance, ms (for the CD's `auto`)."""
        w = [(1000.0 / lp.entry.mean_interval_ms, self.resources[lp.resource].service_us)
             for lp in self.loads if lp.method != "OBSERVE"]
        if not w:
            return service_mean_ms(self.spec.service_time_ms)
        return sum(r * s for r, s in w) / sum(r for r, _ in w) / 1000.0


def default_group(spec: ThingSpec) -> str:
    stem = Path(spec.file).name.split(".")[0].lower()
    name = "".join(c if c.isalnum() else "-" for c in stem).strip("-") or "thing"
    return name[:40]


def _seed(file: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{file}|{salt}".encode()).digest()[:8], "little")


def _schema_for(a: Affordance, request: bool) -> Optional[dict]:
    if a.kind == "properties":
        return payloads.data_schema(a.description)
    if a.kind == "actions":
        s = a.description.get("input" if request else "output")
        return s if isinstance(s, dict) else None
    s = a.description.get("data")
    return None if request else (s if isinstance(s, dict) else None)


def _notify_cols(e: OpLoad, service_us: int) -> tuple:
    iv = e.notify
    mean = float(iv.mean)
    cv = float(iv.cv or 0)
    jitter = {"uniform": mean * cv * 3 ** 0.5, "normal": mean * cv}.get(iv.dist, 0.0)
    dist = "deterministic" if iv.dist == "uniform" and jitter == 0 else iv.dist
    return (dist, max(1, round(mean * 1000)), round(jitter * 1000), service_us, e.notify_type,
            MAX_AGE_S)


def _shown(v: ServiceTime) -> str:
    return str(v.model_dump(exclude_none=True)) if hasattr(v, "model_dump") else f"{v:g}"


def plan(spec: ThingSpec, k: int, seed: int) -> ThingPlan:
    """Resolve entry ``k``; raises TdError (every problem) when it cannot be emulated."""
    key = f"things[{k}]"
    file = spec.file
    template = read_json(file)
    problems: list[TdProblem] = []
    if spec.is_model:
        problems = model_problems(file, template, spec.instance, f"{key}.instance")
        if problems:
            raise TdError(problems)
        group = spec.group or default_group(spec)
        for i in sorted({0, spec.count - 1}):
            td = with_default_forms(
                instantiate(template, instance_values(spec.instance, i, f"{group}-{i}")))
            problems += td_problems(file, td, f"instance {i}")
    else:
        td = template
        problems += td_problems(file, td)
    if problems:
        raise TdError(problems)
    affs, problems = affordances(file, td)
    rng = np.random.default_rng([seed, _seed(file, "payload") % 2**32])
    # service time per affordance: its load entries' (they must agree), else the entry's default
    service: dict[str, ServiceTime] = {}
    for i, e in enumerate(spec.load):
        if e.service_time_ms is None:
            continue
        prev = service.setdefault(e.affordance, e.service_time_ms)
        if prev != e.service_time_ms:
            problems.append(TdProblem(file, f"/{e.affordance}", f"{key}.load[{i}].service_time_ms "
                            f"{_shown(e.service_time_ms)} but an earlier entry of {e.affordance} "
                            f"says {_shown(prev)}, expected one service time per affordance"))
    resources: list[Resource] = []
    by_path: dict[str, int] = {}
    for a in affs:
        resp, why = payloads.body(_schema_for(a, request=False), rng)
        if why:
            problems.append(TdProblem(file, a.pointer, why))
        sv = service.get(a.key, spec.service_time_ms)
        st = round(service_mean_ms(sv) * 1000)
        for f in a.forms.values():
            if f.path not in by_path:
                by_path[f.path] = len(resources)
                resources.append(Resource(f.path, a.key, st, resp, service=sv))
    loads = []
    for i, e in enumerate(spec.load):
        at = f"{key}.load[{i}]"
        a = find(affs, e.affordance)
        if a is None:
            problems.append(TdProblem(file, f"/{e.affordance}", f"{at}.affordance: the TD has no "
                            f"{e.affordance}, expected one of "
                            f"{', '.join(x.key for x in affs) or '(none)'}"))
            continue
        form = a.forms.get(e.op)
        if form is None:
            if e.op in a.http_only:
                why = (f"only an HTTP form ({a.http_only[e.op]}) offers {e.op}: the emulated "
                       "devices (wot-device, wot-fleet) speak CoAP only, expected a coap:// form")
            else:
                why = f"no form offers {e.op}, expected a form with op {e.op}"
            problems.append(TdProblem(file, f"{a.pointer}/forms", f"{at}.op: {why}"))
            continue
        if e.op in OBSERVE_OPS and e.notify.dist not in NOTIFY_DISTS:
            problems.append(TdProblem(file, a.pointer, f"{at}.notify.dist: {e.notify.dist}, "
                            f"expected one of {', '.join(NOTIFY_DISTS)} (what wot-device emulates)"))
            continue
        req, req_schema = 0, None
        if form.method in ("PUT", "POST"):
            req_schema = _schema_for(a, request=True) or None
            req, why = payloads.body(req_schema, rng)
            if why:
                problems.append(TdProblem(file, a.pointer, why))
        r = by_path[form.path]
        if e.op in OBSERVE_OPS:
            resources[r].notify = _notify_cols(e, resources[r].service_us)
        loads.append(LoadPlan(e, i, r, form.method, req, req_schema if req else None))
    if problems:
        raise TdError(problems)
    resources.append(Resource(WELL_KNOWN_WOT, "", 0, 0))   # size: per instance, its own TD
    return ThingPlan(spec, key, spec.group or default_group(spec), template, affs, resources,
                     loads)


@lru_cache(maxsize=32)
def _cached(spec_json: str, k: int, seed: int, mtime_ns: int) -> ThingPlan:
    return plan(ThingSpec.model_validate_json(spec_json), k, seed)


def cached_plan(spec: ThingSpec, k: int, seed: int) -> ThingPlan:
    """:func:`plan`, computed once per entry, seed and file version."""
    try:
        mtime = Path(spec.file).stat().st_mtime_ns
    except OSError:
        mtime = 0
    return _cached(spec.model_dump_json(), k, seed, mtime)

