"""An HTTP Thing: one instance of a ``things:`` entry whose forms are ``http://`` (docs/WOT.md).

wot-device and wot-fleet speak CoAP only, so an HTTP Thing is a ``protocol: http`` device
group whose ``server:`` is this program, one process per instance (the runner starts it like
any third-party HTTP server: its address, uid 65534, its core, readiness, cleanup)::

    python http_thing.py --listen ADDR:PORT --name thermostat-3 --spec JSON --thing K
                         --group-index GI --seed S

It computes what the trace generator computed for the same instance, with the same functions
(:mod:`wotbench.things.workload`): its service time per resource, the value each resource
answers with, and its own TD (``base`` ``http://ADDR:PORT/``), and serves HTTP/1.1 with
keep-alive: a request to a form's path waits for one of ``threads`` servers, takes the
resource's service time (``sleep``: an asyncio timer, whose wake-up the event loop rounds up to
the next millisecond; ``busy``: a spin that holds the loop, so one server) and is answered 200
with the resource's value (``application/json``; a PUT or DELETE: 204); ``/.well-known/wot``
answers with the TD at once; any other path 404.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

SCRIPT = Path(__file__).resolve()


def command(spec_json: str, k: int, gi: int, seed: int) -> list[str]:
    """The ``server.command`` of an HTTP Thing group (placeholders filled per device; the
    spec's JSON braces doubled, as the runner fills them with ``str.format``)."""
    spec = spec_json.replace("{", "{{").replace("}", "}}")
    return [sys.executable, str(SCRIPT), "--listen", "{address}:{port}", "--name", "{name}",
            "--spec", spec, "--thing", str(k), "--group-index", str(gi), "--seed", str(seed)]


@dataclass
class Served:
    service_us: int
    body: bytes
    ctype: str


@dataclass
class Instance:
    resources: dict[str, Served]     # path -> what it serves
    mode: str
    threads: int


def instance(spec_json: str, k: int, gi: int, seed: int, name: str, authority: str) -> Instance:
    """What instance ``name`` of things entry ``k`` (device group ``gi``) serves."""
    import numpy as np

    from wotbench.things.instances import compact, instance_td
    from wotbench.things.model import cached_plan
    from wotbench.things.spec import ThingSpec
    from wotbench.things.workload import (STREAM_SERVICE, response_values,
                                          service_times_us)
    spec = ThingSpec.model_validate_json(spec_json)
    tp = cached_plan(spec, k, seed)
    index = int(name.rsplit("-", 1)[1])
    service = service_times_us(tp, spec.count, np.random.default_rng([seed, gi, STREAM_SERVICE]))
    values = response_values(tp, seed, gi, index)
    td = compact(instance_td(tp, index, name, authority, "http")).encode()
    out = {}
    for r, st, v in zip(tp.resources, service[index].tolist(), values):
        if r.affordance == "":
            out[r.path] = Served(0, td, "application/td+json")
        else:
            out[r.path] = Served(int(st), v if v is not None else b"", "application/json")
    return Instance(out, spec.mode, spec.threads)


class Server:
    def __init__(self, thing: Instance):
        self.thing = thing
        self.servers = asyncio.Semaphore(thing.threads)

    async def _serve(self, us: int) -> None:
        async with self.servers:
            if self.thing.mode == "busy":
                end = time.perf_counter() + us / 1e6
                while time.perf_counter() < end:
                    pass
            elif us > 0:
                await asyncio.sleep(us / 1e6)

    def _answer(self, method: str, target: str) -> tuple[Served | None, int]:
        r = self.thing.resources.get(urlsplit(target).path.lstrip("/"))
        if r is None:
            return None, 404
        writes = method in ("PUT", "DELETE") and r.ctype == "application/json"
        return r, 204 if writes else 200

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, target = line.decode("latin-1").split(" ", 2)[:2]
                length, close = 0, False
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value)
                    elif name == "connection" and "close" in value.lower():
                        close = True
                if length:
                    await reader.readexactly(length)
                r, status = self._answer(method, target)
                if r is not None:
                    await self._serve(r.service_us)
                body = r.body if r is not None and status == 200 else b""
                reason = {200: "OK", 204: "No Content", 404: "Not Found"}[status]
                head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
                if body:
                    head += f"Content-Type: {r.ctype}\r\n"
                writer.write((head + ("Connection: close\r\n" if close else "") + "\r\n")
                             .encode() + body)
                await writer.drain()
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass   # the client went away or sent what is not HTTP/1.1: drop the connection
        finally:
            writer.close()


async def _main(host: str, port: int, thing: Instance) -> None:
    server = await asyncio.start_server(Server(thing).connection, host, port, backlog=256)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="ADDR:PORT")
    ap.add_argument("--name", required=True, help="the device's name, <group>-<index>")
    ap.add_argument("--spec", required=True, help="the things: entry (ThingSpec JSON)")
    ap.add_argument("--thing", type=int, required=True, help="its index in things:")
    ap.add_argument("--group-index", type=int, required=True, help="its index in devices:")
    ap.add_argument("--seed", type=int, required=True)
    a = ap.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    thing = instance(a.spec, a.thing, a.group_index, a.seed, a.name, a.listen)
    try:
        asyncio.run(_main(host.strip("[]"), int(port), thing))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    # run as a file by the process backend (a minimal environment): import the wotbench tree
    # this file is in, so the instance serves what that tree's trace generator computed
    sys.path.insert(0, str(SCRIPT.parents[2]))
    sys.exit(main())
