"""Closed-loop and many-endpoint load (``gateways.loop``, ``gateways.clients``, ``think``,
``target``, ``warmup_s``, ``cooldown_s``): the rules that span blocks, and the gateway
emulator's arguments they become (GE ``--clients``, contract §2; docs/CLOSED-LOOP.md).

Open loop (default): the trace's schedule; with ``clients: N`` every request of the trace
leaves from one of N client endpoints (round robin in send order), so the server sees N
distinct clients on an open schedule. Closed loop: N virtual clients, each with one request in
flight, issuing the next one a think time after the previous outcome, over the targets (one
trace line per device and resource / path)."""
from __future__ import annotations

import math

from wotbench.config.schema import Config

SELECT = {"round_robin": "round-robin", "one": "one", "random": "random"}


def problems(cfg: Config) -> list[str]:
    """Cross-block problems of the loop keys (the field rules are in the schema)."""
    gw, out = cfg.gateways, []
    for i, g in enumerate(cfg.devices):
        if g.rate_profile is not None and gw.loop == "closed":
            out.append(f"devices[{i}].rate_profile: with gateways.loop: closed, expected an "
                       "open loop (a closed loop's rate is what its clients get, not a schedule)")
        if g.rate_profile is not None and cfg.trace is not None:
            out.append(f"devices[{i}].rate_profile: with a recorded trace:, expected a "
                       "generated workload (the recorded trace has its own times)")
    if gw.clients is None:
        return out
    if gw.count > 1:
        out.append(f"gateways.clients: with gateways.count {gw.count}, expected count 1 (one GE "
                   "drives all the clients; 10,000 clients fit one GE core)")
    if gw.proxy is not None:
        out.append("gateways.clients: with gateways.proxy, expected no proxy (not supported)")
    if cfg.dtls.enabled:
        out.append("gateways.clients: with dtls.enabled, expected plain CoAP (not supported)")
    if cfg.ge_block_size() is not None:
        out.append("gateways.clients: with block-wise transfer (a body above 1024 bytes or "
                   "gateways.block_size), expected one-datagram requests and responses")
    if any(g.observe is not None for g in cfg.devices):
        out.append("gateways.clients: with devices[].observe, expected no observations")
    if gw.loop == "closed" and gw.warmup_s + gw.cooldown_s >= cfg.duration_s:
        out.append(f"gateways.warmup_s: {gw.warmup_s:g} + cooldown_s {gw.cooldown_s:g} leave "
                   f"nothing of duration_s {cfg.duration_s:g} to measure, expected their sum "
                   "below it")
    if gw.loop == "closed" and gw.ramp_up_s >= cfg.duration_s:
        out.append(f"gateways.ramp_up_s: {gw.ramp_up_s:g} is not below duration_s "
                   f"{cfg.duration_s:g}, expected the last client to start before the end")
    if gw.loop == "closed" and gw.requests_per_client is not None \
            and gw.requests_per_client * gw.clients > 4_000_000_000:
        out.append(f"gateways.requests_per_client: {gw.requests_per_client} x clients "
                   f"{gw.clients} requests, expected at most 4,000,000,000 (one GE's table)")
    if gw.loop == "closed" and cfg.trace is not None:
        out.append("gateways.loop: closed with a recorded trace:, expected a generated workload "
                   "(the closed loop's targets are the devices' resources)")
    return out


def think_arg(cfg: Config) -> str:
    """GE --think: 0, const:US, exp:US or uniform:LO:HI (µs) from gateways.think (ms)."""
    t = cfg.gateways.think
    if t is None:
        return "0"
    mean_us = t.mean * 1000.0
    if t.dist == "deterministic":
        return f"const:{mean_us:.3f}"
    if t.dist == "exponential":
        return f"exp:{mean_us:.3f}"
    half = mean_us * (t.cv or 0.0) * math.sqrt(3)
    return f"uniform:{mean_us - half:.3f}:{mean_us + half:.3f}"


def max_requests(cfg: Config) -> int:
    """GE --max-requests: records to reserve (virtual memory, 72 bytes each, touched as used):
    what the clients can issue at most, bounded by what one GE core can send."""
    gw = cfg.gateways
    per_client_s = (gw.think.mean / 1000.0 if gw.think is not None else 0.0) + 20e-6
    by_clients = gw.clients * cfg.duration_s / per_client_s
    bound = int(min(by_clients, 400_000 * cfg.duration_s)) + gw.clients + 1000
    if gw.requests_per_client is not None:   # never more than the budget, and always all of it
        return gw.requests_per_client * gw.clients
    return bound


def ge_args(cfg: Config) -> list[str]:
    """The main GE's closed-loop arguments ([] in open loop)."""
    gw = cfg.gateways
    if gw.loop != "closed":
        return []
    return ["--clients", str(gw.clients), "--duration-ms", str(int(round(cfg.duration_s * 1000))),
            "--think", think_arg(cfg), "--select", SELECT[gw.target],
            "--mark-warmup-ms", str(int(round(gw.warmup_s * 1000))),
            "--mark-cooldown-ms", str(int(round(gw.cooldown_s * 1000))),
            "--max-requests", str(max_requests(cfg))] + budget_args(gw)


def budget_args(gw) -> list[str]:
    """GE --requests-per-client and --ramp-ms (issue 35) when set."""
    a = ["--requests-per-client", str(gw.requests_per_client)] if gw.requests_per_client else []
    return a + (["--ramp-ms", str(int(round(gw.ramp_up_s * 1000)))] if gw.ramp_up_s else [])
