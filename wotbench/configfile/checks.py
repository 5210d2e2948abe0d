"""Rules that span blocks of a parsed config: one ``"key.path: message"`` string per problem.

The schema (:mod:`wotbench.config.schema`) checks each field; these checks need several blocks at
once, the files the config names, or the deployment's layout (how many addresses the devices
and their pods take: :mod:`wotbench.deploy.pods`).
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

from wotbench.config import byo
from wotbench.config import connected as connected_spec
from wotbench.config import dtls as dtls_spec
from wotbench.config import http_spec
from wotbench.config import loadloop
from wotbench.config import notify as notify_spec
from wotbench.config import sut_faults as sut_faults_spec
from wotbench.config.distributions import validate_spec
from wotbench.config.hog_episodes import check_episodes
from wotbench.config.schema import (MAX_DATAGRAM_PAYLOAD, MAX_PER_CONTAINER, NOTIFY_DISTS, Config,
                                    DeviceGroup)
from wotbench.config.slo_spec import group_problems as slo_group_problems
from wotbench.deploy import fleet, pods
from wotbench.deploy.addressing import capacity as address_capacity
from wotbench.deploy.addressing import describe_capacity


def problems(cfg: Config, base_dir: Path) -> list[str]:
    """Every cross-block problem of ``cfg`` (relative paths resolved against ``base_dir``)."""
    problems = []
    seen: dict[str, int] = {}
    for i, g in enumerate(cfg.devices):
        if g.group in seen:
            problems.append(f"devices[{i}].group: duplicate group name '{g.group}' (also devices[{seen[g.group]}])")
        seen.setdefault(g.group, i)
        if g.group == "cd":
            problems.append(f"devices[{i}].group: 'cd' is reserved for the contention detector node")
        for key in ("service_time", "rit"):
            for field, msg in validate_spec(getattr(g, key).model_dump(), base_dir):
                problems.append(f"devices[{i}].{key}.{field}: {msg}")
        problems.extend(byo.group_problems(i, g, "count" in g.model_fields_set))
        if g.observe is not None:
            problems.extend(_observe_problems(g, f"devices[{i}].observe", base_dir))
            if g.payload_bytes > MAX_DATAGRAM_PAYLOAD:
                problems.append(f"devices[{i}].payload_bytes: {g.payload_bytes} with observe, expected "
                                f"at most {MAX_DATAGRAM_PAYLOAD} (notifications are one datagram)")
        if g.per_container != "auto" and g.per_container > MAX_PER_CONTAINER \
                and not fleet.is_fleet(cfg, i):
            problems.append(f"devices[{i}].per_container: {g.per_container}, expected 'auto' or "
                            f"an integer 1..{MAX_PER_CONTAINER} (more only with engine: fleet)")
        elif g.per_container not in ("auto", 1) and pods.ineligible_why(cfg, g):
            problems.append(f"devices[{i}].per_container: {g.per_container}, expected 1 or 'auto': "
                            + pods.ineligible_why(cfg, g))
        if g.observe is not None and g.third_party:
            problems.append(f"devices[{i}].observe: with server/external, expected no observe "
                            "(observable resources are emulated by wot-device)")
    problems.extend(fleet.problems(cfg))
    problems.extend(connected_spec.check(cfg))
    problems.extend(push_problems(cfg, base_dir))
    if cfg.gateways.retransmit and cfg.gateways.message_type == "non":
        problems.append("gateways.retransmit: true with message_type non: RFC 7252 retransmits "
                        "CON requests only; set message_type: con or remove retransmit")
    problems.extend(byo.proxy_problems(cfg.gateways.proxy))
    if cfg.gateways.proxy is not None and any(g.observe is not None for g in cfg.devices):
        problems.append("gateways.proxy: with devices[].observe, expected no proxy (Observe "
                        "through a forward proxy is not supported)")
    if cfg.gateways.proxy is not None and cfg.gateways.block_size is not None:
        problems.append("gateways.block_size: with gateways.proxy, expected null (block-wise "
                        "transfer through a forward proxy is not supported)")
    net = ipaddress.ip_network(cfg.network.subnet)
    needed = pods.address_count(cfg) + 1  # devices (a pod's share one) + the CD node
    needed += 1 if cfg.gateways.proxy is not None and cfg.gateways.proxy.started else 0
    if needed > address_capacity(net):
        problems.append(f"network.subnet: {cfg.network.subnet} has room for {describe_capacity(net)}, "
                        f"{needed} needed (devices or pods + CD node); use a larger subnet such as /16")
    problems.extend(slo_group_problems(cfg.slo, [g.group for g in cfg.devices]))
    problems.extend(dtls_spec.problems(cfg))
    problems.extend(http_spec.problems(cfg))
    problems.extend(loadloop.problems(cfg))
    problems.extend(notify_spec.problems(cfg))
    problems.extend(sut_faults_spec.problems(cfg))
    if cfg.contention:   # the cores are checked against the plan when the run starts
        problems.extend(check_episodes(cfg.contention, test_duration_s=cfg.duration_s,
                                       cores={c for ep in cfg.contention for c in ep.cores}))
    if cfg.trace is not None:
        tf = Path(cfg.trace.file)
        if not tf.is_file():
            problems.append(f"trace.file: file not found: {tf}")
        rd = cfg.trace.resources_dir
        if not rd.is_dir():
            problems.append(f"trace.resources: directory not found: {rd}")
    return problems


def push_problems(cfg: Config, base_dir: Path) -> list[str]:
    """``devices[].push``: targets of this run, distributions, @location after a setup."""
    out = []
    groups = {g.group for g in cfg.devices}
    for i, g in enumerate(cfg.devices):
        for j, op in enumerate(g.push or []):
            key = f"devices[{i}].push[{j}]"
            if g.third_party:
                out.append(f"{key}: a server/external group cannot push (it is not a wot-device); "
                           "put push on a device group")
            if ":" not in op.target and op.target not in groups:
                out.append(f"{key}.target: '{op.target}' is not a device group of this run "
                           f"(groups: {', '.join(sorted(groups))}); give a group or IP:PORT")
            if op.target == g.group:
                out.append(f"{key}.target: the group itself; expected another group or IP:PORT")
            for name in ("interval", "value"):
                spec = getattr(op, name)
                if spec is None:
                    continue
                if not isinstance(spec, dict):
                    out.append(f"{key}.{name}: expected a distribution such as "
                               "{dist: exponential, mean: 2000}")
                    continue
                out.extend(f"{key}.{name}.{f}: {m}" for f, m in validate_spec(spec, base_dir))
            if op.path.startswith("@location") and not any(o.phase == "setup" for o in g.push):
                out.append(f"{key}.path: @location needs a setup op in the group (the location "
                           "comes from its answer)")
        if g.push and cfg.dtls.enabled:
            out.append(f"devices[{i}].push: with dtls.enabled, expected no push (device "
                       "requests are plain CoAP)")
    return out


def _observe_problems(g: DeviceGroup, key: str, base_dir: Path) -> list[str]:
    o = g.observe
    out = []
    if o.resources > g.resources:
        out.append(f"{key}.resources: {o.resources} observable resources but the group has "
                   f"{g.resources} (devices[].resources)")
    if (o.period_ms is None) == (o.interval is None):
        out.append(f"{key}: give either period_ms (with optional jitter_ms) or interval "
                   f"(a distribution), not {'both' if o.period_ms else 'neither'}")
    if o.period_ms is not None and o.jitter_ms > o.period_ms:
        out.append(f"{key}.jitter_ms: {o.jitter_ms:g} exceeds period_ms {o.period_ms:g}, "
                   f"expected a half-width <= the period (intervals stay >= 0)")
    if o.interval is not None:
        if o.interval.dist not in NOTIFY_DISTS:
            out.append(f"{key}.interval.dist: wot-device emulates {', '.join(NOTIFY_DISTS)} "
                       f"notification intervals, got {o.interval.dist!r}")
        else:
            out += [f"{key}.interval.{f}: {m}" for f, m in validate_spec(o.interval.model_dump(), base_dir)]
            if o.interval.dist == "uniform" and (o.interval.cv or 0) > 1 / 3 ** 0.5:
                out.append(f"{key}.interval.cv: {o.interval.cv:g} makes uniform intervals negative, "
                           f"expected <= 0.577")
    if o.hold is not None:
        out += [f"{key}.hold.{f}: {m}" for f, m in validate_spec(o.hold.model_dump(), base_dir)]
    return out
