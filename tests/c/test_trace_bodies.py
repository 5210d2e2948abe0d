"""The trace's body column (docs/CONTRACTS.md §1, gateway-emulator/src/trace.c): each request
carries its own bytes, decoded once at the load and copied into the prepared request before the
start. Over CoAP checked by a server nobody here wrote (libcoap's coap-server-notls with dynamic
resources, -d: a PUT to a new path creates a resource holding the PUT's payload, which
coap-client then GETs back); over HTTP by the scriptable server (every byte it received)."""
import shutil
import subprocess

import pytest

from testkit.ge import check_consistent, libcoap_dynamic_server as coap_server, run_ge
from testkit.http_server import HttpServer
from wotbench.workload.formats import TRACE_BODY_COLUMN, encode_body

HEADER = "device_id,send_time_us,method,uri,payload_bytes" + TRACE_BODY_COLUMN
# JSON with the bytes the encoding must carry: ',' '%' a space, a line break, UTF-8
BODIES = [b'{"id":"urn:t:0","v":21.5}', b'{"a":[1,2,3],"p":"50%"}', b'"caf\xc3\xa9 au lait"',
          b'{"n":null,\n"b":true}', b"42"]


def _trace(path, rows) -> None:
    """rows: (device, time_us, method, uri, body bytes or None for filler of n bytes, n)."""
    lines = [HEADER] + [f"{d},{t},{m},{u},{n if b is None else len(b)},"
                        f"{'' if b is None else encode_body(b)}" for d, t, m, u, b, n in rows]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.skipif(not shutil.which("coap-server-notls") or not shutil.which("coap-client-notls"),
                    reason="libcoap3-bin (coap-server-notls, coap-client-notls) not installed")
def test_coap_requests_carry_their_own_bodies_to_a_libcoap_server(ge_asan_bin, tmp_path):
    with coap_server() as base:
        rows = [(k, 2000 * k, "PUT", f"{base}/b/{k}", b, 0) for k, b in enumerate(BODIES)]
        rows.append((9, 20000, "PUT", f"{base}/b/filler", None, 7))   # no body: filler
        _trace(tmp_path / "t.csv", rows)
        p = run_ge(ge_asan_bin, tmp_path / "t.csv", tmp_path / "o", "--timeout-ms", "2000")
        assert p.returncode == 0, p.stderr
        got, _ = check_consistent(tmp_path / "o", len(rows))
        assert [g["outcome"] for g in got] == ["ok"] * len(rows), got

        def stored(path: str) -> bytes:
            out = subprocess.run(["coap-client-notls", "-m", "get", f"{base}/{path}"],
                                 capture_output=True, timeout=20)
            assert out.returncode == 0, out
            return out.stdout.rstrip(b"\n")
        for k, b in enumerate(BODIES):
            assert stored(f"b/{k}") == b.rstrip(b"\n")
        assert stored("b/filler") == b"x" * 7


def test_http_requests_carry_their_own_bodies(ge_asan_bin, tmp_path):
    with HttpServer() as srv:
        rows = [(k, 1000 * k, "PUT" if k % 2 else "POST", srv.uri(f"things/t{k}"), b, 0)
                for k, b in enumerate(BODIES)]
        rows += [(7, 9000, "GET", srv.uri("things/t0"), None, 0),
                 (8, 10000, "PATCH", srv.uri("things/t1"), None, 5)]
        _trace(tmp_path / "t.csv", rows)
        p = run_ge(ge_asan_bin, tmp_path / "t.csv", tmp_path / "o", "--http-connections", "2",
                   "--http-header", "Content-Type: application/td+json")
        assert p.returncode == 0, p.stderr
        got, _ = check_consistent(tmp_path / "o", len(rows))
        seen = list(srv.seen)
    assert [g["outcome"] for g in got] == ["ok"] * len(rows)
    with_body = {x.target: x for x in seen if x.method in ("PUT", "POST")}
    for k, b in enumerate(BODIES):
        x = with_body[f"/things/t{k}"]
        assert x.body == b and int(x.headers["content-length"]) == len(b)
        assert x.headers["content-type"] == "application/td+json"
    assert [x.body for x in seen if x.method == "PATCH"] == [b"x" * 5]   # no body: filler
    assert [x.body for x in seen if x.method == "GET"] == [b""]


def test_a_body_column_with_a_body_template_is_refused(ge_bin, tmp_path):
    (tmp_path / "b.txt").write_text("{{seq}}")
    _trace(tmp_path / "t.csv", [(0, 0, "PUT", "coap://127.0.0.1:5683/a", b"1", 0)])
    p = run_ge(ge_bin, tmp_path / "t.csv", tmp_path / "o", "--http-body-template",
               str(tmp_path / "b.txt"))
    assert p.returncode == 2
    assert p.stderr.strip() == (f"{tmp_path / 't.csv'}:1: a body column with "
                                "--http-body-template, expected one of them (each request's own "
                                "body, or one template for all)")
