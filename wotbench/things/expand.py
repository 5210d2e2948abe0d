"""``things:`` → device groups: the translation of Thing Descriptions into the config model.

:func:`expand` runs on the raw config mapping before it is validated
(:func:`wotbench.configfile.yaml_loader.config_from_dict`): each ``things[k]`` entry becomes one device
group appended to ``devices`` (``thing: k`` marks it), with the values the rest of WoTbench
reads from a group: ``count``, ``mode``, ``threads``, ``engine``, ``resources`` (the TD's form
paths and ``.well-known/wot``), the request-weighted service time and the request rate (for the
planner, the CD's ``auto`` and the trace summary), the largest bodies (block-wise and engine
checks) and ``observe`` when an observe op is in the workload (the engine serves it as
wot-device does). A Thing whose forms are HTTP (:attr:`ThingPlan.protocol`) becomes a
``protocol: http`` group whose ``server:`` is :mod:`.http_thing` (one Python process serves
the group's instances on the same cores, process backend), its ``paths`` the forms'; an
observeproperty form with ``subprotocol: sse`` adds the run's ``notify:`` block (the sink's
streams) and the update header (:mod:`.sse_notify`). What the trace and the resource files hold comes from the TD itself at trace time
(:mod:`wotbench.things.workload`). Groups already marked ``thing`` (a resolved config read
back) are dropped first and made again, so expanding twice gives the same config.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wotbench.schema_errors import problems as schema_problems
from wotbench.things import http_thing, sse_notify
from wotbench.things.directory import group_of as directory_group
from wotbench.things.instances import compact, instance_td
from wotbench.things.model import ThingPlan, plan
from wotbench.config.things_spec import DirectorySpec, ThingSpec
from wotbench.things.tdfile import TdError


def _absolute(p: Any, base_dir: Path) -> Any:
    if isinstance(p, str) and p and not Path(p).expanduser().is_absolute():
        return str((base_dir / p).resolve())
    return p


def _td_bytes(tp: ThingPlan) -> int:
    """About the largest instance TD (the last instance, the longest IPv4 address): what
    ``/.well-known/wot`` answers, for the block-wise and engine checks."""
    last = tp.spec.count - 1
    return len(compact(instance_td(tp, last, f"{tp.group}-{last}", "255.255.255.255:65535"))
               .encode())


def _largest_body(tp: ThingPlan) -> int:
    """The group's ``payload_bytes``: its largest body, the instance's TD included; with an
    observe op the largest notification (the generic one-datagram check is about those: a TD
    above 1024 bytes goes block-wise, an observable resource's value may not)."""
    if tp.observed:
        return max(r.response_bytes for r in tp.resources if r.notify[0] != "none")
    return max([r.response_bytes for r in tp.resources] + [_td_bytes(tp)])


def group_of(tp: ThingPlan, k: int, gi: int, seed: int) -> dict:
    """The device group (raw mapping) of things entry ``k``, group ``gi`` of ``devices``."""
    s = tp.spec
    rate = tp.request_rate_per_s()
    g: dict[str, Any] = {
        "group": tp.group, "count": s.count, "threads": s.threads, "mode": s.mode,
        "engine": s.engine, "thing": k, "resources": len(tp.resources),
        "service_time": {"dist": "deterministic", "mean": max(tp.weighted_service_ms(), 1e-3)},
        "rit": {"dist": "exponential", "mean": 1000.0 / rate if rate > 0 else 1000.0},
        "requests": rate > 0,
        "payload_bytes": _largest_body(tp),
        "request_payload_bytes": max([lp.request_bytes for lp in tp.loads] or [0]),
    }
    obs = [lp for lp in tp.loads if lp.method == "OBSERVE"]
    if obs:   # what the generic checks and the engine look at; the trace comes from the TD
        e = obs[0].entry
        g["observe"] = {"resources": 1, "interval": e.notify.model_dump(exclude_none=True),
                        "observers": max(lp.entry.observers for lp in obs),
                        "type": e.notify_type}
    if tp.protocol == "http":   # its server is ours: one Python process serves many instances
        del g["engine"]
        g.update({"protocol": "http", "paths": [r.path for r in tp.resources],
                  "server": {"command": http_thing.command(
                      s.model_dump_json(exclude_defaults=True), k, gi, seed),
                      "ready_timeout_s": min(600.0, HTTP_READY_S + HTTP_READY_PER_INSTANCE_S
                                             * s.count)}})
    return g


HTTP_READY_S = 30   # a Python process importing wotbench on a loaded 2-core host ...
HTTP_READY_PER_INSTANCE_S = 0.02   # ... and making each instance's TD and values


def _http_problems(plans: list[ThingPlan], raw: dict) -> list[str]:
    """What an HTTP Thing cannot be: the settings only the C devices have."""
    out = []
    for tp in plans:
        if tp.protocol != "http":
            continue
        s = tp.spec
        if s.engine == "fleet":
            out.append(f"{tp.key}.engine: fleet, but its forms are HTTP: an HTTP Thing is "
                       "served by WoTbench's Python HTTP server (wot-fleet speaks CoAP), "
                       "expected auto or process")
        if s.mode == "busy" and s.threads > 1:
            out.append(f"{tp.key}.threads: {s.threads} with mode busy, but its forms are HTTP: "
                       "an HTTP Thing's busy service holds its one event loop, expected "
                       "threads: 1 or mode: sleep")
    return out   # the backend is the run's (--backend): wotbench.runner.preflight.programs checks it


def expand(raw: dict, base_dir: Path) -> tuple[dict, list[str]]:
    """(the mapping with the things' groups in ``devices``, problems as ``key: message``)."""
    things = raw.get("things")
    if things is None:
        return raw, []
    if not isinstance(things, list):
        return raw, ["things: must be a list of {td | model, count, load, ...} entries"]
    for t in things:
        if isinstance(t, dict):
            for key in ("td", "model"):
                if key in t:
                    t[key] = _absolute(t[key], base_dir)
    specs, problems = [], []
    for k, t in enumerate(things):
        try:
            specs.append(ThingSpec.model_validate(t))
        except ValidationError as e:
            problems += schema_problems(e, ThingSpec, ("things", k))
    if problems:
        return raw, problems
    if isinstance(raw.get("gateways"), dict) and raw["gateways"].get("loop") == "closed":
        return raw, ["things: a Thing's workload is open loop (rates per affordance), expected "
                     "gateways.loop: open"]
    devices = raw.get("devices")
    if devices is None:
        devices = []
    if not isinstance(devices, list):
        return raw, []   # the schema names it
    kept = [g for g in devices if not (isinstance(g, dict) and (g.get("thing") is not None
                                                                 or g.get("directory")))]
    directory = None
    if raw.get("directory") is not None:
        try:
            directory = DirectorySpec.model_validate(raw["directory"])
        except ValidationError as e:
            return raw, schema_problems(e, DirectorySpec, ("directory",))
    dur = raw.get("duration_s", 60.0)
    if directory is not None and isinstance(dur, (int, float)) and directory.register_within_s \
            + directory.verify_within_s + directory.deregister_within_s > dur:
        return raw, [f"directory: register_within_s + verify_within_s + deregister_within_s = "
                     f"{directory.register_within_s + directory.verify_within_s + directory.deregister_within_s:g} s, "
                     f"expected at most duration_s ({dur:g} s): the phases follow one another"]
    seed = raw.get("seed", 1) if isinstance(raw.get("seed"), int) else 1
    plans = []
    for k, spec in enumerate(specs):
        try:
            plans.append(plan(spec, k, seed))
        except TdError as e:
            problems += [f"things[{k}].{'model' if spec.is_model else 'td'}: {p}"
                         for p in e.problems]
    if problems:
        return raw, problems
    gw = raw.get("gateways") if isinstance(raw.get("gateways"), dict) else {}
    if directory is None:
        problems = _http_problems(plans, raw)
        if problems:
            return raw, problems
        kept += [group_of(tp, k, len(kept) + k, seed) for k, tp in enumerate(plans)]
        http = gw.get("http") if isinstance(gw.get("http"), dict) else {}
        given = [k for k in ("body_template", "body_template_file") if http.get(k) is not None]
        if given and any(tp.protocol == "http" and lp.request_schema for tp in plans
                         for lp in tp.loads):
            return raw, [f"gateways.http.{given[0]}: a Thing's writeproperty/invokeaction "
                         "requests carry their own values of the affordance's data schema, "
                         "expected no body template with things:"]
        if gw.get("payload_template") is not None and any(lp.request_schema for tp in plans
                                                          for lp in tp.loads):
            return raw, ["gateways.payload_template: a Thing's writeproperty/invokeaction "
                         "requests carry their own values of the affordance's data schema, "
                         "expected no payload template with things:"]
        problems = sse_notify.add_to(raw, plans)   # observeproperty over Server-Sent Events
        if problems:
            return raw, problems
    else:   # registered, not emulated: the run speaks HTTP to the directory
        kept.append(directory_group(directory))
        gw = raw.setdefault("gateways", {})
        http = gw.setdefault("http", {}) if isinstance(gw, dict) else None
        if isinstance(http, dict):   # the schema names a gateways or http that is no mapping
            given = [k for k in ("body_template", "body_template_file") if http.get(k) is not None]
            if given:
                return raw, [f"gateways.http.{given[0]}: every registration carries its "
                             "instance's own TD, expected no body template with directory:"]
            http.setdefault("headers", ["Content-Type: application/td+json"])
    raw["devices"] = kept
    raw["things"] = [s.model_dump(exclude_defaults=True) | {"count": s.count} for s in specs]
    return raw, problems
