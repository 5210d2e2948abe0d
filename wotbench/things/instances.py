"""Each Thing instance's own TD: its forms addressed to the instance.

An instance's TD is its TD (or its model instantiated with the instance's values) with
``base`` set to the instance's ``coap://ADDRESS:PORT/`` (an HTTP Thing's: ``http://``) and
every form of its protocol with its ``href`` relative to it (the other protocol's forms, which
the instance does not serve, are left as they are), and an
``id`` unique in the run (``urn:wotbench:<group>:<device>`` where the TD has none, or when one
TD file gives many instances). WoT Discovery §6.1 names ``/.well-known/wot`` as where a
Thing serves its TD: the device serves these bytes there (the resource file's ``body`` column,
:mod:`wotbench.things.workload`), and the trace directory's ``things/tds.jsonl`` holds them
too, which a directory registration reads (docs/WOT.md).
"""
from __future__ import annotations

import copy
import json
from urllib.parse import urljoin, urlsplit

from wotbench.things.affordances import COAP_SCHEMES, HTTP_SCHEMES, KINDS
from wotbench.things.model import ThingPlan


def _relative(base: str, href: str, schemes: tuple[str, ...]) -> str:
    parts = urlsplit(urljoin(base, href) if base else href)
    if parts.scheme not in schemes:
        return href
    return parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")


def instance_td(tp: ThingPlan, index: int, device: str, authority: str, scheme: str = "coap"
                ) -> dict:
    """The TD instance ``index`` (device ``device`` at ``authority``) serves; ``scheme``
    coap, coaps or http (the Thing's protocol, :attr:`ThingPlan.protocol`)."""
    td = copy.deepcopy(tp.td(index, device))
    mine = HTTP_SCHEMES if scheme.startswith("http") else COAP_SCHEMES
    old_base = td.get("base") if isinstance(td.get("base"), str) else ""
    for kind in KINDS:
        for aff in (td.get(kind) or {}).values():
            for form in aff.get("forms") or []:
                if isinstance(form, dict) and isinstance(form.get("href"), str):
                    form["href"] = _relative(old_base, form["href"], mine)
    td["base"] = f"{scheme}://{authority}/"
    shared_id = tp.spec.count > 1 and "{{" not in str(tp.template.get("id", ""))
    if "id" not in td or shared_id:
        td["id"] = f"urn:wotbench:{tp.group}:{device}"
    return td


def compact(td: dict) -> str:
    return json.dumps(td, separators=(",", ":"), ensure_ascii=False)
