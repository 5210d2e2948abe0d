"""``devices[].push`` ``phase: verify``: after the test and before the devices' teardown, the
harness asks the platform what it holds (e.g. RFC 9176 endpoint lookup, ``GET
/endpoint-lookup/`` on aiocoap-rd) and counts the devices whose ``expect`` (rendered per
device, e.g. ``ep="sensor-3"``) the answer of their own target contains.

One request per distinct target, sent with aiocoap's client (block-wise answers of a thousand
links are reassembled there); never during the test. A target that does not answer, or answers
with an error, finds none of its devices: the record says why (run.json ``push_verify``)."""
from __future__ import annotations

import asyncio
from typing import Optional

from wotbench.config.schema import Config
from wotbench.rundir.record import PushVerify
from wotbench.runner.push_run import push_devices
from wotbench.workload.push_schedule import render_text

MAX_MISSING = 20
TIMEOUT_S = 30.0


async def _get(ctx, method: str, uri: str) -> tuple[str, Optional[bytes]]:
    from aiocoap import Code, Message
    try:
        resp = await asyncio.wait_for(
            ctx.request(Message(code=Code[method], uri=uri)).response, TIMEOUT_S)
    except asyncio.TimeoutError:
        return f"no answer within {TIMEOUT_S:.0f} s", None
    except Exception as e:      # aiocoap's transport errors (refused, unreachable, ...)
        return f"failed: {type(e).__name__}: {e}", None
    code = resp.code.dotted
    return code, (resp.payload if resp.code.is_successful() else None)


async def _fetch_all(requests: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, Optional[bytes]]]:
    from aiocoap import Context
    ctx = await Context.create_client_context()
    try:
        return {r: await _get(ctx, *r) for r in requests}
    finally:
        await ctx.shutdown()


def verify(cfg: Config) -> list[PushVerify]:
    """Every verify op of the run, asked now; one record each."""
    devices = push_devices(cfg)
    wanted: list[tuple[int, int, object]] = [(i, j, op) for i, g in enumerate(cfg.devices)
                                             for j, op in enumerate(g.push or [])
                                             if op.phase == "verify"]
    if not wanted:
        return []
    requests = sorted({(op.method, f"coap://{d.targets[j]}/{op.path}")
                       for i, j, op in wanted for d in devices
                       if d.group_key == f"devices[{i}]"})
    answers = asyncio.run(_fetch_all(requests))
    out = []
    for i, j, op in wanted:
        mine = [d for d in devices if d.group_key == f"devices[{i}]"]
        found, missing, codes = 0, [], {}
        for d in mine:
            uri = f"coap://{d.targets[j]}/{op.path}"
            code, body = answers[(op.method, uri)]
            codes[d.targets[j]] = code
            if body is not None and render_text(op.expect, d.fields()).encode() in body:
                found += 1
            elif len(missing) < MAX_MISSING:
                missing.append(d.name)
        out.append(PushVerify(key=f"devices[{i}].push[{j}]", op=op.op, group=cfg.devices[i].group,
                              request=f"{op.method} /{op.path}", answers=codes,
                              expected=len(mine), found=found, missing=missing))
    return out
