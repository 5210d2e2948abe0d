"""The notification sink (gateway-emulator/src/sink_*.c, build/notify-sink; issue 35): webhooks
it receives (Content-Length and chunked bodies, ids split across reads, keep-alive), a Server-
Sent Events and a WebSocket subscription to nginx's nchan module with the GE publishing updates that carry
{{seq}}, a CoAP observation of libcoap's coap-server, the update -> notification latency
(wotbench.analysis.notify_sink), and bad input refused before anything starts."""
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from testkit.ge import run_ge, write_trace
from testkit.nchan import Nchan, nchan_available
from testkit.nginx import free_tcp_port
from wotbench.analysis import notify_sink


class Sink:
    def __init__(self, binary, out: Path, *args, duration_ms=4000):
        self.out, self.ready = out, out.parent / (out.name + ".ready")
        self.proc = subprocess.Popen([str(binary), "--out", str(out), "--duration-ms",
                                      str(duration_ms), "--ready-file", str(self.ready), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_ready(self, timeout=5):
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the sink never got ready"
            time.sleep(0.02)

    def finish(self, timeout=20):
        _, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        notes = pd.read_csv(self.out / "notifications.csv")
        return notes, json.loads((self.out / "sink.json").read_text())


def test_webhooks_with_both_framings_and_split_ids(sink_bin, tmp_path):
    port = free_tcp_port("127.0.0.1")
    s = Sink(sink_bin, tmp_path / "s", "--marker", "urn:e:", "--webhook",
             f"hook=127.0.0.1:{port}", duration_ms=1500)
    s.wait_ready()
    c = socket.create_connection(("127.0.0.1", port))
    body = b'{"id": "urn:e:0000000042", "v": 1}'
    head = b"POST /n HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    msg = head + body
    for cut in (10, len(head) + 8, len(head) + 17):   # in the head, in the marker, in the id
        c.sendall(msg[:cut])
        time.sleep(0.05)
        c.sendall(msg[cut:])
        assert c.recv(200).startswith(b"HTTP/1.1 204")
    chunked = (b"POST /n HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"9\r\nid urn:e:\r\n3\r\n77,\r\n0\r\n\r\n")
    c.sendall(chunked)
    assert c.recv(200).startswith(b"HTTP/1.1 204")
    c.close()
    curl = shutil.which("curl")
    if curl:   # a client nobody here wrote
        subprocess.run([curl, "-s", "-X", "POST", "--data", "x urn:e:5 y",
                        f"http://127.0.0.1:{port}/n"], check=True, timeout=10)
    notes, sink = s.finish()
    # the chunked body's marker and id straddle two chunks: only data bytes are scanned
    ids = notes["id"].tolist()
    assert ids[:4] == [42, 42, 42, 77]
    assert (notes["kernel"] == 1).all() and notes["received_ns"].is_monotonic_increasing
    hook = sink["subscribers"][0]
    assert hook["kind"] == "webhook" and hook["messages"] == 4 + bool(curl)
    if curl:
        assert ids[-1] == 5


@pytest.mark.skipif(not nchan_available(), reason="nginx's nchan module is not installed "
                    "(apt-get install libnginx-mod-nchan)")
def test_sse_subscription_to_nchan_matches_the_ge_updates(ge_asan_bin, sink_bin, tmp_path):
    (tmp_path / "body.txt").write_text("update urn:e:{{seq}} at {{time_ns}}")
    with Nchan() as nc:
        s = Sink(sink_bin, tmp_path / "s", "--marker", "urn:e:", "--accept",
                 "text/event-stream", "--stream", f"sse={nc.uri('sub')}",
                 "--stream", f"sse2={nc.uri('sub')}", "--websocket",
                 f"ws={nc.uri('ws').replace('http://', 'ws://')}", duration_ms=3000)
        s.wait_ready()
        rows = [(0, 2000 * i, "POST", nc.uri("pub"), 0) for i in range(200)]
        trace = write_trace(tmp_path / "t.csv", rows)
        p = run_ge(ge_asan_bin, trace, tmp_path / "ge", "--http-body-template",
                   str(tmp_path / "body.txt"))
        assert p.returncode == 0, p.stderr
        notes, sink = s.finish()
    assert [x["status"] for x in sink["subscribers"]] == [200, 200, 101]
    got = notify_sink.analyse(tmp_path / "ge", tmp_path / "s")
    assert [f.kind for f in got] == ["stream", "stream", "websocket"]
    for f in got:
        assert f.updates == 200
        assert f.notified == 200 and f.lost == 0 and f.unknown_ids == 0
        assert f.duplicates == 0 and f.kernel_share == 1.0
        assert 0 < f.latency_ms["p50"] < 50 and f.latency_ms["min"] > 0


@pytest.mark.skipif(not (shutil.which("coap-server-notls") and shutil.which("coap-client-notls")),
                    reason="libcoap's coap-server-notls/coap-client-notls are not installed "
                    "(apt-get install libcoap3-bin)")
def test_coap_observe_of_libcoap_coap_server(sink_bin, tmp_path):
    port = free_tcp_port("127.0.0.1")
    srv = subprocess.Popen(["coap-server-notls", "-A", "127.0.0.1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        uri = f"coap://127.0.0.1:{port}/example_data"
        # its default content takes block-wise transfer, which the sink does not follow: a
        # small value first (the registration's answer then carries it)
        subprocess.run(["coap-client-notls", "-m", "put", "-e", "v urn:e:10;", uri],
                       check=True, timeout=10, capture_output=True)
        s = Sink(sink_bin, tmp_path / "s", "--marker", "urn:e:", "--observe", f"obs={uri}",
                 duration_ms=2500)
        s.wait_ready()
        for i in (11, 12, 13):
            subprocess.run(["coap-client-notls", "-m", "put", "-e", f"v urn:e:{i};", uri],
                           check=True, timeout=10, capture_output=True)
            time.sleep(0.1)
        notes, sink = s.finish()
    finally:
        srv.terminate()
        srv.wait(timeout=5)
    obs = sink["subscribers"][0]
    assert obs["kind"] == "observe" and obs["ready"] and obs["status"] == 0x45   # 2.05
    assert notes["id"].tolist() == [10, 11, 12, 13] and (notes["kernel"] == 1).all()
    assert obs["messages"] == 4


def test_bad_input_is_refused_before_anything_starts(sink_bin, tmp_path):
    def run(*args):
        return subprocess.run([str(sink_bin), "--out", str(tmp_path / "o"), *args],
                              capture_output=True, text=True, timeout=20)
    p = run("--marker", "x", "--stream", "s=http://127.0.0.1:1/sub")
    assert p.returncode == 1 and "--stream s=http://127.0.0.1:1/sub: cannot connect" in p.stderr
    p = run("--marker", "", "--webhook", "h=127.0.0.1:0")
    assert p.returncode == 2 and "--marker" in p.stderr
    p = run("--marker", "x", "--stream", "s=ftp://h/x")
    assert p.returncode == 2 and "expected NAME=http://HOST:PORT/PATH" in p.stderr
    p = run("--marker", "x", "--webhook", "a=127.0.0.1:0", "--webhook", "a=127.0.0.1:0")
    assert p.returncode == 2 and "a subscriber name not used before" in p.stderr
    p = run("--marker", "x")
    assert p.returncode == 2 and "at least one of --webhook/--stream/--observe" in p.stderr


class ScriptedServer:
    """A tiny HTTP/1.1 server on loopback that answers each request on each connection with the
    next response of its script (bytes, or a list of pieces sent 50 ms apart, a float: a pause
    of that many seconds); "close" ends the connection. It records the requests it read, per connection."""
    def __init__(self, script):
        import threading
        self.script, self.requests = list(script), []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(5)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, c):
        data = b""
        while b"\r\n\r\n" not in data:
            got = c.recv(4096)
            if not got:
                return None
            data += got
        return data

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            seen = []
            self.requests.append(seen)
            c.settimeout(5)
            with c:
                while True:
                    try:
                        req = self._read_request(c)
                    except OSError:
                        return
                    if req is None:
                        break
                    seen.append(req)
                    if not self.script:   # the last GET is held: open until the end
                        time.sleep(3)
                        return
                    step = self.script.pop(0)
                    if step == "close":
                        break
                    for piece in (step if isinstance(step, list) else [step]):
                        if isinstance(piece, float):
                            time.sleep(piece)
                        else:
                            c.sendall(piece)
                            time.sleep(0.05)

    def close(self):
        self.sock.close()


def test_longpoll_re_polls_on_the_same_connection_and_reconnects(sink_bin, tmp_path):
    # the held GET answered after a pause (the kernel turns receive stamps on a moment after a
    # process first asks for them: an answer at once may arrive unstamped)
    length = [0.3, b"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n{\"id\": \"urn:e:1\"}"]
    chunked = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nx urn:e",   # id split
               b"\r\n3\r\n:22\r\n0\r\n\r\n"]                                            # by chunks
    timeout = b"HTTP/1.1 204 No Content\r\n\r\n"           # "no update this time": poll again
    closing = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nurn:e:3 "
    after = [b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nurn:e:", b"4"]   # id at the very end
    srv = ScriptedServer([length, chunked, timeout, closing, "close", after])
    try:
        s = Sink(sink_bin, tmp_path / "s", "--marker", "urn:e:", "--longpoll",
                 f"lp=http://127.0.0.1:{srv.port}/things/plug-0/lp", duration_ms=2500)
        s.wait_ready()
        notes, sink = s.finish()
    finally:
        srv.close()
    assert notes["id"].tolist() == [1, 22, 3, 4]
    assert (notes["kernel"] == 1).all() and notes["received_ns"].is_monotonic_increasing
    lp = sink["subscribers"][0]
    assert lp["kind"] == "longpoll" and lp["status"] == 200 and lp["errors"] == 0
    assert lp["messages"] == 5                       # complete answers, the 204 among them
    # the first connection carried 4 GETs answered + the re-poll the server closed under;
    # then one reconnection: its GET answered, its re-poll held until the end
    assert [len(r) for r in srv.requests] == [5, 2]
    assert lp["connections"] == 2 and lp["polls"] == 7
    for conn in srv.requests:
        for req in conn:
            assert req.startswith(b"GET /things/plug-0/lp HTTP/1.1\r\nHost: 127.0.0.1:")


def test_longpoll_refusals(sink_bin, tmp_path):
    def run(*args):
        return subprocess.run([str(sink_bin), "--out", str(tmp_path / "o"), "--duration-ms",
                               "2000", *args], capture_output=True, text=True, timeout=20)
    p = run("--marker", "x", "--longpoll", "lp=ftp://h/x")
    assert p.returncode == 2 and "--longpoll lp=ftp://h/x: expected NAME=http://" in p.stderr
    p = run("--marker", "x", "--longpoll", "lp=http://127.0.0.1:1/x")
    assert p.returncode == 1 and "--longpoll lp=http://127.0.0.1:1/x: cannot connect" in p.stderr
    srv = ScriptedServer([b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"])
    try:
        p = run("--marker", "x", "--longpoll", f"lp=http://127.0.0.1:{srv.port}/x")
    finally:
        srv.close()
    assert p.returncode == 1 and "answered 'HTTP/1.1 404', expected a 2xx" in p.stderr
    assert json.loads((tmp_path / "o" / "sink.json").read_text())["subscribers"][0]["status"] == 404
