"""Stage 2's first half: what a run deploys (:class:`~wotbench.runner.stages.Components`), built
from the prepared inputs alone: each device (or a cell's share of them) with its address, cores,
files and program; the wot-fleet engines; the CD node and its GE; the proxy; the main GEs with
their options. Renders the third-party servers' configs and the GEs' HTTP body template into
the run directory; starts nothing."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from cd_module import node as cd_node
from wotbench.config import http_spec
from wotbench.config import loadloop
from wotbench.config.schema import Config
from wotbench.deploy import fleet_capacity
from wotbench.deploy.resolve import DeviceAddress, cd_node_address, device_addresses, proxy_address
from wotbench.runner.deployment import fleets as fleet_runs
from wotbench.runner.prepare import inputs as run_inputs
from wotbench.runner import serverconf
from wotbench.runner.deployment import thirdparty
from wotbench.runner.deployment.components import DeviceRun, GeRun
from wotbench.runner.stages import Components, Inputs
from wotbench.rundir.layout import GE_BODY_TEMPLATE


def share_addresses(resolved: Config, share: Optional[frozenset[str]]) -> list[DeviceAddress]:
    """The devices a run deploys: all, or a cell's share (global names and ids kept)."""
    every = device_addresses(resolved)
    return every if share is None else [a for a in every if a.name in share]


def share_ids(resolved: Config, share: Optional[frozenset[str]]) -> Optional[set[int]]:
    """Trace ids of a cell's share (None: every device), for its slice of the trace."""
    return None if share is None else {a.id for a in share_addresses(resolved, share)}


def build_components(inp: Inputs) -> Components:
    rd, cfg, plan = inp.rd, inp.resolved, inp.plan
    groups = {g.group: g for g in cfg.devices}
    keys = {g.group: f"devices[{i}].server" for i, g in enumerate(cfg.devices)}
    reqs = fleet_capacity.requirements(cfg, plan)
    in_fleet = {r.name for r in reqs}
    mine = share_addresses(cfg, inp.share)
    fleets = fleet_runs.build(cfg, rd, reqs, [a for a in mine if a.container in in_fleet],
                              in_container=inp.kind.needs_docker,
                              make_dir=run_inputs.writable_dir, push=inp.fleet_push,
                              impair=lambda n: inp.impair.device_args(n, "device")
                              if inp.impair is not None else [])
    devices = []
    for a in mine:
        if a.container in in_fleet:
            continue    # hosted by its engine (fleets)
        g = groups[a.group]
        devices.append(DeviceRun(
            name=a.name, id=a.id, group=a.group,
            role="external" if g.external is not None else "device", address=a.ip,
            port=a.port, cpuset=plan.devices[a.name],
            resources=None if g.third_party else rd.resource_file(a.name),
            log_dir=run_inputs.writable_dir(rd.device_dir(a.name)),
            stdout=rd.device_stdout(a.name), threads=g.threads, response=g.response,
            cpu_quota=g.cpu_quota, memory_mb=g.memory_mb,
            impair=[] if g.third_party else inp.impair.device_args(a.name, "device"),
            program=g.server, program_key=keys[a.group], dtls=inp.dtls,
            container=a.container,
            push_timeout_ms=cfg.gateways.timeout_ms if a.name in inp.pushing else None,
            protocol=g.protocol, probe_path=http_spec.probe_path(g)))
    if not inp.kind.needs_docker:
        _share_thing_processes(devices, cfg)
    proxy = _proxy(inp)
    _render_server_configs(devices + ([proxy] if proxy else []), inp.kind.needs_docker)
    cd_ge = None
    if inp.cd.enabled:
        a = cd_node_address(cfg)
        devices.append(DeviceRun(
            name=a.name, id=a.id, group=a.group, role="cd-node", address=a.ip, port=a.port,
            cpuset=plan.cd_node_cpuset, resources=rd.resource_file(a.name),
            log_dir=run_inputs.writable_dir(rd.device_dir(a.name)),
            stdout=rd.device_stdout(a.name), threads=1, memory_mb=32,
            response=cfg.contention_detector.response))
        cd_ge = GeRun(name=cd_node.CD_GE, role="cd-ge", cpu=plan.cd_ge_core, trace=rd.cd_trace,
                      out_dir=run_inputs.writable_dir(rd.ge_dir(cd_node.CD_GE)),
                      stdout=rd.ge_stdout(cd_node.CD_GE), wait="hybrid", msg_type="con",
                      timeout_ms=cfg.gateways.timeout_ms)
    n = cfg.gateways.count
    via = []
    if proxy is not None and cfg.gateways.proxy.http:   # the proxy is in the URIs
        via = ["--http-connections", str(cfg.gateways.proxy.http_connections)]
    elif proxy is not None:
        via = ["--proxy", proxy.endpoint, "--proxy-mode",
               cfg.gateways.proxy.mode.removeprefix("proxy-")]
    ges = []
    for k in range(n):
        name = f"ge-{k}"
        ges.append(GeRun(name=name, role="ge", cpu=plan.ge_cores[name], trace=rd.ge_trace(k, n),
                         out_dir=run_inputs.writable_dir(rd.ge_dir(name)),
                         stdout=rd.ge_stdout(name), wait=cfg.gateways.wait,
                         spin_us=cfg.gateways.spin_us,
                         msg_type=cfg.gateways.message_type,
                         timeout_ms=cfg.gateways.timeout_ms,
                         retransmit=cfg.gateways.retransmit,
                         extra=list(via) + _ge_block_args(cfg) + loadloop.ge_args(cfg)
                         + http_spec.ge_args(cfg),
                         host_network=thirdparty.ge_needs_host_network(cfg),
                         dtls=inp.dtls,
                         http_body_template=_write_body_template(cfg, rd.ge_dir(name))))
    return Components(devices=devices, fleets=fleets, ges=ges, cd_ge=cd_ge, proxy=proxy)


def _share_thing_processes(devices: list[DeviceRun], cfg: Config) -> None:
    """HTTP Things (``things:`` groups with a ``server:``, wotbench.things.http_thing): the
    devices of a group on the same cores are served by one process, the first one's. Not with
    ``mode: busy``, whose service spins the event loop: each such instance keeps its own."""
    things = {g.group for g in cfg.devices
              if g.thing is not None and g.server is not None and g.mode == "sleep"}
    leads: dict[tuple[str, str], DeviceRun] = {}
    for d in devices:
        if d.group not in things or d.role != "device":
            continue
        lead = leads.setdefault((d.group, d.cpuset), d)
        if lead is not d:
            lead.hosts.append((d.name, d.endpoint))
            d.hosted_by = lead.name


def _proxy(inp: Inputs) -> Optional[DeviceRun]:
    """gateways.proxy: a component on its own core (plan), or an endpoint not started."""
    rd, cfg = inp.rd, inp.resolved
    a = proxy_address(cfg)
    if a is None:
        return None
    p = cfg.gateways.proxy
    return DeviceRun(
        name=a.name, id=a.id, group=a.group, role="proxy" if p.started else "external",
        address=a.ip, port=a.port, cpuset=inp.plan.proxy_cpuset or "", resources=None,
        log_dir=run_inputs.writable_dir(rd.device_dir(a.name)), stdout=rd.device_stdout(a.name),
        memory_mb=64, program=p if p.started else None, program_key=thirdparty.PROXY_KEY)


def _render_server_configs(devices: list[DeviceRun], in_container: bool) -> None:
    """Third-party servers' config_template rendered per device (the pre-flight ran their
    ``check``, nginx -t, once per config key: a template error is the same for all)."""
    for d in devices:
        if d.program is None or d.program.config_template is None:
            continue
        serverconf.prepare(d, in_container=in_container,
                           scratch=run_inputs.writable_dir(d.log_dir / "scratch"))


def _write_body_template(cfg: Config, ge_dir: Path) -> bool:
    """gateways.http body template (a CoAP run: gateways.payload_template) into the GE's
    directory (it reads it from there)."""
    text = http_spec.ge_body_text(cfg)
    if text is None:
        return False
    f = ge_dir / GE_BODY_TEMPLATE
    f.write_text(text)
    f.chmod(0o644)
    return True


def _ge_block_args(cfg: Config) -> list[str]:
    """--block-size for the main GEs when bodies exceed one datagram (RFC 7959)."""
    bs = cfg.ge_block_size()
    return ["--block-size", str(bs)] if bs else []
