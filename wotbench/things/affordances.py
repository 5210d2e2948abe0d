"""The resources an emulated Thing serves: one per CoAP form path of its TD's affordances.

Forms are read as TD 1.1 §5.3.4 says: ``href`` resolved against ``base``, ``op`` defaulting by
affordance kind (a property: readproperty and writeproperty, only one of them when
``readOnly``/``writeOnly``; an action: invokeaction; an event: subscribeevent and
unsubscribeevent), the CoAP method from ``cov:method`` (CoAP binding) or the op's default
(read GET, write PUT, invoke POST, observe/subscribe GET with Observe). The emulated devices
(wot-device, wot-fleet) speak CoAP only, so an op whose only forms are ``http(s)://`` is
refused with that reason (HTTP devices are ``server:``/``external`` groups, docs/HTTP.md);
Thing-level forms (readallproperties, ...) and URI templates are not emulated and refused
when the workload names them. A form's query string is dropped (the device matches paths).
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
WELL_KNOWN_WOT = ".well-known/wot"     # where each instance serves its TD (WoT Discovery §6.1)
_BAD_PATH = re.compile(r"[\s,\"{}]")


@dataclass
class Form:
    path: str          # without the leading slash
    method: str        # GET | PUT | POST | DELETE | OBSERVE
    pointer: str       # of the form in the TD


@dataclass
class Affordance:
    kind: str          # properties | actions | events
    name: str
    pointer: str
    description: dict  # the affordance object of the TD
    forms: dict[str, Form] = field(default_factory=dict)   # op -> its CoAP form
    http_only: dict[str, str] = field(default_factory=dict)  # op -> pointer of an HTTP form

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"


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
    """Every affordance of ``td`` with its CoAP form per op, and the problems found."""
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
                for op in _form_ops(kind, aff, form):
                    if parts.scheme not in COAP_SCHEMES:
                        a.http_only.setdefault(op, at)
                        continue
                    if op in a.forms or op not in DEFAULT_METHOD:
                        continue
                    path = parts.path.lstrip("/")
                    if not path or _BAD_PATH.search(path):
                        problems.append(TdProblem(file, f"{at}/href", f"path {parts.path!r}: "
                                        "expected a non-empty URI path without spaces, commas, "
                                        "quotes or URI-template braces"))
                        continue
                    method = form.get("cov:method") or DEFAULT_METHOD[op]
                    if op in ("observeproperty", "subscribeevent"):
                        method = "OBSERVE"
                    elif method not in ("GET", "PUT", "POST", "DELETE"):
                        problems.append(TdProblem(file, f"{at}/cov:method", f"{method!r}, "
                                        "expected GET, PUT, POST or DELETE"))
                        continue
                    a.forms[op] = Form(path, method, at)
            out.append(a)
    problems += _shared_paths(file, out)
    return out, problems


def _shared_paths(file: str, affs: list[Affordance]) -> list[TdProblem]:
    """Two affordances on one path would share one resource and one service time: refused."""
    owner: dict[str, Affordance] = {}
    out = []
    for a in affs:
        for f in a.forms.values():
            other = owner.setdefault(f.path, a)
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
