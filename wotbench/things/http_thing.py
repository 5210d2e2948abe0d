"""HTTP Things: the instances of a ``things:`` entry whose forms are ``http://`` (docs/WOT.md).

wot-device and wot-fleet speak CoAP only, so an HTTP Thing is a ``protocol: http`` device
group whose ``server:`` is this program. One process serves many instances of the group (the
runner starts it like a third-party HTTP server -- its address, uid 65534, its core,
readiness, cleanup -- once for the group's devices on the same cores, and appends
``--instance NAME=ADDR:PORT`` for each device beyond the first,
:mod:`wotbench.runner.deployment.build`)::

    python http_thing.py --listen ADDR:PORT --name thermostat-3 --spec JSON --thing K
                         --group-index GI --seed S [--instance thermostat-4=ADDR:PORT ...]

It computes what the trace generator computed for each instance, with the same functions
(:mod:`wotbench.things.workload`), the entry's plan and service-time draw once for all of
them: each instance's service time per resource, the value each resource answers with, and
its own TD (``base`` ``http://ADDR:PORT/``); each instance listens on its own address and port
(one socket each, one event loop for all) and serves HTTP/1.1 with keep-alive: a request to a
form's path waits for one of the instance's ``threads`` servers, takes the resource's service
time (``sleep``: an asyncio timer, whose wake-up the event loop rounds up to the next
millisecond; ``busy``: a spin that holds the loop, so one server) and is answered 200 with the
resource's value (``application/json``; a PUT or DELETE: 204); ``/.well-known/wot`` answers
with the TD at once; any other path 404. An observeproperty or subscribeevent form with ``subprotocol: longpoll`` (a path of its own) holds
each GET of its path and answers it at the property's next write (before the write's 204) or
the event's next emission: 200, ``{"id": "urn:wot:upd:N", "data": VALUE}``; one GET held per
connection (the next request is read after the answer), an update with no GET held is not
buffered. An observeproperty form with ``subprotocol: sse``
(a GET of its path; on a path it shares with the read, with ``Accept: text/event-stream``) is
answered with an event stream held open: when a write of that property has taken its service
time, every stream of the property on that instance gets an event whose ``id:`` is the write's
``X-Update-Id`` header (the GE's ``urn:wot:upd:{{seq}}``) and whose ``data:`` is the value
written, before the write's 204 (:mod:`wotbench.things.sse_notify`). A subscribeevent form
with ``subprotocol: sse`` is held open the same way; the instance emits the event on the load
entry's ``notify`` schedule (:mod:`wotbench.things.sse_events`: seeded per instance) to every
stream of it, ``id:`` the event's id and ``data:`` the event's value (its data schema), and
stamps each emission (``time.monotonic_ns``, user space) into a list written to
``sse-events.csv`` in its device directory (``--events-out``; by default the directory of its
stdout file, which the process backend opens there) when it stops (SIGTERM or SIGINT).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
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
    streams: dict[str, str] = field(default_factory=dict)   # observeproperty SSE path -> property
    writes: dict[str, tuple[str, str]] = field(default_factory=dict)   # path -> (method, property)
    reads: set[str] = field(default_factory=set)   # readproperty paths of observed properties
    events: list["EventLoad"] = field(default_factory=list)   # subscribeevent over SSE
    longpolls: set[str] = field(default_factory=set)   # the streams' paths that long-poll


@dataclass
class EventLoad:
    """An event this instance emits on its own schedule (a subscribeevent entry over SSE)."""
    path: str
    key: str                 # events/NAME: the streams' key
    schedule: object         # wotbench.things.sse_events.Schedule
    device: str              # the instance's name
    gi: int
    index: int


def instance(spec_json: str, k: int, gi: int, seed: int, name: str, authority: str) -> Instance:
    """What instance ``name`` of things entry ``k`` (device group ``gi``) serves."""
    return instances(spec_json, k, gi, seed, [(name, authority)])[0]


def instances(spec_json: str, k: int, gi: int, seed: int,
              named: list[tuple[str, str]]) -> list[Instance]:
    """What each instance ``(name, ADDR:PORT)`` of things entry ``k`` (device group ``gi``)
    serves: the plan and the group's service times computed once, then each instance's values
    and TD."""
    import numpy as np

    from wotbench.things.affordances import find
    from wotbench.things.instances import compact, instance_td
    from wotbench.things.model import cached_plan
    from wotbench.config.things_spec import ThingSpec
    from wotbench.things.workload import (STREAM_SERVICE, response_values,
                                          service_times_us)
    spec = ThingSpec.model_validate_json(spec_json)
    tp = cached_plan(spec, k, seed)
    service = service_times_us(tp, spec.count, np.random.default_rng([seed, gi, STREAM_SERVICE]))
    from wotbench.things.sse_events import Schedule
    streams = {tp.resources[lp.resource].path: lp.entry.affordance for lp in tp.sse_loads}
    longpolls = {tp.resources[lp.resource].path for lp in tp.sse_loads
                 if find(tp.affordances, lp.entry.affordance).http_forms[lp.entry.op]
                 .subprotocol == "longpoll"}
    event_loads = [lp for lp in tp.sse_loads if lp.entry.op == "subscribeevent"]
    writes, reads = {}, set()
    for a in tp.affordances:
        f = a.http_forms.get("writeproperty")
        if f is not None and a.key in streams.values():
            writes[f.path] = (f.method, a.key)
        r = a.http_forms.get("readproperty")
        if r is not None and a.key in streams.values():
            reads.add(r.path)
    things = []
    for name, authority in named:
        index = int(name.rsplit("-", 1)[1])
        values = response_values(tp, seed, gi, index)
        td = compact(instance_td(tp, index, name, authority, "http")).encode()
        out = {}
        for r, st, v in zip(tp.resources, service[index].tolist(), values):
            if r.affordance == "":
                out[r.path] = Served(0, td, "application/td+json")
            else:
                out[r.path] = Served(int(st), v if v is not None else b"", "application/json")
        events = [EventLoad(tp.resources[lp.resource].path, lp.entry.affordance,
                            Schedule(lp.entry.notify.dist, float(lp.entry.notify.mean),
                                     float(lp.entry.notify.cv or 0), seed, gi, lp.index, index),
                            name, gi, index) for lp in event_loads]
        things.append(Instance(out, spec.mode, spec.threads, streams, writes, reads, events,
                               longpolls))
    return things


UPDATE_HEADER = "x-update-id"   # wotbench.things.sse_notify.UPDATE_HEADER, lower case
SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"\r\n")   # no length: the stream ends when the connection does


def poll_answer(update_id: str, value: bytes) -> bytes:
    """A held long-poll GET's answer: 200, ``{"id": the update's id, "data": the value}``."""
    body = b'{"id": "' + update_id.encode() + b'", "data": ' + (value or b"null") + b"}"
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def sse_event(update_id: str, value: bytes) -> bytes:
    """One Server-Sent Event: ``id:`` the update's id (the GE's header), ``data:`` the value
    written (a line of its own per line of the value)."""
    head = f"id: {update_id}\n".encode() if update_id else b""
    data = b"".join(b"data: " + line + b"\n" for line in (value or b"").split(b"\n"))
    return head + data + b"\n"


class Server:
    def __init__(self, thing: Instance, emissions: Optional[list] = None):
        self.thing = thing
        self.emissions = emissions if emissions is not None else []   # sse_events rows
        self.servers = asyncio.Semaphore(thing.threads)
        self.subscribers: dict[str, list[asyncio.StreamWriter]] = {
            prop: [] for prop in thing.streams.values()}
        self.polls: dict[str, list[tuple[asyncio.StreamWriter, asyncio.Future]]] = {  # held GETs
            prop: [] for prop in thing.streams.values()}

    def _is_stream(self, method: str, path: str, accept: str) -> bool:
        """A GET of an observeproperty SSE form (on a path it shares with a read: only when the
        client accepts text/event-stream)."""
        return method == "GET" and path in self.thing.streams and \
            path not in self.thing.longpolls and (
                path not in self.thing.reads or "text/event-stream" in accept)

    def _answer_polls(self, key: str, update_id: str, value: bytes) -> int:
        """Answer every long-poll GET held for ``key`` (each connection then reads its next
        request: the client's next poll); how many."""
        held, self.polls[key] = self.polls[key], []
        answer = poll_answer(update_id, value)
        held = [(w, f) for w, f in held if not w.is_closing() and not f.done()]
        for w, f in held:
            w.write(answer)
            f.set_result(None)
        return len(held)

    async def _hold(self, prop: str, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        """Hold a subscriber's stream until it closes it."""
        writer.write(SSE_HEAD)
        await writer.drain()
        self.subscribers[prop].append(writer)
        try:
            while await reader.read(4096):
                pass
        finally:
            self.subscribers[prop].remove(writer)

    def _notify(self, method: str, path: str, update_id: str, value: bytes) -> None:
        """A write took effect: an event to every stream of the property (buffered writes, no
        wait for a slow subscriber)."""
        w = self.thing.writes.get(path)
        if w is None or w[0] != method:
            return
        event = sse_event(update_id, value)
        for sub in self.subscribers[w[1]]:
            if not sub.is_closing():
                sub.write(event)
        self._answer_polls(w[1], update_id, value)

    async def emit(self, ev: EventLoad) -> None:
        """Emit ``ev`` on its schedule until cancelled: the event to every stream of it, the
        emission stamped (CLOCK_MONOTONIC, user space) right before the writes."""
        from wotbench.things.sse_events import event_id
        from wotbench.things.sse_notify import MARKER
        loop = asyncio.get_running_loop()
        value = self.thing.resources[ev.path].body
        due = loop.time() + ev.schedule.phase_ms / 1e3
        n = 0
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            eid = event_id(ev.gi, ev.index, n)
            event = sse_event(f"{MARKER}{eid}", value)
            stamp = time.monotonic_ns()
            subs = [w for w in self.subscribers[ev.key] if not w.is_closing()]
            for w in subs:
                w.write(event)
            polled = self._answer_polls(ev.key, f"{MARKER}{eid}", value)
            self.emissions.append((eid, ev.device, ev.path, stamp, len(subs) + polled))
            n += 1
            due += ev.schedule.next_gap_ms() / 1e3

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
                length, close, accept, update_id = 0, False, "", ""
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
                    elif name == "accept":
                        accept = value
                    elif name == UPDATE_HEADER:
                        update_id = value.strip()
                body_in = await reader.readexactly(length) if length else b""
                path = urlsplit(target).path.lstrip("/")
                if self._is_stream(method, path, accept):
                    await self._hold(self.thing.streams[path], reader, writer)
                    break
                if method == "GET" and path in self.thing.longpolls:
                    # held: answered by the next write / event (one per connection: the next
                    # request is read only after that answer)
                    answered = asyncio.get_running_loop().create_future()
                    self.polls[self.thing.streams[path]].append((writer, answered))
                    await answered
                    await writer.drain()
                    continue
                r, status = self._answer(method, target)
                if r is not None:
                    await self._serve(r.service_us)
                    if self.subscribers:   # the write has taken effect: its notification
                        self._notify(method, path, update_id, body_in)
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


def _host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


async def _main(served: list[tuple[str, str, Instance]], emissions: list) -> None:
    """One listening socket per instance, all on this event loop, and each instance's event
    emitters; until SIGTERM or SIGINT."""
    servers, emitters = [], []
    for name, listen, thing in served:
        host, port = _host_port(listen)
        srv = Server(thing, emissions)
        try:
            servers.append(await asyncio.start_server(srv.connection, host, port, backlog=256))
        except OSError as e:
            raise SystemExit(f"http_thing: {name}: cannot listen on {listen}: {e}") from None
        emitters += [asyncio.ensure_future(srv.emit(ev)) for ev in thing.events]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"http_thing: {len(servers)} instance(s) listening", flush=True)
    await stop.wait()
    for t in emitters:
        t.cancel()
    for s in servers:
        s.close()


def _events_out(given: Optional[str]) -> Optional[Path]:
    """Where the emissions go: ``--events-out``, else next to the stdout file (the process
    backend's device directory); None when stdout is no file."""
    if given:
        return Path(given)
    try:
        out = Path(os.readlink("/proc/self/fd/1"))
    except OSError:
        return None
    from wotbench.things.sse_events import EMISSIONS_FILE
    return out.parent / EMISSIONS_FILE if out.is_file() else None


def _parse_instance(text: str) -> tuple[str, str]:
    name, sep, listen = text.partition("=")
    if not sep or ":" not in listen:
        raise argparse.ArgumentTypeError(f"{text!r}, expected NAME=ADDR:PORT")
    return name, listen


def _raise_nofile(instances: int) -> None:
    """Each instance holds its listening socket and the GEs' keep-alive connections: the soft
    limit of open files raised to the hard one; SystemExit when even that is too few."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = FDS_PER_INSTANCE * instances + FDS_SPARE
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"http_thing: {instances} instances need at least {need} open files, "
                         f"the hard limit (ulimit -Hn) is {hard}: raise it or split the group")
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


FDS_PER_INSTANCE = 2   # its listening socket and one GE connection (gateways.http.connections 1)
FDS_SPARE = 64         # readiness probes, the interpreter's own files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="ADDR:PORT")
    ap.add_argument("--name", required=True, help="the device's name, <group>-<index>")
    ap.add_argument("--spec", required=True, help="the things: entry (ThingSpec JSON)")
    ap.add_argument("--thing", type=int, required=True, help="its index in things:")
    ap.add_argument("--group-index", type=int, required=True, help="its index in devices:")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--instance", type=_parse_instance, action="append", default=[],
                    metavar="NAME=ADDR:PORT", help="another instance this process serves")
    ap.add_argument("--events-out", help="the emission file of subscribeevent over SSE "
                    "(default: sse-events.csv beside the stdout file)")
    a = ap.parse_args(argv)
    named = [(a.name, a.listen)] + a.instance
    _raise_nofile(len(named))
    things = instances(a.spec, a.thing, a.group_index, a.seed, named)
    emissions: list = []
    try:
        asyncio.run(_main([(n, listen, t) for (n, listen), t in zip(named, things)], emissions))
    except KeyboardInterrupt:
        pass
    if any(t.events for t in things):
        out = _events_out(a.events_out)
        if out is None:
            print("http_thing: stdout is no file and no --events-out: the "
                  f"{len(emissions)} emissions are not written", flush=True)
        else:
            from wotbench.things.sse_events import write_emissions
            write_emissions(out, emissions)
            print(f"http_thing: {len(emissions)} emissions -> {out}", flush=True)
    return 0


if __name__ == "__main__":
    # run as a file by the process backend (a minimal environment): import the wotbench tree
    # this file is in, so the instance serves what that tree's trace generator computed
    sys.path.insert(0, str(SCRIPT.parents[2]))
    sys.exit(main())
