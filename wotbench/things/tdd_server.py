"""A Thing Description Directory for a run: Domus TDD API (PyPI ``domus-tdd-api``, W3C WoT
Discovery's directory API) over an in-process SPARQL store (PyPI ``pyoxigraph``).

``wotbench-tdd --listen ADDR:PORT [--sparql-port N]`` (a ``devices[].server`` command,
configs/td-directory.yaml). Domus keeps TDs in a SPARQL 1.1 store it reaches over HTTP
(Fuseki in its own deployment, which is not packaged for Debian or PyPI); here a small
SPARQL protocol endpoint on loopback answers it from an in-memory Oxigraph store: POST
``query=`` (SELECT/ASK as SPARQL JSON results, CONSTRUCT/DESCRIBE as the RDF syntax asked for)
and ``update=``, the default graph the union of the named graphs (what Domus requires). Domus
turns JSON-LD into triples with node.js (its bundled jsonld.js): ``node`` must be installed
(Debian ``nodejs``). The W3C TD 1.1 JSON-LD context is Domus's own copy; the discovery context
is replaced by its copy too (``OVERWRITE_DISCOVERY``), so nothing is fetched from the web. Its
expiry sweep (TTLs) is off: its query has an empty ``IN ()`` when nothing expired, which
Oxigraph refuses.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

_GRAPH_FORMATS = {"application/n-triples": "N_TRIPLES", "text/turtle": "TURTLE",
                  "application/rdf+xml": "RDF_XML", "application/n-quads": "N_QUADS"}


def _store_handler(store, ox):
    lock = threading.Lock()   # one writer at a time; Oxigraph's store is safe, Domus's
    #                           delete-then-insert sequences are not atomic anyway

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:   # one line per query would drown the log
            pass

        def _answer(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(n).decode("utf-8"))
            try:
                if "update" in form:
                    with lock:
                        store.update(form["update"][0])
                    return self._answer(204, b"")
                if "query" not in form:
                    return self._answer(400, b"expected query= or update=")
                res = store.query(form["query"][0], use_default_graph_as_union=True)
            except (SyntaxError, ValueError, OSError) as e:
                return self._answer(400, str(e).encode())
            if isinstance(res, ox.QueryTriples):
                accept = (self.headers.get("Accept") or "").split(",")[0].strip()
                name = _GRAPH_FORMATS.get(accept, "N_TRIPLES")
                fmt = getattr(ox.RdfFormat, name)
                return self._answer(200, res.serialize(format=fmt), fmt.media_type)
            fmt = ox.QueryResultsFormat.JSON
            return self._answer(200, res.serialize(format=fmt), fmt.media_type)

    return Handler


class _StoreServer(ThreadingHTTPServer):
    # Domus opens a connection per SPARQL query, several per directory request: the default
    # listen backlog of 5 overflowed under 8 concurrent requests (its client timed out connecting)
    request_queue_size = 256
    daemon_threads = True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wotbench-tdd", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, help="ADDR:PORT of the directory's HTTP API")
    ap.add_argument("--sparql-port", type=int, default=0,
                    help="the SPARQL endpoint's loopback port (0: any free one)")
    ap.add_argument("--workdir", help="a writable directory for Domus's config.toml (a "
                    "server's {scratch}); default: a new temporary directory")
    args = ap.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"wotbench-tdd: --listen {args.listen!r}, expected ADDR:PORT", file=sys.stderr)
        return 2
    import pyoxigraph as ox
    store = ox.Store()
    sparql = _StoreServer(("127.0.0.1", args.sparql_port), _store_handler(store, ox))
    threading.Thread(target=sparql.serve_forever, daemon=True).start()
    # Domus reads ./config.toml when it is imported: typed values (its environment variables
    # arrive as strings, and "0" would not switch its expiry sweep off)
    os.chdir(args.workdir or tempfile.mkdtemp(prefix="wotbench-tdd-"))
    Path("config.toml").write_text(
        f'SPARQLENDPOINT_URL = "http://127.0.0.1:{sparql.server_address[1]}/things"\n'
        f'TD_REPO_URL = "http://{args.listen}"\n'
        "OVERWRITE_DISCOVERY = true\n"
        "PERIOD_CLEAR_EXPIRE_TD = 0\n")
    from tdd import create_app
    app = create_app()
    app.run(host=host, port=int(port), threaded=True, use_reloader=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
