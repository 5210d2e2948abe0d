"""One ``things:`` entry resolved against its TD/TM file: what each instance serves and what
the workload sends it (:class:`ThingPlan`), or every problem, each naming the config key and
the file with a JSON pointer.

Checked here: the file is JSON; a model's placeholders all have values; the TD (of a model:
the TDs of its first and last instance, which differ only in placeholder values) passes the
TD 1.1 JSON Schema (:mod:`.tdschema`); every ``load`` entry names an affordance of the TD
with a form for its op (:mod:`.affordances`), all of one protocol: CoAP when every op has a
CoAP form, else HTTP when every op has an HTTP form (the instance is then an HTTP Thing,
:mod:`.http_thing`); the affordance's data schema yields a conforming value
(:mod:`.payloads`), a CoAP request's within one datagram; and the entries of one affordance
agree on its service time.
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
from wotbench.things.affordances import (SSE, WELL_KNOWN_WOT, Affordance, Form, affordances,
                                        find, with_default_forms)
from wotbench.config.things_spec import OBSERVE_OPS, OpLoad, ServiceTime, ThingSpec, service_mean_ms
from wotbench.things.tdfile import (TdError, TdProblem, instance_values, instantiate,
                                    model_problems, read_json)
from wotbench.things.tdschema import td_problems

NOT_OBSERVABLE = ("none", 0, 0, 0, "con", 60)
MAX_AGE_S = 60
# a CoAP request's own body is one datagram (the GE sends a trace body unsplit, docs/WOT.md)
MAX_COAP_REQUEST_BODY = 1024


@dataclass
class Resource:
    path: str
    affordance: str            # properties/NAME, ... or "" for .well-known/wot
    service_us: int            # the mean (the workload draws each instance's from `service`)
    response_bytes: int        # the largest value of its data schema (payloads.max_bytes)
    notify: tuple = NOT_OBSERVABLE   # the six Observe columns of the resource file
    service: ServiceTime = 0.0       # ms, or a distribution (spec.ServiceTime)


@dataclass
class LoadPlan:
    entry: OpLoad
    index: int                 # position in the entry's load list
    resource: int              # index into ThingPlan.resources
    method: str                # GET | PUT | POST | DELETE | OBSERVE
    request_bytes: int         # the largest value (the trace's bodies are drawn per request)
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
    protocol: str = "coap"     # coap | http: the scheme of the forms its instances serve

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
    def sse_loads(self) -> list["LoadPlan"]:
        """The observeproperty and subscribeevent entries served as Server-Sent Events (HTTP;
        no trace rows)."""
        return [lp for lp in self.loads if lp.method == SSE]

    @property
    def observed(self) -> bool:
        return any(lp.method == "OBSERVE" for lp in self.loads)

    def request_rate_per_s(self) -> float:
        """Requests per second per instance (observations excluded)."""
        return sum(1000.0 / lp.entry.mean_interval_ms for lp in self.loads
                   if lp.method not in ("OBSERVE", SSE))

    def weighted_service_ms(self) -> float:
        """The request-weighted mean service time per instance, ms (for the CD's `auto`)."""
        w = [(1000.0 / lp.entry.mean_interval_ms, self.resources[lp.resource].service_us)
             for lp in self.loads if lp.method not in ("OBSERVE", SSE)]
        if not w:
            return service_mean_ms(self.spec.service_time_ms)
        return sum(r * s for r, s in w) / sum(r for r, _ in w) / 1000.0


def default_group(spec: ThingSpec) -> str:
    stem = Path(spec.file).name.split(".")[0].lower()
    name = "".join(c if c.isalnum() else "-" for c in stem).strip("-") or "thing"
    return name[:40]


def _seed(file: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{file}|{salt}".encode()).digest()[:8], "little")


def response_schema(a: Affordance) -> Optional[dict]:
    """What a read, an invocation or a notification of ``a`` answers with."""
    return _schema_for(a, request=False)


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
    protocol = _protocol(spec, affs)
    resources: list[Resource] = []
    by_path: dict[str, int] = {}
    for a in affs:
        schema = _schema_for(a, request=False)
        _, why = payloads.body(schema, rng)
        if why:
            problems.append(TdProblem(file, a.pointer, why))
        resp = payloads.max_bytes(schema) if schema else 0
        sv = service.get(a.key, spec.service_time_ms)
        st = round(service_mean_ms(sv) * 1000)
        for f in a.forms_of(protocol).values():
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
        form = a.forms_of(protocol).get(e.op)
        if form is None:
            pointer, why = _no_form(a, e.op, protocol)
            problems.append(TdProblem(file, pointer, f"{at}.op: {why}"))
            continue
        why = _observe_problem(e, form, a, spec)
        if why:
            problems.append(TdProblem(file, form.pointer, f"{at}: {why}"))
            continue
        if e.notify is not None and e.notify.dist not in NOTIFY_DISTS:
            problems.append(TdProblem(file, a.pointer, f"{at}.notify.dist: {e.notify.dist}, "
                            f"expected one of {', '.join(NOTIFY_DISTS)} (what wot-device and an HTTP "
                            "Thing emulate)"))
            continue
        req, req_schema = 0, None
        if form.method in ("PUT", "POST", "PATCH"):
            req_schema = _schema_for(a, request=True) or None
            _, why = payloads.body(req_schema, rng)
            req = payloads.max_bytes(req_schema) if req_schema and not why else 0
            if why:
                problems.append(TdProblem(file, a.pointer, why))
            elif protocol == "coap" and req > MAX_COAP_REQUEST_BODY:
                problems.append(TdProblem(file, a.pointer, f"{at}: a value of its "
                                f"{'input' if a.kind == 'actions' else 'data schema'} may take "
                                f"{req} bytes, expected at most {MAX_COAP_REQUEST_BODY} (each "
                                "CoAP request carries its own value in one datagram: limit the "
                                "schema's maxLength, maxItems or properties)"))
        r = by_path[form.path]
        if form.method == "OBSERVE":
            resources[r].notify = _notify_cols(e, resources[r].service_us)
        loads.append(LoadPlan(e, i, r, form.method, req, req_schema if req else None))
    if problems:
        raise TdError(problems)
    resources.append(Resource(WELL_KNOWN_WOT, "", 0, 0))   # size: per instance, its own TD
    return ThingPlan(spec, key, spec.group or default_group(spec), template, affs, resources,
                     loads, protocol)


def _observe_problem(e: OpLoad, form: Form, a: Affordance, spec: ThingSpec) -> Optional[str]:
    """What an observe entry (or an observe key on another op) lacks for its form, or None."""
    if e.op not in OBSERVE_OPS:
        return "subscribed: only for observeproperty over HTTP SSE" \
            if e.subscribed is not None else None
    if form.method == "OBSERVE":
        if e.notify is None:
            return f"{e.op} needs notify: {{dist, mean}} (ms between notifications)"
        if e.subscribed is not None:
            return "subscribed: only for observeproperty over HTTP SSE (a CoAP observe op " \
                "registers `observers` per instance, every instance)"
        return None
    if e.op == "subscribeevent":   # SSE: the Thing emits on its own schedule
        if e.notify is None:
            return ("subscribeevent over Server-Sent Events needs notify: {dist, mean} (ms "
                    "between the events each instance emits)")
        return None
    if e.notify is not None:   # SSE
        return ("notify: an observeproperty over Server-Sent Events notifies on each write of "
                "the property (the gateway emulator's writeproperty), expected no notify")
    if "writeproperty" not in a.http_forms:
        return (f"{a.key} has no HTTP writeproperty form: its Server-Sent Events are pushed on "
                "each write, so nothing of the run would notify, expected a writable property")
    if not any(x.affordance == e.affordance and x.op == "writeproperty" for x in spec.load):
        return (f"no load entry writes {a.key}: its Server-Sent Events are pushed on each write, "
                f"expected a writeproperty entry of {a.key} (the updates whose notification "
                "latency is measured)")
    return None


def _protocol(spec: ThingSpec, affs: list[Affordance]) -> str:
    """CoAP when every op of the workload has a CoAP form (without a workload: when any
    affordance has one, or none has an HTTP form), else HTTP; a mix is named per entry by
    :func:`_no_form`."""
    by_key = {a.key: a for a in affs}
    used = [(by_key[e.affordance], e.op) for e in spec.load if e.affordance in by_key]
    if not used:
        return "http" if any(a.http_forms for a in affs) and not any(a.forms for a in affs) \
            else "coap"
    if all(op in a.forms for a, op in used):
        return "coap"
    if all(op in a.http_forms for a, op in used) or not any(op in a.forms for a, op in used):
        return "http"
    return "coap"


def _no_form(a: Affordance, op: str, protocol: str) -> tuple[str, str]:
    """(pointer, reason) of a load entry whose op has no form of the Thing's protocol."""
    other = a.http_forms if protocol == "coap" else a.forms
    if op in other:
        mine, theirs = ("a CoAP", "an HTTP") if protocol == "coap" else ("an HTTP", "a CoAP")
        return (f"{a.pointer}/forms", f"only {theirs} form ({other[op].pointer}) offers {op}, "
                f"while other ops of the load have only {mine[mine.index(' ') + 1:]} forms: an "
                f"instance speaks one protocol, expected {mine} form for {op} (or "
                f"{theirs[theirs.index(' ') + 1:]} forms for every op)")
    if op in a.http_refused:
        pointer, why = a.http_refused[op]
        return pointer, f"{op}: {why}"
    return f"{a.pointer}/forms", f"no form offers {op}, expected a form with op {op}"


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

