"""A third-party CoAP server for the tests and examples: aiocoap (PyPI) serving /time, /hello and
an observable /state (a PUT replaces its payload and aiocoap notifies its observers: RFC 7641
done by aiocoap) on the address and port it is given. WoTbench starts it like any user's server
(``devices[].server.command``); nothing in it knows about WoTbench.

    python aiocoap_server.py --bind 127.0.0.10 --port 5683
"""
import argparse
import asyncio
import time

import aiocoap
import aiocoap.resource as resource


class Time(resource.Resource):
    async def render_get(self, request):
        return aiocoap.Message(payload=time.strftime("%H:%M:%S").encode())


class Hello(resource.Resource):
    async def render_get(self, request):
        return aiocoap.Message(payload=b"hello")


class State(resource.ObservableResource):
    def __init__(self):
        super().__init__()
        self.payload = b"init"

    async def render_get(self, request):
        return aiocoap.Message(payload=self.payload)

    async def render_put(self, request):
        self.payload = request.payload
        self.updated_state()   # aiocoap sends each observer a notification
        return aiocoap.Message(code=aiocoap.CHANGED)


async def main(bind: str, port: int) -> None:
    site = resource.Site()
    site.add_resource(["time"], Time())
    site.add_resource(["hello"], Hello())
    site.add_resource(["state"], State())
    await aiocoap.Context.create_server_context(site, bind=(bind, port))
    await asyncio.get_running_loop().create_future()   # serve until SIGTERM


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5683)
    a = ap.parse_args()
    try:
        asyncio.run(main(a.bind, a.port))
    except KeyboardInterrupt:
        pass
