"""HTTP Things' observeproperty over Server-Sent Events (issue 34, docs/WOT.md "Observing an
HTTP Thing"): the ``notify:`` block and the update header a ``things:`` expansion adds so that
``wotbench run`` measures update -> notification latency with the notification sink
(``build/notify-sink``, :mod:`wotbench.config.notify`, :mod:`wotbench.analysis.notify_sink`).

- Every GE request carries ``X-Update-Id: urn:wot:upd:{{seq}}`` (``gateways.http.headers``;
  ``{{seq}}`` is the request's row of requests.csv, filled at the send). An HTTP Thing takes the
  header of a writeproperty PUT and, when the write has taken its service time, pushes to every
  stream of that property of that instance an event ``id: urn:wot:upd:N`` with the written value
  as ``data:`` (:mod:`.http_thing`).
- One sink subscriber (kind ``stream``, ``Accept: text/event-stream``) per observed instance and
  observer: the first ``subscribed`` instances of the group (default every one), ``observers``
  streams each, at most :data:`MAX_STREAMS` in all (the sink's limit). Each subscriber counts as
  its updates only the writes to its instance's form (``updates_to``), so a write to another
  plug is not a loss of this one.
- A form with ``subprotocol: longpoll`` makes a subscriber of kind ``longpoll`` instead: the
  sink's GET is held by the Thing and answered (one JSON response ``{"id": ..., "data": ...}``)
  at the next write / event, then sent again by the sink at once; an update between an answer
  and the next GET is lost, as a real long-poll client would lose it (its path must not be the
  readproperty path: a GET there would be ambiguous).
- subscribeevent over SSE: the instance emits the event on the entry's ``notify`` schedule
  (:mod:`.sse_events`), with ids of the same marker beyond any GE row; the subscriber's
  ``updates_to`` is the event's own path, its updates are that instance's emissions there
  (the analysis reads them from the Thing's emission file).
"""
from __future__ import annotations

import re
from typing import Any

from wotbench.things.model import ThingPlan

MARKER = "urn:wot:upd:"
UPDATE_HEADER = "X-Update-Id"
HEADER = f"{UPDATE_HEADER}: {MARKER}{{{{seq}}}}"
MAX_STREAMS = 64          # build/notify-sink's SINK_MAX_SUBS (notify.subscribers' max_length)
_NAME_MAX = 40            # notify.subscribers[].name
USER_KEYS = ("slo", "timeout_ms")   # what a user's notify: may add to the one made here


def _name(group: str, index: int, prop: str, observer: int, observers: int, n: int) -> str:
    text = f"{group}-{index}-{prop}" + (f"-{observer}" if observers > 1 else "")
    text = re.sub(r"[^a-z0-9_-]", "-", text.lower()).lstrip("-_")
    return text if text and len(text) <= _NAME_MAX else f"sse-{n}"


def subscribers(plans: list[ThingPlan]) -> tuple[list[dict], list[str], list[str]]:
    """(the sink's subscribers, the write methods that are updates, problems)."""
    subs, methods, problems = [], set(), []
    for tp in plans:
        for lp in tp.sse_loads:
            e, at = lp.entry, f"{tp.key}.load[{lp.index}]"
            a = next(x for x in tp.affordances if x.key == e.affordance)
            path = tp.resources[lp.resource].path
            kind = "longpoll" if a.http_forms[e.op].subprotocol == "longpoll" else "stream"
            read = a.http_forms.get("readproperty")
            if kind == "longpoll" and read is not None and read.path == path:
                problems.append(f"{at}: the longpoll form of {a.key} shares its path {path!r} "
                                "with its readproperty form, expected a path of its own (a GET "
                                "there could be a read or a poll)")
                continue
            if e.op == "subscribeevent":   # its updates: the instance's own emissions there
                updates_to = path
            else:
                write = a.http_forms["writeproperty"]
                updates_to = write.path
                methods.add(write.method)
            n_inst = tp.spec.count if e.subscribed is None else e.subscribed
            if n_inst > tp.spec.count:
                problems.append(f"{at}.subscribed: {n_inst}, expected at most count "
                                f"({tp.spec.count})")
                continue
            for i in range(n_inst):
                for o in range(e.observers):
                    name = _name(tp.group, i, a.name, o, e.observers, len(subs))
                    if any(s["name"] == name for s in subs):
                        name = f"sse-{len(subs)}"
                    subs.append({"name": name, "kind": kind, "device": f"{tp.group}-{i}",
                                 "path": path, "updates_to": updates_to})
    if len(subs) > MAX_STREAMS:
        problems.append(f"things: the observeproperty/subscribeevent (Server-Sent Events) "
                        f"entries ask for "
                        f"{len(subs)} streams, expected at most {MAX_STREAMS} (the notification "
                        "sink's limit): give the entries `subscribed: N`, a sample of the first N "
                        "instances")
    return subs, sorted(methods), problems


def add_to(raw: dict, plans: list[ThingPlan]) -> list[str]:
    """Put the sink's ``notify:`` block and the update header into ``raw`` when an HTTP Thing's
    load observes a property over SSE; the problems (``key: message``) otherwise."""
    subs, methods, problems = subscribers(plans)
    if problems or not subs:
        return problems
    made: dict[str, Any] = {"marker": MARKER, "accept": "text/event-stream",
                            "updates": methods, "subscribers": subs}
    given = raw.get("notify")
    if given is not None:
        if not isinstance(given, dict):
            return ["notify: must be a mapping"]
        own = {k: v for k, v in given.items() if k not in USER_KEYS}
        if own and own != made:   # a config read back holds exactly what is made here
            return ["notify: made from the things' observeproperty (Server-Sent Events) entries "
                    f"({', '.join(sorted(own))} given), expected only notify.slo or "
                    "notify.timeout_ms"]
        made.update({k: given[k] for k in USER_KEYS if given.get(k) is not None})
    raw["notify"] = made
    gw = raw.setdefault("gateways", {})
    http = gw.setdefault("http", {}) if isinstance(gw, dict) else None
    if isinstance(http, dict):   # the schema names a gateways or http that is no mapping
        headers = http.setdefault("headers", [])
        if isinstance(headers, list) and HEADER not in headers:
            headers.append(HEADER)
    return []
