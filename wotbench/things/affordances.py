"""The resources an emulated Thing serves: one per form path of its TD's affordances.

Forms are read as TD 1.1 §5.3.4 says: ``href`` resolved against ``base``, ``op`` defaulting by
affordance kind (a property: readproperty and writeproperty, only one of them when
``readOnly``/``writeOnly``; an action: invokeaction; an event: subscribeevent and
unsubscribeevent). A ``coap(s)://`` (or relative, base-less) form's method is ``cov:method``
(CoAP binding) or the op's default (read GET, write PUT, invoke POST, observe/subscribe GET
with Observe); an ``http(s)://`` form's is ``htv:methodName`` (HTTP binding) or the same
defaults. An affordance keeps its CoAP and its HTTP forms apart (:class:`Affordance`): an
instance speaks one of them (:mod:`.model` picks it). observeproperty and subscribeevent over
HTTP with ``subprotocol: sse`` are served as Server-Sent Events, with ``subprotocol: longpoll``
as long-polls (method ``SSE`` for both: a GET held, no trace rows; the form keeps its
subprotocol; the HTTP Thing pushes an event / answers the held GET on each write of the
property, or on the event's own schedule, :mod:`.http_thing`); an observe op over HTTP without
a subprotocol (or another one) is not emulated: the op is kept in
``http_refused`` with the reason, named when the workload asks for it. Thing-level forms
(readallproperties, ...) and URI templates are not emulated and refused when the workload
names them. A form's query string is dropped (the device matches paths).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urljoin, urlsplit

from wotbench.things.tdfile import TdProblem

KINDS = ("properties", "actions", "events")
DEFAULT_METHOD = {"readproperty": "GET", "writeproperty": "PUT", "invokeaction": "POST",
                  "observeproperty": "OBSERVE", "subscribeevent": "OBSERVE"}
COAP_SCHEMES = ("coap", "coaps", "")   # "": a relative href without base = our device
HTTP_SCHEMES = ("http", "https")
HTTP_FORM_METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")
SSE = "SSE"   # an HTTP observe form with subprotocol sse/longpoll: a GET held, no trace rows
HELD_SUBPROTOCOLS = ("sse", "longpoll")   # HTTP observe forms served (method SSE)
# why an observe op over HTTP is not emulated, by the form's subprotocol
_HTTP_OBSERVE_WHY = {
    "": "an HTTP form without a subprotocol (longpoll, sse) cannot notify, and is not emulated"}
WELL_KNOWN_WOT = ".well-known/wot"     # where each instance serves its TD (WoT Discovery §6.1)
_BAD_PATH = re.compile(r"[\s,\"{}]")


@dataclass
class Form:
    path: str          # without the leading slash
    method: str        # GET | PUT | POST | DELETE | OBSERVE (CoAP); PATCH too (HTTP)
    pointer: str       # of the form in the TD
    subprotocol: str = ""   # an HTTP observe form's: sse | longpoll


@dataclass
class Affordance:
    kind: str          # properties | actions | events
    name: str
    pointer: str
    description: dict  # the affordance object of the TD
    forms: dict[str, Form] = field(default_factory=dict)   # op -> its CoAP form
    http_forms: dict[str, Form] = field(default_factory=dict)   # op -> its HTTP form
    http_refused: dict[str, tuple[str, str]] = field(default_factory=dict)  # op -> (pointer, why)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    def forms_of(self, protocol: str) -> dict[str, Form]:
        return self.http_forms if protocol == "http" else self.forms


def default_ops(kind: str, aff: dict) -> list[str]:
    if kind == "properties":
        if aff.get("readOnly"):
            return ["readproperty"]
        if aff.get("writeOnly"):
            return ["writeproperty"]
        return ["readproperty", "writeproperty"]
    return ["invokeaction"] if kind == "actions" else ["subscribeevent", "unsubscribeevent"]


def with_default_forms(td: dict) -> dict:
    """``td`` with a CoAP form ``<kind>/<name>`` on every affordance that has none (a Thing
    Model may leave forms to its instances, TD 1.1 §10; the binding is WoTbench's): the kind's
    default ops (no ``op``), or those plus observeproperty/unobserveproperty on an
    ``observable`` property."""
    for kind in KINDS:
        block = td.get(kind)
        if not isinstance(block, dict):
            continue
        for name, aff in block.items():
            if isinstance(aff, dict) and "forms" not in aff:
                # contentType defaults to application/json, op to the kind's ops (TD 1.1 §5.4)
                form = {"href": f"{kind}/{name}"}
                if kind == "properties" and aff.get("observable"):
                    form["op"] = default_ops(kind, aff) + ["observeproperty", "unobserveproperty"]
                aff["forms"] = [form]
    return td


def _form_ops(kind: str, aff: dict, form: dict) -> list[str]:
    op = form.get("op")
    if op is None:
        return default_ops(kind, aff)
    return [op] if isinstance(op, str) else [o for o in op if isinstance(o, str)]


def affordances(file: str, td: dict) -> tuple[list[Affordance], list[TdProblem]]:
    """Every affordance of ``td`` with its CoAP and HTTP form per op, and the problems found."""
    out, problems = [], []
    base = td.get("base") if isinstance(td.get("base"), str) else ""
    for kind in KINDS:
        block = td.get(kind) or {}
        if not isinstance(block, dict):
            continue   # the schema check names it
        for name, aff in block.items():
            if not isinstance(aff, dict):
                continue
            a = Affordance(kind, name, f"/{kind}/{name}", aff)
            for j, form in enumerate(aff.get("forms") or []):
                if not isinstance(form, dict) or not isinstance(form.get("href"), str):
                    continue
                at = f"{a.pointer}/forms/{j}"
                href = urljoin(base, form["href"]) if base else form["href"]
                parts = urlsplit(href)
                http = parts.scheme in HTTP_SCHEMES
                if not http and parts.scheme not in COAP_SCHEMES:
                    continue   # another protocol (mqtt, ws, ...): not emulated
                for op in _form_ops(kind, aff, form):
                    known = a.http_forms if http else a.forms
                    if op in known or op not in DEFAULT_METHOD:
                        continue
                    sub = form.get("subprotocol") if isinstance(form.get("subprotocol"), str) else ""
                    if http and op in ("observeproperty", "subscribeevent") and \
                            sub in HELD_SUBPROTOCOLS:
                        pass   # SSE / long-poll: on each write / on the event's schedule
                    elif http and op in ("observeproperty", "subscribeevent"):
                        a.http_refused.setdefault(op, (at, _HTTP_OBSERVE_WHY.get(
                            sub, f"subprotocol {sub!r} is not emulated")
                            + ", expected a coap:// form for it (CoAP Observe)"))
                        continue
                    path = parts.path.lstrip("/")
                    method = _method(form, op, http)
                    allowed = HTTP_FORM_METHODS if http else ("GET", "PUT", "POST", "DELETE")
                    bad = None
                    if not path or _BAD_PATH.search(path):
                        bad = (f"{at}/href", f"path {parts.path!r}: expected a non-empty URI "
                               "path without spaces, commas, quotes or URI-template braces")
                    elif method not in ("OBSERVE", SSE) and method not in allowed:
                        bad = (f"{at}/{'htv:methodName' if http else 'cov:method'}",
                               f"{method!r}, expected {', '.join(allowed)}")
                    if bad and http:   # named only if the workload needs this HTTP form
                        a.http_refused.setdefault(op, bad)
                    elif bad:
                        problems.append(TdProblem(file, *bad))
                    else:
                        known[op] = Form(path, method, at, sub if method == SSE else "")
            out.append(a)
    problems += _shared_paths(file, out)
    return out, problems


def _method(form: dict, op: str, http: bool) -> str:
    if not http and op in ("observeproperty", "subscribeevent"):
        return "OBSERVE"
    if http and op in ("observeproperty", "subscribeevent"):
        return SSE
    given = form.get("htv:methodName" if http else "cov:method")
    return given if isinstance(given, str) else DEFAULT_METHOD[op]


def _shared_paths(file: str, affs: list[Affordance]) -> list[TdProblem]:
    """Two affordances on one path (of one protocol) would share one resource and one service
    time: refused."""
    owner: dict[tuple[bool, str], Affordance] = {}
    out = []
    for a in affs:
        for http, f in [(False, f) for f in a.forms.values()] + \
                [(True, f) for f in a.http_forms.values()]:
            other = owner.setdefault((http, f.path), a)
            if other is not a:
                out.append(TdProblem(file, f.pointer + "/href", f"path {f.path!r} is also the "
                           f"path of {other.key}, expected one path per affordance (a resource "
                           "has one service time)"))
            if f.path == WELL_KNOWN_WOT:
                out.append(TdProblem(file, f.pointer + "/href", f"{WELL_KNOWN_WOT} is where each "
                           "instance serves its own TD, expected another path"))
    return out


def find(affs: list[Affordance], key: str) -> Optional[Affordance]:
    return next((a for a in affs if a.key == key), None)
